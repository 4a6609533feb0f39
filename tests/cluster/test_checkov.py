"""checkov on what Sluice puts into a cluster: the chart rendered with every optional part, and the
objects a pool becomes. Zero findings but those `tests/checkov/skips.yaml` gives a reason for;
the running pool's real pods are scanned in the node tier."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sluice.api.pool import StreamingPool
from sluice.operator.builders import pool_objects
from sluice.testing.checkov import scan, skips, unexplained
from sluice.testing.controlplane import ControlPlane, kube_version

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def test_the_chart_and_a_pools_objects_pass_checkov_but_for_reasoned_skips(control_plane: ControlPlane, tmp_path: Path) -> None:
    rendered = control_plane.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--namespace", "sluice-system",
                                  "--set", "alerts.enabled=true", "--set", "dashboard.enabled=true",
                                  "--set", "metrics.serviceMonitor.enabled=true", "--set", "podDisruptionBudget.enabled=true").stdout
    chart = [d for d in yaml.safe_load_all(rendered) if d]
    pool = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    pool["metadata"]["uid"] = "0d6f0b7e-0000-4000-8000-000000000002"
    objects = pool_objects(pool, StreamingPool.model_validate(pool), "sluice-system", "t")
    findings = scan(chart + objects, tmp_path / "scan")
    listed = skips()
    assert unexplained(findings, listed) == []
    # and the checks that pass now stay passing: the hardening each guards is in place
    kinds = {d["kind"] for d in chart + objects}
    assert {"Deployment", "NetworkPolicy", "PrometheusRule", "PodMonitor", "ConfigMap", "PodDisruptionBudget"} <= kinds
    assert not any(f.check == "CKV2_K8S_6" for f in findings), "a pod without a NetworkPolicy"
    assert not any(f.check in ("CKV_K8S_22", "CKV_K8S_8") for f in findings), "a writable root or no liveness probe"


def test_the_skip_list_only_lists_what_checkov_finds(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A skip that no longer matches a finding (in this scan or the node tier's real pods) is stale;
    the ones only real executor pods raise are named here."""
    rendered = control_plane.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--namespace", "sluice-system").stdout
    pool = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    pool["metadata"]["uid"] = "0d6f0b7e-0000-4000-8000-000000000003"
    objects = [d for d in yaml.safe_load_all(rendered) if d] + pool_objects(pool, StreamingPool.model_validate(pool),
                                                                             "sluice-system", "t")
    found = {f.check for f in scan(objects, tmp_path / "scan")}
    executor_only = {"CKV_K8S_8"}  # Spark's executor pods, scanned in the node tier
    assert set(skips()) - executor_only <= found
