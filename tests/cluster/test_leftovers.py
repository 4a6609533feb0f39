"""A test run killed with SIGKILL leaves etcd and kube-apiserver behind; the next run reaps them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice.testing.controlplane import build_binaries, reap_leftovers
from sluice.testing.processes import RUN_DIR
from sluice.testing.processes import alive as _alive

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from sluice.testing.controlplane import ControlPlane
plane = ControlPlane(Path({kube!r}), Path({helm!r}), Path({work!r})).start()
print(" ".join(str(p.pid) for _, p in plane.procs), flush=True)
time.sleep(600)
"""


def test_leftovers_of_a_killed_run_are_reaped(tmp_path: Path) -> None:
    kube, helm = build_binaries()[:2]
    script = SCRIPT.format(root=str(ROOT), kube=str(kube), helm=str(helm), work=str(tmp_path))
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        children = [int(p) for p in line.split()]
        assert len(children) == 2, f"the control plane did not start: {line!r}"
        # a concurrent, live run's processes are not touched
        assert not set(reap_leftovers()) & set(children)
        assert all(_alive(p) for p in children)
        owner.send_signal(signal.SIGKILL)  # the run dies without tearing anything down
        owner.wait(timeout=10)
        assert all(_alive(p) for p in children)
        assert set(children) <= set(reap_leftovers())
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{p}").exists() and _zombie_or_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_zombie_or_alive(p) for p in children)
        assert not any(str(p) in f.name for f in RUN_DIR.glob("*.pid") for p in children)
    finally:
        if owner.poll() is None:
            owner.kill()


def _zombie_or_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z" and _alive(pid)

