"""Honest HA: two operator replicas with kopf peering against the real apiserver; one acts, the
other stands by and takes over when the first is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice.testing.controlplane import ControlPlane, free_port
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]
PEERING = "sluice-ha-test"


def _pool(name: str) -> str:
    # a runtime that is not there: the operator still applies the pool's objects and says so in status
    return (f"apiVersion: sluice.dev/v1alpha1\nkind: StreamingPool\nmetadata:\n  name: {name}\n"
            f"  annotations: {{sluice.dev/runtime-url: 'http://127.0.0.1:{free_port()}'}}\nspec: {{}}\n")


def _operator(plane: ControlPlane, priority: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "SLUICE_NAMESPACE": "sluice-ha",
           "SLUICE_METRICS_PORT": "-1", "SLUICE_HEALTH_PORT": "-1", "SLUICE_PEERING": "true",
           "SLUICE_PEERING_NAME": PEERING, "SLUICE_PEERING_PRIORITY": str(priority),
           "SLUICE_PEERING_LIFETIME": "5", "SLUICE_POOL_SYNC_INTERVAL": "3"}
    return subprocess.Popen([sys.executable, "-m", "sluice.operator"], env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)


def test_one_replica_acts_and_a_standby_takes_over(crds_installed: ControlPlane, tmp_path: Path) -> None:
    plane = crds_installed
    plane.kubectl("create", "namespace", "sluice-ha", check=False)
    plane.kubectl("apply", "-f", "-", input=f"apiVersion: kopf.dev/v1\nkind: ClusterKopfPeering\nmetadata:\n  name: {PEERING}\n")
    active_log, standby_log = tmp_path / "active.log", tmp_path / "standby.log"
    active = _operator(plane, 20, active_log)
    standby = _operator(plane, 10, standby_log)
    try:
        def peers() -> list[int]:
            status = (plane.get("clusterkopfpeering", PEERING) or {}).get("status") or {}
            return sorted(int(peer.get("priority", -1)) for peer in status.values())

        wait_for(lambda: peers() == [10, 20], 60, "both replicas in the peering object")
        time.sleep(3)  # what is under test is time passing: kopf pauses the lower one on the peering event
        plane.kubectl("apply", "-f", "-", input=_pool("ha-first"))
        wait_for(lambda: "ha-first" in active_log.read_text(errors="replace"), 60, "the active replica to handle the pool")
        wait_for(lambda: plane.get("deployment", "sluice-pool-ha-first", "sluice-ha") is not None, 60,
                 "the pool's Deployment")
        assert "ha-first" not in standby_log.read_text(errors="replace")  # only one replica acted
        before = len(standby_log.read_text(errors="replace"))
        active.send_signal(signal.SIGKILL)
        active.wait(10)
        wait_for(lambda: "Resuming operations after the pause" in standby_log.read_text(errors="replace")[before:], 60,
                 "the standby to take over once the active replica's record is stale")
        plane.kubectl("apply", "-f", "-", input=_pool("ha-second"))
        wait_for(lambda: (plane.kubectl("get", "deployment", "sluice-pool-ha-second", "-n", "sluice-ha", check=False)
                          .returncode == 0), 60, "the standby, now active, to create the new pool's Deployment")
    finally:
        for proc in (active, standby):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        plane.kubectl("delete", "sp", "ha-first", "ha-second", "--wait=false", check=False)
