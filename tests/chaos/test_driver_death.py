"""Chaos: the Spark driver's JVM dies under a running pool runtime (SIGKILL of the JVM alone, as
the OOM killer or a JVM crash does). The runtime must not live on as a shell that answers
/healthz while no query runs: it exits non-zero with one sentence, so its pod restarts and the
operator registers its queries again.

Real parts: the runtime process (`python -m sluice.runtime`, local Spark and its JVM), the
control API over loopback HTTP.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sluice.testing.runtime_process import RuntimeProcess
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.spark, pytest.mark.slow]


def _rate_query() -> dict[str, object]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": "ticks", "namespace": "chaos"},
            "spec": {"pool": "p", "sla": {"latencyTarget": "10s"}, "trigger": {"interval": "500ms"},
                     "source": {"type": "rate", "rowsPerSecond": 5}, "pipeline": [{"filter": "value % 2 = 0"}],
                     "sink": {"type": "noop"}}}


def test_a_runtime_whose_driver_jvm_dies_exits_with_one_sentence(tmp_path: Path) -> None:
    runtime = RuntimeProcess(tmp_path / "runtime")
    runtime.workdir.mkdir()
    try:
        runtime.start()
        runtime.register(_rate_query())
        wait_for(lambda: (s := runtime.status("chaos", "ticks")) is not None and s.batches > 0, 120, "a committed batch")
        killed, at = runtime.kill_driver(), time.monotonic()
        wait_for(lambda: runtime.proc.poll() is not None, 60, f"the runtime to exit after its JVM ({killed}) was killed")
        took, code = time.monotonic() - at, runtime.proc.returncode
        log = (runtime.workdir / "runtime-1.log").read_text()
        assert code == 1, f"exit code {code}"
        last = [line for line in log.splitlines() if line.startswith("sluice runtime: ")]
        assert last and "the Spark driver exited (killed by SIGKILL)" in last[-1], log[-2000:]
        print(f"runtime exited {took:.1f} s after its driver JVM was killed: {last[-1]}")
    finally:
        runtime.stop()
