"""The benchmark's placement (`sluice.bench.placement`) on this machine's real cgroups: Spark's
runs and the load in groups of their own, with the weights results.json states, their CPU read
back, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sluice.bench.placement import (
    CGROUPS,
    LOAD_GROUP,
    LOAD_SHARES,
    SPARK_GROUP,
    SPARK_SHARES,
    open_placement,
)


def cpu_group(pid: int, tid: int | None = None) -> str:
    where = Path(f"/proc/{pid}/task/{tid}/cgroup") if tid else Path(f"/proc/{pid}/cgroup")
    for line in where.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and "cpuacct" not in controllers.split(","):
            return path
    return ""


def test_spark_s_runs_and_the_load_go_to_their_groups_and_their_cpu_is_read() -> None:
    placement = open_placement("local")
    if not (CGROUPS / "cpu" / "cpu.shares").exists():
        pytest.skip("no cgroup v1 cpu controller on this machine: the placement says so and moves nothing")
    assert placement.placed, placement.reason
    try:
        assert int((CGROUPS / "cpu" / LOAD_GROUP / "cpu.shares").read_text()) == LOAD_SHARES
        assert int((CGROUPS / "cpu" / SPARK_GROUP / "cpu.shares").read_text()) == SPARK_SHARES
        before = placement.cpu_seconds()
        # a run: its process and what it starts land in Spark's group from their first instruction
        child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '5'])"],
                                 preexec_fn=placement.spark_here)
        time.sleep(0.5)
        grandchildren = subprocess.run(["pgrep", "-P", str(child.pid)], capture_output=True, text=True).stdout.split()
        assert cpu_group(child.pid) == f"/{SPARK_GROUP}"
        assert grandchildren and all(cpu_group(int(p)) == f"/{SPARK_GROUP}" for p in grandchildren)
        # a producer thread: it alone moves, and its CPU is the load group's
        seen: list[str] = []

        def produce() -> None:
            placement.load_thread()
            seen.append(cpu_group(os.getpid(), threading.get_native_id()))
            end = time.thread_time() + 0.3
            while time.thread_time() < end:
                pass

        worker = threading.Thread(target=produce)
        worker.start()
        worker.join()
        assert seen == [f"/{LOAD_GROUP}"]
        assert cpu_group(os.getpid(), threading.get_native_id()) == "/"  # the test's own thread stayed
        after = placement.cpu_seconds()
        assert after["load"] is not None and before["load"] is not None and after["load"] - before["load"] >= 0.25
        record = placement.record(before, after, 1.0)
        assert record["placed"] and record["load"]["cpu_shares"] == LOAD_SHARES
        assert record["spark"]["group"] == SPARK_GROUP and record["cores"]["load"] >= 0.25
        child.kill()
        child.wait()
    finally:
        placement.close()
    assert not (CGROUPS / "cpu" / LOAD_GROUP).exists() and not (CGROUPS / "cpuacct" / SPARK_GROUP).exists()


def test_where_nothing_can_move_the_placement_says_why(tmp_path: Path) -> None:
    placement = open_placement("local", root=tmp_path)
    assert not placement.placed and "cgroup v2 or none" in placement.reason
    placement.load_thread()  # moves nothing, fails nothing
    assert placement.record({"load": None, "spark": None}, {"load": None, "spark": None}, 10.0) == {
        "placed": False, "reason": placement.reason, "cores": {"load": None, "spark": None}}
