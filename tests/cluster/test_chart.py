"""The Helm chart against the real apiserver with real helm: release-scoped names, options, probes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from sluice.api.constants import OPERATOR_HEALTH_PORT, OPERATOR_METRICS_PORT, OPERATOR_POD_LABEL
from sluice.operator.settings import Settings
from sluice.testing.controlplane import ControlPlane, free_port, kube_version
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]


def test_two_releases_in_two_namespaces_coexist(crds_installed: ControlPlane) -> None:
    """Every object was once named sluice-operator, so a second release failed on the ClusterRole."""
    releases = [("sluice", "ops-a"), ("sluice", "ops-b"), ("other", "ops-b")]
    try:
        for name, namespace in releases:
            crds_installed.helm("install", name, str(ROOT), "--namespace", namespace, "--create-namespace",
                                "--set", f"watchNamespaces={{tenant-{namespace}}}")
        roles = crds_installed.kubectl("get", "clusterroles", "-l", "app.kubernetes.io/component=operator",
                                       "-o", "name").stdout.split()
        assert sorted(roles) == ["clusterrole.rbac.authorization.k8s.io/other-sluice-operator-ops-b",
                                 "clusterrole.rbac.authorization.k8s.io/sluice-operator-ops-a",
                                 "clusterrole.rbac.authorization.k8s.io/sluice-operator-ops-b"]
        deployments = crds_installed.kubectl("get", "deployments", "-n", "ops-b", "-o", "name").stdout.split()
        assert sorted(deployments) == ["deployment.apps/other-sluice-operator", "deployment.apps/sluice-operator"]
    finally:
        for name, namespace in releases:
            crds_installed.helm("uninstall", name, "--namespace", namespace, check=False)


def test_optional_objects_and_pull_secrets_render(crds_installed: ControlPlane) -> None:
    rendered = crds_installed.helm(
        "template", "x", str(ROOT), "--kube-version", kube_version(), "--namespace", "ops", "--set", "podDisruptionBudget.enabled=true",
        "--set", "imagePullSecrets[0].name=registry", "--set", "fullnameOverride=custom").stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry"}] and docs["Deployment"]["metadata"]["name"] == "custom"
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    crds_installed.kubectl("create", "namespace", "ops", check=False)
    crds_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)


def test_the_values_defaults_are_the_code_defaults() -> None:
    values = yaml.safe_load((ROOT / "values.yaml").read_text())
    defaults = Settings()
    assert values["metrics"]["port"] == OPERATOR_METRICS_PORT == defaults.metrics_port
    assert values["healthPort"] == OPERATOR_HEALTH_PORT == defaults.health_port


def test_the_liveness_probe_is_kopfs_own(crds_installed: ControlPlane, tmp_path: Path) -> None:
    health, metrics = free_port(), free_port()
    env = {**os.environ, "KUBECONFIG": str(crds_installed.kubeconfig), "SLUICE_HEALTH_PORT": str(health),
           "SLUICE_METRICS_PORT": str(metrics), "SLUICE_NAMESPACE": "sluice-system"}
    with (tmp_path / "operator.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "sluice.operator"], env=env, stdout=log, stderr=log)
        try:
            def answers() -> bool:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2) as response:
                        return response.status == 200
                except OSError:
                    return False

            wait_for(answers, 60, "kopf's liveness endpoint")
        finally:
            proc.terminate()
            proc.wait(30)


def test_values_are_checked_against_the_generated_schema(crds_installed: ControlPlane) -> None:
    bad = crds_installed.helm("lint", "--strict", str(ROOT), "--set", "replicas=two", "--set", "metrics.port=abc",
                              "--set", "imagee.tag=x", "--set", "alerts.objective=2", check=False)
    said = bad.stdout + bad.stderr
    assert bad.returncode != 0
    for field in ("/replicas", "/metrics/port", "imagee", "/alerts/objective"):
        assert field in said, field
    crds_installed.helm("lint", "--strict", str(ROOT), "--set", "replicas=1", "--set", "alerts.objective=0.95",
                        "--set", "watchNamespaces={team-a,team-b}")


def test_tenants_edit_queries_in_their_namespace_and_only_read_pools(crds_installed: ControlPlane) -> None:
    plane = crds_installed
    try:
        plane.helm("install", "tenancy", str(ROOT), "--namespace", "ops-t", "--create-namespace")
        edit, view = "tenancy-sluice-operator-ops-t-tenant-edit", "tenancy-sluice-operator-ops-t-tenant-view"
        labels = json.loads(plane.kubectl("get", "clusterrole", edit, "-o", "json").stdout)["metadata"]["labels"]
        assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"  # folded into edit and admin
        assert json.loads(plane.kubectl("get", "clusterrole", view, "-o", "json").stdout)["metadata"]["labels"][
            "rbac.authorization.k8s.io/aggregate-to-view"] == "true"
        plane.kubectl("create", "namespace", "team-t", check=False)
        # kube-controller-manager (which aggregates) does not run here: bind the roles themselves
        plane.kubectl("create", "rolebinding", "carol-edit", f"--clusterrole={edit}", "--user=carol", "-n", "team-t")
        plane.kubectl("create", "rolebinding", "dave-view", f"--clusterrole={view}", "--user=dave", "-n", "team-t")

        def can(user: str, *what: str) -> bool:
            answer = plane.kubectl("auth", "can-i", *what, "--as", user, "--as-group", "system:authenticated", check=False)
            return answer.stdout.strip() == "yes"

        assert can("carol", "create", "streamingqueries", "-n", "team-t")
        assert not can("carol", "create", "streamingqueries", "-n", "default")  # only in the bound namespace
        assert can("carol", "get", "streamingpools") and can("dave", "list", "streamingpools")
        assert not can("carol", "delete", "streamingpools") and not can("carol", "patch", "streamingpools")
        assert can("dave", "get", "streamingqueries", "-n", "team-t")
        assert not can("dave", "create", "streamingqueries", "-n", "team-t")
    finally:
        plane.helm("uninstall", "tenancy", "--namespace", "ops-t", check=False)


def test_the_apiserver_fills_in_spec_defaults_from_the_models(crds_installed: ControlPlane) -> None:
    plane = crds_installed
    plane.kubectl("apply", "-f", "-", input="apiVersion: sluice.dev/v1alpha1\nkind: StreamingPool\n"
                                             "metadata: {name: defaulted}\nspec: {}\n")
    try:
        spec = json.loads(plane.kubectl("get", "sp", "defaulted", "-o", "json").stdout)["spec"]
        assert spec["policy"] == "cameo" and spec["minExecutors"] == 1 and spec["maxExecutors"] == 4
        table = plane.kubectl("get", "sp", "defaulted").stdout.splitlines()
        assert table[0].split()[:2] == ["NAME", "POLICY"] and table[1].split()[:2] == ["defaulted", "cameo"]
    finally:
        plane.kubectl("delete", "sp", "defaulted", "--wait=false", check=False)


def test_the_operator_may_create_every_object_of_a_pool(crds_installed: ControlPlane) -> None:
    """Kubernetes refuses a Role that grants what its creator lacks (RBAC escalation check): the
    driver's Role once named verbs the chart never gave the operator, and no pool could start."""
    from sluice.api.pool import StreamingPool
    from sluice.operator.builders import pool_objects

    namespace = "ops-grants"
    objects: list[dict[str, object]] = []
    crds_installed.helm("install", "grants", str(ROOT), "--namespace", namespace, "--create-namespace")
    try:
        account = crds_installed.kubectl("get", "serviceaccounts", "-n", namespace, "-o", "name").stdout.split()
        operator = next(a.split("/")[1] for a in account if "operator" in a)
        pool = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool",
                "metadata": {"name": "grants", "uid": "0d6f0b7e-0000-4000-8000-000000000001"},
                "spec": {"checkpoints": {"claimName": "grants-checkpoints"}}}
        objects[:] = pool_objects(pool, StreamingPool.model_validate(pool), namespace, token="t")
        # created for real, as the operator's own ServiceAccount (a dry run cannot bind the Role it
        # did not store, so the RoleBinding's escalation check needs the Role to exist)
        proc = crds_installed.kubectl(
            "apply", "-f", "-", input=yaml.safe_dump_all(objects), check=False,
            user=f"system:serviceaccount:{namespace}:{operator}",
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))
        assert proc.returncode == 0, proc.stderr
        assert {o["kind"] for o in objects} == {"ServiceAccount", "Role", "RoleBinding", "Secret", "ConfigMap",
                                                 "Service", "NetworkPolicy", "Deployment"}
    finally:
        crds_installed.kubectl("delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(objects), check=False)
        crds_installed.helm("uninstall", "grants", "--namespace", namespace, check=False)


def test_monitors_carry_the_selecting_labels_and_find_the_pool_pods(crds_installed: ControlPlane) -> None:
    from sluice.api.pool import StreamingPool
    from sluice.operator.builders import pool_objects

    rendered = crds_installed.helm("template", "x", str(ROOT), "--kube-version", kube_version(), "--namespace", "ops",
                                   "--set", "metrics.serviceMonitor.enabled=true",
                                   "--set", "metrics.serviceMonitor.labels.release=kps").stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
    for kind in ("ServiceMonitor", "PodMonitor"):
        assert docs[kind]["metadata"]["labels"]["release"] == "kps", kind
    pool = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "p", "uid": "u"}, "spec": {}}
    deployment = next(o for o in pool_objects(pool, StreamingPool.model_validate(pool), "ops", "t")
                      if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]
    selector = docs["PodMonitor"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    port = docs["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["port"]
    assert port in {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    # the metrics port is the one a pool's NetworkPolicy opens to Prometheus's namespaces; the operator's pods
    # carry the label its control-port rule lets in
    assert port == "metrics"
    operator_pod = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert operator_pod[OPERATOR_POD_LABEL[0]] == OPERATOR_POD_LABEL[1]
    off = crds_installed.helm("template", "x", str(ROOT), "--kube-version", kube_version(), "--set", "metrics.serviceMonitor.enabled=true",
                              "--set", "metrics.serviceMonitor.pools=false").stdout
    assert "kind: PodMonitor" not in off
