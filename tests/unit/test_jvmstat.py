"""The density benchmark's reading of the driver JVM's collections: `jstat -gc` parsed, and read
from a real JVM that collects on purpose."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sluice.bench.jvmstat import Collections, collections, parse_gc, pauses

JSTAT_GC = """\
    S0C         S1C         S0U         S1U          EC           EU           OC           OU          MC         MU       CCSC      CCSU     YGC     YGCT     FGC    FGCT     CGC    CGCT       GCT
        0.0         0.0         0.0         0.0      12288.0          0.0      45056.0      10168.0     9344.0     9117.0    1216.0    1094.8     12     0.090     3     0.033     2     0.004     0.127
"""


def test_jstat_s_counters_are_read_by_their_columns() -> None:
    read = parse_gc(JSTAT_GC)
    assert read == Collections(young=12, young_s=0.09, full=3, full_s=0.033, concurrent=2, concurrent_s=0.004)
    assert read.pause_s == pytest.approx(0.127)  # jstat's own GCT column
    assert parse_gc("") is None
    assert parse_gc("YGC YGCT\n1\n") is None  # a value missing
    assert parse_gc(JSTAT_GC.replace("     0.033", "         -")) is None
    # the throughput collector (the pool driver's) has no concurrent cycles: jstat prints "-"
    throughput = JSTAT_GC.replace("     2     0.004     0.127", "     -         -     0.123")
    assert parse_gc(throughput) == Collections(young=12, young_s=0.09, full=3, full_s=0.033, concurrent=0, concurrent_s=0.0)


def test_a_window_s_pauses_are_the_difference_of_two_readings() -> None:
    before = Collections(young=10, young_s=0.5, full=0, full_s=0.0, concurrent=0, concurrent_s=0.0)
    after = Collections(young=40, young_s=1.7, full=1, full_s=0.3, concurrent=2, concurrent_s=0.1)
    # 31 + 1 + 2 collections; (1.7 + 0.3 + 0.1) - 0.5 = 1.6 s paused of 80 s
    assert pauses(before, after, 80.0) == {"collections": 33, "full": 1, "pause_s": 1.6, "pause_share": 0.02}
    assert pauses(None, after, 80.0) is None
    assert pauses(before, after, 0.0) is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jstat") is None or shutil.which("java") is None, reason="needs a JDK's java and jstat")
def test_a_real_jvm_s_forced_collections_are_counted(tmp_path: Path) -> None:
    source = tmp_path / "Collect.java"
    source.write_text(
        "public class Collect { public static void main(String[] a) throws Exception {\n"
        "  for (int i = 0; i < 3; i++) { byte[][] junk = new byte[64][];\n"
        "    for (int j = 0; j < 64; j++) junk[j] = new byte[1 << 16]; System.gc(); }\n"
        "  System.out.println(\"ready\"); System.out.flush(); Thread.sleep(60000); } }\n")
    # the JVM as a child of a shell, as the runtime's JVM is a child of its Python process
    shell = subprocess.Popen(["sh", "-c", f"exec java {source} & wait"], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
    try:
        assert shell.stdout is not None and shell.stdout.readline().strip() == b"ready"
        read = collections(shell.pid)
        assert read is not None
        assert read.full >= 3  # System.gc() is a full collection under G1, the JVM's default here
        assert read.pause_s > 0
    finally:
        subprocess.run(["pkill", "-P", str(shell.pid)], check=False)
        shell.kill()
        shell.wait()
