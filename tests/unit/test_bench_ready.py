"""The Cameo benchmark starts its load once each run's queries are in (`await_ready`), with real
child processes standing in for `sluice run`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice.bench.cameo import await_ready


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_waits_for_every_runs_ready_file(tmp_path: Path) -> None:
    first, second = tmp_path / "ready", tmp_path / "lane-ready"
    procs = [_child(f"import time, pathlib; time.sleep({delay}); pathlib.Path({str(path)!r}).write_text('1'); time.sleep(5)")
             for path, delay in ((first, 0.3), (second, 0.8))]
    began = time.monotonic()
    try:
        await_ready([(first, procs[0], tmp_path / "run.log"), (second, procs[1], tmp_path / "lane-run.log")], timeout=30)
        assert first.exists() and second.exists()
        assert time.monotonic() - began >= 0.7  # not before the slower one
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_run_that_exits_first_fails_with_its_logs_tail_and_stops_the_others(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("starting Spark\nthe manifest names no topic\n")
    proc, lane = _child("import sys; sys.exit(3)"), _child("import time; time.sleep(60)")
    with pytest.raises(RuntimeError, match=r"exited \(3\) before its queries were running: starting Spark / the manifest names no topic"):
        await_ready([(tmp_path / "ready", proc, log), (tmp_path / "lane-ready", lane, tmp_path / "lane-run.log")], timeout=30)
    assert lane.wait(timeout=10) != 0  # the lane's run was killed, not left behind


def test_a_run_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    proc = _child("import time; time.sleep(60)")
    with pytest.raises(RuntimeError, match="was not ready within 1 s"):
        await_ready([(tmp_path / "ready", proc, tmp_path / "run.log")], timeout=1)
    assert proc.wait(timeout=10) != 0  # killed, not left behind
