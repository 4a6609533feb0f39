"""The operator (kopf, in-process) against the real kube-apiserver, driving a real runtime.

The runtime side is real too: a QueryHost on a local SparkSession behind the runtime's real
control API on loopback. There is no kubelet here, so the pool's driver pod never runs: the pool
is annotated with `sluice.dev/runtime-url` to point the operator at that loopback runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sluice.operator import settings
from sluice.runtime.control import make_control_app
from sluice.runtime.executors import ExecutorScaler
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread
from sluice.testing import prometheus
from sluice.testing.controlplane import ControlPlane, build_binaries, free_port, kube_version
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]
SYSTEM = "sluice-system"
RATES_WARMUP = 15.0
"""Seconds after a query's first rows whose batches DS2 leaves out, in this tier's runtime (the
product's 45 s, `runtime.hosted.RATES_WARMUP`, keeps the pod JVMs' compilers out of DS2's rates):
these tests check DS2's decisions and the operator's handling of them, whatever the warm-up, and
each would otherwise wait the 45 s once (2026-12-07: four tests, 54-100 s each)."""
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class World:
    plane: ControlPlane
    host: QueryHost
    runner: Any
    servers: list[ServerThread] = field(default_factory=list)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.plane.get(kind, name, namespace)

    def apply(self, manifest: dict[str, Any]) -> None:
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def serve_pool_runtime(self, pool: str, port: int) -> None:
        """Start the pool's runtime control API once the operator made its token Secret (with
        executor targets and state moves, as `python -m sluice.runtime` has them)."""
        secret = wait_for(lambda: self.get("secret", f"sluice-pool-{pool}-token", SYSTEM), what=f"{pool}'s token Secret")
        import base64

        token = base64.b64decode(secret["data"]["token"]).decode()
        scaler = ExecutorScaler.for_host(self.host)
        self.servers.append(ServerThread(make_control_app(self.host, token, executors=scaler), port=port).start())


def pool(name: str, port: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool",
            "metadata": {"name": name, "annotations": {"sluice.dev/runtime-url": f"http://127.0.0.1:{port}"}},
            "spec": {"policy": "cameo", **spec}}


def query(name: str, namespace: str, pool_name: str = "shared", sla: str = "2s", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"pool": pool_name, "source": {"type": "rate", "rowsPerSecond": 20},
                     "pipeline": [{"filter": "value % 2 = 0"}], "sink": {"type": "memory"},
                     "sla": {"latencyTarget": sla}, "trigger": {"interval": "500ms"}, **extra}}


def condition(body: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((body or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def start_operator() -> Any:
    from kopf.testing import KopfRunner

    runner = KopfRunner(["run", "-A", "--standalone", "-m", "sluice.operator.handlers"])
    runner.__enter__()
    return runner


@contextlib.contextmanager
def open_world(plane: ControlPlane, spark: Any, checkpoints: Path, **env: str) -> Iterator[World]:
    """The operator in-process against `plane`, with a QueryHost on `spark` to serve pools' runtimes."""
    for ns in (SYSTEM, "team-a", "team-b", "team-c"):
        plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    env = {"KUBECONFIG": str(plane.kubeconfig), "SLUICE_NAMESPACE": SYSTEM, "SLUICE_METRICS_PORT": str(free_port()),
           "SLUICE_STATUS_INTERVAL": "2", "SLUICE_POOL_SYNC_INTERVAL": "2", **env}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    settings.use(None)  # the operator reads its environment again
    host = QueryHost(spark, checkpoints, LocalScheduler(Scheduler("cameo", capacity=2)), rates_warmup=RATES_WARMUP)
    world = World(plane, host, start_operator())
    try:
        yield world
    finally:
        world.runner.__exit__(None, None, None)
        for server in world.servers:
            server.stop()
        host.stop_all()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        settings.use(None)


@pytest.fixture(scope="module")
def world(crds_installed: ControlPlane, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with open_world(crds_installed, spark, Path(tmp_path_factory.mktemp("ck"))) as world:
        port = free_port()
        # the loopback runtime's Spark has two local cores: its driver is given both (several of
        # these tests' 500 ms queries run at once, more than one driver core's batches)
        world.apply(pool("shared", port, allowedNamespaces=["team-a", "team-b"], quotas={"team-b": {"maxQueries": 1, "weight": 3}},
                         driver={"cores": 2}))
        world.serve_pool_runtime("shared", port)
        yield world


def test_pool_becomes_owned_objects_with_least_privilege(world: World) -> None:
    plane = world.plane
    pool_uid = world.get("sp", "shared")["metadata"]["uid"]  # type: ignore[index]
    expected = ["ConfigMap", "Deployment", "NetworkPolicy", "NetworkPolicy", "Role", "RoleBinding", "Secret", "Service",
                "ServiceAccount"]

    def owned() -> list[dict[str, Any]]:
        return list(json.loads(plane.kubectl("get", "deployments,services,serviceaccounts,roles,rolebindings,secrets,configmaps,"
                                             "networkpolicies", "-n", SYSTEM, "-l", "sluice.dev/pool=shared", "-o",
                                             "json").stdout)["items"])

    # the operator creates them one by one as it handles the pool: listed once it has (a listing
    # taken at once missed the Deployment on 2026-11-29)
    wait_for(lambda: sorted(item["kind"] for item in owned()) == expected, what="the pool's objects", every=1.0)
    listed = owned()
    assert sorted(item["kind"] for item in listed) == expected
    for item in listed:
        (owner,) = item["metadata"]["ownerReferences"]
        assert owner["kind"] == "StreamingPool" and owner["uid"] == pool_uid and owner["controller"] is True
    deployment = next(i for i in listed if i["kind"] == "Deployment")
    containers = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert containers == ["runtime", "scheduler"] and deployment["spec"]["strategy"]["type"] == "Recreate"
    driver = f"system:serviceaccount:{SYSTEM}:sluice-pool-shared"
    assert plane.kubectl("auth", "can-i", "create", "pods", "-n", SYSTEM, "--as", driver, check=False).stdout.strip() == "yes"
    assert plane.kubectl("auth", "can-i", "create", "pods", "-n", "team-a", "--as", driver, check=False).stdout.strip() == "no"
    assert plane.kubectl("auth", "can-i", "get", "secrets", "-n", SYSTEM, "--as", driver, check=False).stdout.strip() == "no"
    # a tenant user with full rights in its own namespace still cannot read the pool's token
    # (cluster-admin through a RoleBinding: everything, in team-a only; "admin" is aggregated by
    # kube-controller-manager, which does not run here)
    plane.kubectl("create", "rolebinding", "alice-admin", "--clusterrole=cluster-admin", "--user=alice", "-n", "team-a", check=False)
    assert plane.kubectl("auth", "can-i", "get", "secrets", "-n", "team-a", "--as", "alice", check=False).stdout.strip() == "yes"
    denied = plane.kubectl("get", "secret", "sluice-pool-shared-token", "-n", SYSTEM, user="alice", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    status = wait_for(lambda: (world.get("sp", "shared") or {}).get("status", {}).get("phase") == "Running", what="pool Running")
    assert status
    waited = world.plane.kubectl("wait", "--for=condition=Ready", "sp/shared", "--timeout=60s")
    assert "condition met" in waited.stdout  # kstatus on pools too


def test_query_is_registered_and_status_is_synced(world: World) -> None:
    world.apply(query("fast", "team-a"))
    wait_for(lambda: "team-a/fast" in world.host.queries, what="registration on the runtime")
    body = wait_for(lambda: (b := world.get("sq", "fast", "team-a")) and (b.get("status") or {}).get("latency") and b,
                    timeout=90, what="latency in status")
    status = body["status"]
    assert status["phase"] == "Running" and status["schedulerMode"] == "gated"
    assert status["latency"]["p99Ms"] > 0 and 0 <= status["slaAttainment"] <= 1
    assert status["batchIntervalMs"] == 500 and status["batchIntervalReason"] == "spec.trigger sets it."
    assert condition(body, "Admitted")["status"] == "True" and condition(body, "Registered")["status"] == "True"
    waited = world.plane.kubectl("wait", "--for=condition=Ready", "sq/fast", "-n", "team-a", "--timeout=60s")
    assert "condition met" in waited.stdout  # kstatus: what kubectl wait, Argo CD and Flux read
    assert "sluice.dev/finalizer" in body["metadata"]["finalizers"]
    table = world.plane.kubectl("get", "sq", "-n", "team-a").stdout.splitlines()
    row = next(line.split() for line in table if line.startswith("fast"))
    assert row[1:3] == ["shared", "2s"] and row[-2] == "Running"
    assert re.fullmatch(r"[0-9.]+m?s", row[3]) and re.fullmatch(r"[0-9.]+%", row[4])  # P99 and attainment with units
    events = world.plane.kubectl("get", "events", "-n", "team-a", "--field-selector", "involvedObject.name=fast").stdout
    assert "Registered" in events
    bottleneck = wait_for(lambda: ((world.get("sq", "fast", "team-a") or {}).get("status") or {}).get("bottleneck"),
                          what="the critical path's bottleneck in status")
    assert "% of the critical path over the last" in bottleneck


def test_quota_and_namespace_rules_keep_queries_pending(world: World) -> None:
    world.apply(query("one", "team-b"))
    wait_for(lambda: "team-b/one" in world.host.queries, what="the first team-b query")
    assert world.host.queries["team-b/one"].spec.weight == 3.0  # the namespace's quota weight reached the runtime
    world.apply(query("two", "team-b"))
    body = wait_for(lambda: (c := condition(world.get("sq", "two", "team-b"), "Admitted")) and c["reason"] == "QuotaExceeded" and c,
                    what="QuotaExceeded")
    assert body["status"] == "False" and "at most 1" in body["message"]
    assert world.get("sq", "two", "team-b")["status"]["phase"] == "Pending"  # type: ignore[index]
    assert "team-b/two" not in world.host.queries
    world.apply(query("outsider", "team-c"))
    c = wait_for(lambda: condition(world.get("sq", "outsider", "team-c"), "Admitted"), what="NamespaceNotAllowed")
    assert c["reason"] == "NamespaceNotAllowed" and "allowedNamespaces" in c["message"]


def kstatus(world: World, objects: list[tuple[str, str, str | None]]) -> list[str]:
    """How kstatus (sigs.k8s.io/cli-utils, what Flux and kpt wait with) reads each object as the
    real apiserver returns it: Current, InProgress or Failed."""
    import subprocess

    bodies = [world.get(kind, name, namespace) for kind, name, namespace in objects]
    tool = build_binaries().kstatus / "kstatus"
    proc = subprocess.run([str(tool)], input=json.dumps(bodies), capture_output=True, text=True, timeout=30, check=True)
    return [r["status"] for r in json.loads(proc.stdout)]


def test_gitops_tools_read_each_state_right(world: World) -> None:
    """kstatus on the objects the operator wrote: a running query and pool are Current; what waits
    for a person (namespace not allowed, a quota, a rejected or failed query, an invalid manifest,
    a pool whose spec cannot be read) is Failed through `Stalled`; what resolves itself (a pool not
    yet created, a runtime not yet answering) is InProgress through `Reconciling`."""
    world.apply(query("ks-running", "team-a"))
    world.apply(query("ks-outsider", "team-c"))
    world.apply(query("ks-no-pool", "team-a", pool_name="ks-nowhere"))
    world.apply(query("ks-bad-expression", "team-a", pipeline=[{"filter": "value >"}]))
    world.apply(pool("ks-starting", free_port()))  # no runtime answers there
    cases = {("sq", "ks-running", "team-a"): "Current", ("sq", "ks-outsider", "team-c"): "Failed",
             ("sq", "ks-no-pool", "team-a"): "InProgress", ("sq", "ks-bad-expression", "team-a"): "Failed",
             ("sp", "shared", None): "Current",
             ("sp", "ks-starting", None): "InProgress"}
    seen: dict[tuple[str, str, str | None], str] = {}

    def all_read_right() -> bool:
        seen.update(zip(cases, kstatus(world, list(cases)), strict=True))
        return seen == cases

    try:
        wait_for(all_read_right, timeout=90, every=1, what="kstatus to read every object as its state means")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}: read {seen}, meant {cases}") from None
    bad = condition(world.get("sq", "ks-bad-expression", "team-a"), "Stalled")
    assert bad is not None and bad["reason"] == "InvalidSpec" and "pipeline[0].filter" in bad["message"]
    assert (world.get("sq", "ks-bad-expression", "team-a") or {})["status"]["phase"] == "Failed"
    waiting = condition(world.get("sq", "ks-no-pool", "team-a"), "Reconciling")
    assert waiting is not None and waiting["status"] == "True" and waiting["reason"] == "PoolNotFound"
    for name in ("ks-running", "ks-outsider", "ks-no-pool", "ks-bad-expression"):
        world.plane.kubectl("delete", "sq", name, "-n", "team-c" if name == "ks-outsider" else "team-a", "--wait=false")
    world.plane.kubectl("delete", "sp", "ks-starting", "--wait=false")


def test_prometheus_scrapes_the_operator_and_the_stuck_query_alert_fires(world: World, tmp_path: Path) -> None:
    """A real Prometheus scrapes the real operator's /metrics and evaluates the chart's alert rules
    (rendered by helm, `pendingFor` 0s): the queries the rules above keep Pending fire
    SluiceQueryStuck, and the registered one does not. (Found here: the operator set a query's
    phase series only once it ran, so a query refused admission never fired this alert.)"""
    import yaml

    out = world.plane.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--set", "alerts.enabled=true",
                           "--set", "alerts.pendingFor=0s").stdout
    rule = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule")
    target = f"127.0.0.1:{os.environ['SLUICE_METRICS_PORT']}"
    with prometheus.running(tmp_path, {"sluice-operator": target}, {"groups": rule["spec"]["groups"]}) as prom:
        firing = 'ALERTS{alertname="SluiceQueryStuck",alertstate="firing"}'
        stuck = wait_for(lambda: len(found := prom.query(firing)) >= 2 and found, timeout=60, every=1,
                         what="SluiceQueryStuck firing on scraped operator metrics")
        names = {(a["metric"]["tenant"], a["metric"]["query"], a["metric"]["phase"]) for a in stuck}
        assert {("team-b", "two", "Pending"), ("team-c", "outsider", "Pending")} <= names
        assert not any(query == "one" for _, query, _ in names)  # a Running query is not stuck
        reconciles = prom.query('sum(sluice_operator_reconciles_total{kind="StreamingQuery",result="ok"})')
        assert float(reconciles[0]["value"][1]) >= 2  # team-a/fast and team-b/one registered


def test_a_query_the_driver_cannot_carry_waits_until_another_leaves(world: World) -> None:
    port = free_port()
    world.apply(pool("narrow", port))  # one driver core: 0.6 of it for a query batching every 200 ms
    world.serve_pool_runtime("narrow", port)
    world.apply(query("first", "team-a", pool_name="narrow", trigger={"interval": "200ms"}))
    wait_for(lambda: "team-a/first" in world.host.queries, what="the first query on the narrow pool")
    world.apply(query("second", "team-a", pool_name="narrow", trigger={"interval": "200ms"}))
    c = wait_for(lambda: (c := condition(world.get("sq", "second", "team-a"), "Admitted")) and c["reason"] == "DriverFull" and c,
                 what="DriverFull")
    assert c["status"] == "False" and "Pool 'narrow' driver would need 1.20 cores" in c["message"]
    assert "team-a/second" not in world.host.queries
    world.plane.kubectl("delete", "sq", "first", "-n", "team-a", "--wait=true", "--timeout=60s")
    wait_for(lambda: "team-a/second" in world.host.queries, timeout=60, what="the second query once the first left")
    world.plane.kubectl("delete", "sq", "second", "-n", "team-a", "--wait=true", "--timeout=60s")


def test_missing_pool_waits_then_registers_when_it_appears(world: World) -> None:
    world.apply(query("early", "team-a", pool_name="late"))
    c = wait_for(lambda: condition(world.get("sq", "early", "team-a"), "Admitted"), what="PoolNotFound")
    assert c["reason"] == "PoolNotFound" and "'late' does not exist" in c["message"]
    port = free_port()
    world.apply(pool("late", port))
    world.serve_pool_runtime("late", port)
    wait_for(lambda: "team-a/early" in world.host.queries, timeout=60, what="registration after the pool appeared")


def test_update_suspend_and_delete(world: World) -> None:
    world.apply(query("edit", "team-a", sla="3s"))
    wait_for(lambda: "team-a/edit" in world.host.queries, what="registration")
    world.apply(query("edit", "team-a", sla="750ms"))
    wait_for(lambda: world.host.queries.get("team-a/edit") and world.host.queries["team-a/edit"].spec.latency_target == 0.75,
             what="the new SLA on the runtime")
    world.apply(query("edit", "team-a", sla="750ms", suspend=True))
    wait_for(lambda: (h := world.host.queries.get("team-a/edit")) and h.phase == "Suspended", what="suspension")
    world.plane.kubectl("delete", "sq", "edit", "-n", "team-a", "--wait=true", "--timeout=60s")
    assert "team-a/edit" not in world.host.queries  # the finalizer deregistered it first
    assert world.get("sq", "edit", "team-a") is None


def test_operator_restart_converges_without_duplicates(world: World) -> None:
    world.runner.__exit__(None, None, None)  # the operator dies
    world.apply(query("while-down", "team-a"))
    time.sleep(1)
    assert "team-a/while-down" not in world.host.queries
    world.runner = start_operator()  # ... and comes back
    wait_for(lambda: "team-a/while-down" in world.host.queries, timeout=60, what="registration after the restart")
    deployments = json.loads(world.plane.kubectl("get", "deployments", "-n", SYSTEM, "-l", "sluice.dev/pool=shared", "-o", "json").stdout)
    assert len(deployments["items"]) == 1
    keys = [k for k in world.host.queries if k.startswith("team-a/")]
    assert len(keys) == len(set(keys)) and "team-a/fast" in keys


def test_kubectl_scale_reaches_the_runtime_without_restarting_the_driver(world: World) -> None:
    def template() -> tuple[int, str]:
        deployment = json.loads(world.plane.kubectl("get", "deployment", "sluice-pool-shared", "-n", SYSTEM, "-o", "json").stdout)
        return deployment["metadata"]["generation"], json.dumps(deployment["spec"]["template"], sort_keys=True)

    before = template()
    world.plane.kubectl("scale", "sp", "shared", "--replicas", "3")
    # the loopback runtime runs Spark in local mode, which has no executors to request: the
    # operator still asks it and reports the runtime's refusal (real scaling: tests/spark/test_executors.py)
    scaled = wait_for(lambda: (c := condition(world.get("sp", "shared"), "Scaled")) and "target of 3 executors" in c["message"] and c,
                      what="the runtime's answer to the new target in the Scaled condition")
    assert scaled["status"] == "False" and scaled["reason"] == "ExecutorTargetRejected" and "local mode" in scaled["message"]
    assert world.get("sp", "shared")["status"]["executors"]["target"] == 3  # type: ignore[index]
    assert template() == before  # the driver Deployment did not change, so nothing restarted
    # the scale subresource names the executors' selector (what HPA and KEDA read)
    scale = json.loads(world.plane.kubectl("get", "--raw", "/apis/sluice.dev/v1alpha1/streamingpools/shared/scale").stdout)
    assert scale["status"]["selector"] == "sluice.dev/pool=shared,spark-role=executor"
    refused = world.plane.kubectl("scale", "sp", "shared", "--replicas", "9", check=False)
    assert refused.returncode != 0 and "maxExecutors" in refused.stderr


def test_ds2_sizes_a_pool_without_a_fixed_count_from_measured_rates(world: World) -> None:
    """The loopback runtime's real measurements (input rates, useful task seconds from Spark's
    status API) drive the decision; a tiny utilization target turns team-a/fast's small load
    into more executors than the pool allows, so the decision is capped and says so."""
    world.apply(query("measured", "team-a"))  # measured from `RATES_WARMUP` after its first rows
    status = wait_for(lambda: (world.host.queries.get("team-a/measured") and
                               (s := world.host.status("team-a/measured")).load.batches >= 2 and s),
                      timeout=150, what="useful task seconds measured for a query")
    assert status.load.usefulSeconds > 0 and status.load.rows > 0
    # a tiny utilization target: the load needs more than the pool allows
    port = free_port()
    world.apply(pool("auto", port, minExecutors=1, maxExecutors=3, autoscaling={"utilization": 0.0001}))
    world.serve_pool_runtime("auto", port)
    decision = wait_for(lambda: ((world.get("sp", "auto") or {}).get("status") or {}).get("lastScalingDecision"),
                        timeout=60, what="a DS2 decision in status")
    # the demand needs more than maxExecutors: the pool says so, and so does a query on it
    over = wait_for(lambda: (c := condition(world.get("sp", "auto"), "Overloaded")) and c["status"] == "True" and c,
                    timeout=60, what="the pool's Overloaded condition")
    assert over["message"].startswith("the measured demand needs ") and "(maxExecutors is 3)" in over["message"]
    world.apply(query("crowded", "team-a", pool_name="auto"))
    crowded = wait_for(lambda: (c := condition(world.get("sq", "crowded", "team-a"), "Overloaded"))
                       and c["status"] == "True" and c, timeout=90, what="the query's Overloaded condition")
    assert crowded["message"].startswith("pool 'auto' is overloaded: the measured demand needs ")
    assert decision["fromExecutors"] == 1 and decision["toExecutors"] == 3
    assert "capped at maxExecutors 3" in decision["reason"] and "growing from 1" in decision["reason"]
    body = world.get("sp", "auto")
    assert body["status"]["executors"]["target"] == 3  # type: ignore[index]
    events = world.plane.kubectl("get", "events", "-A", "--field-selector", "involvedObject.name=auto").stdout
    assert "Autoscaled" in events
    assert body["status"]["message"].startswith("Overloaded: the measured demand needs ")  # type: ignore[index]
    # an ordinary utilization target and room to grow: the demand fits, the overload ends and its
    # sentence goes. Room, because the demand is measured: every query this module's host still
    # runs counts, and on a busy machine their batches' fixed cost can need more than 3 executors
    # at 80% (CI saw it). The local-mode host refuses a larger target, which is not asserted here.
    world.plane.kubectl("patch", "sp", "auto", "--type", "merge", "-p",
                        '{"spec": {"maxExecutors": 64, "autoscaling": {"utilization": 0.8}}}')
    ended = wait_for(lambda: (c := condition(world.get("sp", "auto"), "Overloaded")) and c["status"] == "False" and c,
                     timeout=90, what="the pool's Overloaded condition turning False")
    assert ended["reason"] == "WithinCapacity"
    assert "message" not in world.get("sp", "auto")["status"]  # type: ignore[index]
    calm = wait_for(lambda: (c := condition(world.get("sq", "crowded", "team-a"), "Overloaded"))
                    and c["status"] == "False" and c, timeout=90, what="the query's Overloaded condition turning False")
    assert calm["message"] == "pool 'auto' carries the measured demand."
