"""A JVM's garbage-collection pauses, read with the JDK's own `jstat` (its `-gc` counters): how
much of a measured window the driver's JVM stood still. The benchmarks read it beside procfs'
CPU and memory; None where no `jstat` is on the PATH or the process is gone."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from .procfs import tree


@dataclass(frozen=True, slots=True)
class Collections:
    """A JVM's collections since it started (counts and seconds)."""

    young: int
    young_s: float
    full: int
    full_s: float
    concurrent: int
    """G1's concurrent cycles' stop-the-world phases (remark, cleanup)."""
    concurrent_s: float

    @property
    def pause_s(self) -> float:
        return self.young_s + self.full_s + self.concurrent_s


def parse_gc(text: str) -> Collections | None:
    """`jstat -gc PID`'s output (a header line and a value line) as counts and seconds; None if
    it has not the two lines or the columns."""
    lines = [line.split() for line in text.strip().splitlines()]
    if len(lines) != 2 or len(lines[0]) != len(lines[1]):
        return None
    fields = dict(zip(lines[0], lines[1], strict=True))
    try:
        return Collections(young=int(fields["YGC"]), young_s=float(fields["YGCT"]),
                           full=int(fields["FGC"]), full_s=float(fields["FGCT"]),
                           concurrent=int(_counted(fields.get("CGC"))), concurrent_s=float(_counted(fields.get("CGCT"))))
    except (KeyError, ValueError):  # a column missing, or "-" where a collector has none
        return None


def _counted(value: str | None) -> str:
    """A concurrent-cycle column: "-" (or absent) where the collector has no concurrent cycles
    (the throughput collector), which is none of them."""
    return "0" if value in (None, "-") else value


def java_pid(pid: int) -> int | None:
    """The first `java` process in a process group (the runtime's driver JVM); None if none."""
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/comm") as comm:
                if comm.read().strip() == "java":
                    return p
        except OSError:
            continue
    return None


def collections(pid: int) -> Collections | None:
    """The collections of the JVM in `pid`'s process group so far (None: no jstat, no JVM, or it
    did not answer within 20 s)."""
    jstat = shutil.which("jstat")
    java = java_pid(pid)
    if jstat is None or java is None:
        return None
    try:
        done = subprocess.run([jstat, "-gc", str(java)], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_gc(done.stdout) if done.returncode == 0 else None


def pauses(before: Collections | None, after: Collections | None, seconds: float) -> dict[str, float] | None:
    """Between two readings `seconds` apart: the collections' count, their pause seconds and the
    share of the window paused (pure; None without both readings)."""
    if before is None or after is None or seconds <= 0:
        return None
    paused = after.pause_s - before.pause_s
    return {"collections": (after.young + after.full + after.concurrent) - (before.young + before.full + before.concurrent),
            "full": after.full - before.full,
            "pause_s": round(paused, 3), "pause_share": round(paused / seconds, 4)}
