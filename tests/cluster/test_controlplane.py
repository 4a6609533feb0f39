"""The CRDs, examples and chart against a real kube-apiserver (schema, printer columns, RBAC, helm)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.manifest import parse_text
from sluice.testing.controlplane import ControlPlane, kube_version

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def _ensure_namespace(plane: ControlPlane, name: str) -> None:
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def test_examples_are_accepted_by_the_server(crds_installed: ControlPlane) -> None:
    for namespace in ("payments", "analytics"):
        _ensure_namespace(crds_installed, namespace)
    crds_installed.kubectl("apply", "-f", str(ROOT / "examples"))
    listed = json.loads(crds_installed.kubectl("get", "sq", "-A", "-o", "json").stdout)
    names = {f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in listed["items"]}
    assert {"payments/fraud-filter", "analytics/revenue-by-merchant", "analytics/checkout-clicks"} <= names
    assert crds_installed.kubectl("get", "sp", "shared", "-o", "name").stdout.strip() == "streamingpool.sluice.dev/shared"


WINDOWED = yaml.safe_load((ROOT / "examples" / "hourly-revenue.yaml").read_text())


def _mutated(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(WINDOWED)
    doc["metadata"]["name"] = "spot-check"
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


# Bad manifests that the server's schema (OpenAPI + CEL) and `sluice validate` must both refuse.
SPOT_CHECKS = [
    ("unknown source type", ("spec", "source", "type"), "socket"),
    ("negative duration", ("spec", "sla", "latencyTarget"), "-5s"),
    ("unparsable duration", ("spec", "sla", "latencyTarget"), "fast"),
    ("two kinds in one step", ("spec", "pipeline", 0), {"filter": "value > 1", "select": ["value"]}),
    ("kafka without topic", ("spec", "source"), {"type": "kafka", "bootstrapServers": "k:9092"}),
    ("zero shuffle partitions", ("spec", "resources", "shufflePartitions"), 0),
    ("unknown field", ("spec", "paralellism"), 4),
    ("percentile over 100", ("spec", "sla", "percentile"), 120),
    ("empty pipeline", ("spec", "pipeline"), []),
    ("bad pool name", ("spec", "pool"), "Shared_Pool"),
]


@pytest.mark.parametrize(("case", "path", "value"), SPOT_CHECKS, ids=[c[0] for c in SPOT_CHECKS])
def test_server_schema_and_sluice_validate_agree(crds_installed: ControlPlane, case: str, path: tuple[Any, ...], value: Any) -> None:
    _ensure_namespace(crds_installed, "analytics")
    doc = _mutated(path, value)
    _, errors = parse_text(yaml.safe_dump(doc), "m.yaml")
    assert errors, f"sluice validate accepted {case}"
    server = crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)
    assert server.returncode != 0, f"the API server accepted {case}"
    assert "spot-check" in server.stderr or "invalid" in server.stderr.lower() or "unknown field" in server.stderr


POOL_CHECKS = [
    ("utilization", 0), ("utilization", 1.5), ("mode", "maybe"), ("scaleDownDelay", "25h"),
    ("stabilizationWindow", "-1s"), ("catchUp", "0s"), ("catchUp", "2d"), ("maxScaleDownFactor", 0),
    ("effectivenessThreshold", 2),
]


@pytest.mark.parametrize(("field", "value"), POOL_CHECKS, ids=[f"{f}={v}" for f, v in POOL_CHECKS])
def test_bad_autoscaling_settings_are_refused_by_both_with_the_field(crds_installed: ControlPlane, field: str,
                                                                     value: Any) -> None:
    doc = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "spot-pool"},
           "spec": {"autoscaling": {field: value}}}
    _, errors = parse_text(yaml.safe_dump(doc), "p.yaml")
    assert len(errors) == 1 and errors[0].path == f"spec.autoscaling.{field}", errors
    server = crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)
    assert server.returncode != 0 and field in server.stderr, server.stderr


@pytest.mark.parametrize(("shape", "memory"), [("executor", "2Ti"), ("driver", "100Mi"),
                                               ("executor", "1000000000000000000000000000000")])
def test_memory_out_of_bounds_is_refused_by_both(crds_installed: ControlPlane, shape: str, memory: str) -> None:
    doc = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "spot-pool"},
           "spec": {shape: {"memory": memory}}}
    _, errors = parse_text(yaml.safe_dump(doc), "p.yaml")
    assert [e.path for e in errors] == [f"spec.{shape}.memory"], errors
    server = crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)
    assert server.returncode != 0 and "memory must lie within 512Mi..1Ti" in server.stderr, server.stderr
    crds_installed.kubectl("apply", "--dry-run=server", "-f", "-",
                           input=json.dumps({**doc, "spec": {shape: {"memory": "1Ti"}}}))


def test_a_valid_variation_passes_both(crds_installed: ControlPlane) -> None:
    _ensure_namespace(crds_installed, "analytics")
    doc = _mutated(("spec", "sla", "latencyTarget"), "1.5s")
    assert parse_text(yaml.safe_dump(doc), "m.yaml")[1] == []
    crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc))


def test_printer_columns_and_status_subresource(crds_installed: ControlPlane) -> None:
    _ensure_namespace(crds_installed, "payments")
    crds_installed.kubectl("apply", "-f", str(ROOT / "examples" / "fraud-filter.yaml"))
    # status sent through the main resource is dropped by the server ...
    crds_installed.kubectl("patch", "sq", "fraud-filter", "-n", "payments", "--type=merge",
                           "-p", '{"status": {"phase": "Running"}}')
    got = json.loads(crds_installed.kubectl("get", "sq", "fraud-filter", "-n", "payments", "-o", "json").stdout)
    assert "status" not in got or got["status"].get("phase") != "Running"
    # ... and kept through the status subresource
    status = {"status": {"phase": "Running", "latency": {"p50Ms": 80.0, "p99Ms": 412.5, "p99": "412ms"},
                         "slaAttainment": 0.993, "attainment": "99.3%", "executors": {"current": 2, "target": 2},
                         "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": "x."}],
                         "bottleneck": "stage 3", "message": "all fine"}}
    crds_installed.kubectl("patch", "sq", "fraud-filter", "-n", "payments", "--type=merge", "--subresource=status",
                           "-p", json.dumps(status))
    table = crds_installed.kubectl("get", "sq", "-n", "payments").stdout.splitlines()
    assert table[0].split() == ["NAME", "POOL", "SLA", "P99", "ATTAINMENT", "EXECUTORS", "READY", "PHASE", "AGE"]
    row = next(line.split() for line in table[1:] if line.startswith("fraud-filter"))
    assert row[1:8] == ["shared", "500ms", "412ms", "99.3%", "2", "True", "Running"]  # the units the operator writes
    wide = crds_installed.kubectl("get", "sq", "-n", "payments", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-2:] == ["BOTTLENECK", "MESSAGE"]  # -o wide only
    assert next(line for line in wide[1:] if line.startswith("fraud-filter")).split()[-4:] == ["stage", "3", "all",
                                                                                               "fine"]


def test_tenant_user_is_bound_by_rbac(crds_installed: ControlPlane) -> None:
    _ensure_namespace(crds_installed, "payments")
    denied = crds_installed.kubectl("get", "sq", "-n", "payments", user="alice", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "sq-reader", "namespace": "payments"},
        "rules": [{"apiGroups": ["sluice.dev"], "resources": ["streamingqueries"], "verbs": ["get", "list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-reads-sq", "namespace": "payments"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sq-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }
    crds_installed.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]}))
    assert crds_installed.kubectl("get", "sq", "-n", "payments", user="alice", check=False).returncode == 0
    # still nothing outside the namespace, and no writes
    assert crds_installed.kubectl("get", "sq", "-n", "analytics", user="alice", check=False).returncode != 0
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(crds_installed.api_client(user="alice"))
    assert custom.list_namespaced_custom_object("sluice.dev", "v1alpha1", "payments", "streamingqueries")["items"]
    with pytest.raises(ApiException) as denied_write:
        custom.delete_namespaced_custom_object("sluice.dev", "v1alpha1", "payments", "streamingqueries", "fraud-filter")
    assert denied_write.value.status == 403


def test_helm_chart_lints_renders_and_applies(crds_installed: ControlPlane, tmp_path: Path) -> None:
    lint = crds_installed.helm("lint", str(ROOT))
    assert "0 chart(s) failed" in lint.stdout
    package = crds_installed.helm("package", str(ROOT), "-d", str(tmp_path))
    assert "Successfully packaged" in package.stdout
    listing = __import__("tarfile").open(next(tmp_path.glob("sluice-*.tgz"))).getnames()
    assert all(n.split("/", 1)[1].split("/")[0] in {"Chart.yaml", "values.yaml", "values.schema.json", "templates", "crds", "README.md", "LICENSE", ".helmignore"} for n in listing), listing
    _ensure_namespace(crds_installed, "sluice-system")
    rendered = crds_installed.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--namespace", "sluice-system",
                                   "--set", "metrics.serviceMonitor.enabled=false").stdout
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(rendered) if d)
    # the operator's ClusterRole and binding; the tenants' edit and view roles; the pool reader and its binding
    assert kinds == ["ClusterRole"] * 4 + ["ClusterRoleBinding"] * 2 + ["Deployment", "NetworkPolicy", "Role", "RoleBinding",
                                                                         "Service", "ServiceAccount"]
    crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)


def test_get_reads_what_kubectl_reads_and_none_where_kubectl_fails(crds_installed: ControlPlane) -> None:
    """The tests' poller (`ControlPlane.get`, one kept-alive connection) against kubectl itself."""
    _ensure_namespace(crds_installed, "payments")
    crds_installed.kubectl("apply", "-f", str(ROOT / "examples" / "fraud-filter.yaml"))
    for kind, name, namespace in (("sq", "fraud-filter", "payments"), ("ns", "payments", None),
                                  ("secret", "missing-one", "payments"), ("sq", "fraud-filter", "analytics")):
        proc = crds_installed.kubectl("get", kind, name, "-o", "json", *(["-n", namespace] if namespace else []),
                                      check=False)
        expected = json.loads(proc.stdout) if proc.returncode == 0 else None
        got = crds_installed.get(kind, name, namespace)
        if got is not None:
            got["metadata"].pop("managedFields", None)  # kubectl hides them
        assert got == expected, (kind, name, namespace)
    assert crds_installed.get("sq", "fraud-filter", "payments") is not None  # found, not only equal as None
    listed = crds_installed.list("sq", "payments") or []
    assert "fraud-filter" in [q["metadata"]["name"] for q in listed]
    assert crds_installed.list("sq", "payments", "sluice.dev/no-such-label=x") == []  # the selector applies
    with pytest.raises(ValueError, match="not 'widgets'"):
        crds_installed.get("widgets", "x")
