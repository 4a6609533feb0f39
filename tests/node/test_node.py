"""The user's path with real pods: `helm install`, a pool's driver and Spark executor pods, a Kafka
query, `kubectl scale`, DS2, a killed driver, deletion. Nothing here plays the kubelet.

The tests run in file order against one node and one release (each step builds on the last, as a
user's session does). Sized for this 2-core node: the pool is examples/pool.yaml with its pods'
CPU requests lowered to 500m (Spark still runs 2 task slots per executor), so the driver and two
executors fit beside the operator.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.constants import (
    BANDS,
    BLOCK_MANAGER_PORT,
    CONTROL_PORT,
    DRIVER_PORT,
    METRICS_PORT,
    OPERATOR_METRICS_PORT,
)
from sluice.runtime.stages import spark_time
from sluice.scheduler.bands import band_name, urgent_bands
from sluice.testing.checkov import scan, skips, unexplained
from sluice.testing.kafka import KafkaBroker
from sluice.testing.load import EVENT_SCHEMA, LoadPlan, generate
from sluice.testing.node import NodeCluster
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.node, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
NS = "sluice-system"
POOL = "shared"
DRIVER = f"sluice.dev/pool={POOL},sluice.dev/role=driver"
EXECUTORS = f"sluice.dev/pool={POOL},spark-role=executor"


# ---------------------------------------------------------------------------------------- helpers


def get(node: NodeCluster, *args: str) -> Any:
    proc = node.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def pods(node: NodeCluster, selector: str, phase: str = "Running") -> list[dict[str, Any]]:
    items = (get(node, "pods", "-n", NS, "-l", selector) or {"items": []})["items"]
    return [p for p in items if p["status"].get("phase") == phase and not p["metadata"].get("deletionTimestamp")]


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def query_status(node: NodeCluster, name: str) -> dict[str, Any]:
    return dict(((get(node, "sq", name, "-n", "payments") or {}).get("status")) or {})


def runtime(node: NodeCluster, path: str) -> Any:
    """The pool runtime's control API, through its Service (kube-proxy routes the ClusterIP)."""
    secret = get(node, "secret", f"sluice-pool-{POOL}-token", "-n", NS)
    token = base64.b64decode(secret["data"]["token"]).decode()
    ip = get(node, "service", f"sluice-pool-{POOL}", "-n", NS)["spec"]["clusterIP"]
    request = urllib.request.Request(f"http://{ip}:{CONTROL_PORT}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def registered_executors(node: NodeCluster) -> int:
    try:
        return len(runtime(node, "/v1/executors")["executors"])
    except OSError:
        return -1


def query(name: str, source: str, sink: str, bootstrap: str) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": name, "namespace": "payments"},
        "spec": {"pool": POOL,
                 "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": source, "schema": EVENT_SCHEMA,
                            "startingOffsets": "earliest"},
                 "pipeline": [{"select": ["key", "seq", "produced_at", "amount"]}],
                 "sink": {"type": "kafka", "bootstrapServers": bootstrap, "topic": sink},
                 "sla": {"latencyTarget": "5s"}},
    }


def sink_seqs(broker: KafkaBroker, topic: str) -> list[int]:
    """Every event's `seq` at a Kafka topic as a read_committed consumer sees it, duplicates included."""
    return [json.loads(value)["seq"] for value in broker.values(topic)]


@dataclass
class Load:
    """A Kafka producer thread at a fixed rate until stopped."""

    broker: KafkaBroker
    topic: str
    rate: float
    result: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.result = generate(LoadPlan(self.topic, self.rate), self.broker.bootstrap, stop=self._stop.is_set)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=60)
        return int(self.result["sent"])


def exactly_once(broker: KafkaBroker, source: str, sink: str, sent: int) -> tuple[int, int]:
    """Wait until the sink holds every event; returns (distinct, written twice by the pipeline):
    the sink against the source topic, so an event the producer itself wrote twice (an
    idempotent producer should not) does not count against Sluice and fails apart, named."""
    seqs = wait_for(lambda: (s := sink_seqs(broker, sink)) and len(set(s)) >= sent and s,
                    timeout=120, every=3, what=f"all {sent} events at {sink}")
    read = Counter(sink_seqs(broker, source))
    assert sum(read.values()) == len(read), f"{sum(read.values()) - len(read)} events twice in the source topic {source}"
    return len(set(seqs)), sum((Counter(seqs) - read).values())


# ---------------------------------------------------------------------------------------- the path


@pytest.fixture(scope="module")
def release(node: NodeCluster) -> Iterator[NodeCluster]:
    proc = node.helm("install", "sluice", str(ROOT), "--namespace", NS, "--create-namespace", "--wait", "--timeout", "3m")
    assert proc.returncode == 0, proc.stderr
    yield node


def test_helm_install_runs_the_operator_pod(release: NodeCluster) -> None:
    node = release
    operator = wait_for(lambda: [p for p in pods(node, "app.kubernetes.io/component=operator") if ready(p)],
                        timeout=120, what="the operator pod Ready")
    assert len(operator) == 1
    service = next(s for s in get(node, "services", "-n", NS)["items"] if s["metadata"]["name"].endswith("-metrics"))
    url = f"http://{service['spec']['clusterIP']}:{OPERATOR_METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    assert "# TYPE sluice_operator_reconcile_seconds histogram" in text


def test_a_pool_runs_its_driver_and_executors_as_pods(release: NodeCluster) -> None:
    node = release
    claim: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": "shared-checkpoints", "namespace": NS},
                             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    objects: list[dict[str, Any]] = [claim, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "payments"}},
                                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "analytics"}}]
    if isinstance(node, NodeCluster):
        # checkpoints on a claim, statically bound to a host directory (this node has no provisioner;
        # kind's default StorageClass provisions one)
        volume = node.workdir / "checkpoints"
        volume.mkdir(mode=0o777)
        volume.chmod(0o777)
        claim["spec"] |= {"storageClassName": "", "volumeName": "shared-checkpoints"}
        objects.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "shared-checkpoints"},
                        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                 "hostPath": {"path": str(volume)}, "persistentVolumeReclaimPolicy": "Retain"}})
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    pool = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    pool["spec"]["executor"]["cpuRequest"] = "500m"
    pool["spec"]["executor"]["warmup"] = "30s"  # a joining executor warms up on bulk work first
    pool["spec"]["startWarmup"] = "15s"  # the runtime warms its first executor before it serves
    pool["spec"].setdefault("driver", {})["cpuRequest"] = "500m"
    pool["spec"]["checkpoints"] = {"claimName": "shared-checkpoints"}
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump(pool))

    driver = wait_for(lambda: [p for p in pods(node, DRIVER) if ready(p)], timeout=240, every=1,
                      what="the driver pod Ready")
    assert len(driver) == 1
    executors = wait_for(lambda: pods(node, EXECUTORS), timeout=120, every=1, what="executor pods running")
    assert len(executors) == pool["spec"]["minExecutors"] == 1
    # each executor pod is owned by the driver pod, so the garbage collector removes it with the driver
    assert executors[0]["metadata"]["ownerReferences"][0]["name"] == driver[0]["metadata"]["name"]
    # and it registered with the driver: Spark's own executor list names it
    wait_for(lambda: registered_executors(node) == 1, timeout=60, what="the executor registered with the driver")
    # it served only after its synthetic queries ran batches on that executor for the pool's startWarmup
    said = node.kubectl("logs", "-n", NS, driver[0]["metadata"]["name"], "-c", "runtime").stdout
    warmed = re.search(r"warmed for (\d+) s before serving: a critical filter ran (\d+) batches and a windowed "
                       r"aggregation (\d+)", said)
    # (the aggregation's first batch, with its shuffle and state, may not commit within 15 s on a cold node)
    assert warmed is not None and int(warmed[1]) >= 15 and int(warmed[2]) > 0, said[-2000:]
    wait_for(lambda: (get(node, "sp", POOL) or {}).get("status", {}).get("phase") == "Running", timeout=60,
             what="the pool Running")
    # the pods drop every capability: the priority lever in force is the one the node's RLIMIT_NICE
    # allows (found by trying in the pod), and the pool's status says which and why
    lane = wait_for(lambda: (get(node, "sp", POOL) or {}).get("status", {}).get("urgentLane"), timeout=60,
                    what="the pool's status.urgentLane")
    assert lane.startswith("on: bulk tasks take turns, one a core"), lane
    lever = (get(node, "sp", POOL) or {})["status"]["priority"]
    limit = node.nice_limit  # containerd's, so every container's (a cluster of someone else's: unknown)
    if limit is not None:
        wanted = "threadNice" if limit >= 25 else "bulkNice" if limit >= 20 else "podWeight"
        assert lever["mechanism"] == wanted and f"RLIMIT_NICE {limit}" in lever["reason"], (limit, lever)
    else:
        assert lever["mechanism"] in ("threadNice", "bulkNice", "podWeight"), lever
    # the lane's slots are Spark's, not the node's: the executor pod still asks for its cpuRequest
    container = executors[0]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == "500m", container["resources"]


def readme_block(heading: str) -> list[str]:
    """The shell lines of README's first code block under `heading`, as a user copies them."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index(heading):].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readmes_quick_start_brings_a_query_to_ready(release: NodeCluster) -> None:
    """README's dev-cluster block as written, from the pool's wait on: the fixture and the test above
    did its install, namespace and pool steps (with a claim for checkpoints the later tests need)."""
    import os
    import subprocess
    import sys

    lines = readme_block("## A query on a one-node Kubernetes")
    first = next(i for i, line in enumerate(lines) if line.startswith("kubectl wait --for=condition=Ready sp/"))
    steps = [line for line in lines[first:] if "dev cluster" not in line]
    assert any("examples/first-query.yaml" in step for step in steps) and any("kubectl get sq" in step for step in steps)
    plane = getattr(release, "plane", None)
    paths = [str(Path(sys.executable).parent)] + ([str(plane.kube_bin)] if plane is not None else [])
    env = {**os.environ, "KUBECONFIG": str(release.kubeconfig), "PATH": ":".join([*paths, os.environ.get("PATH", "")])}
    try:
        for step in steps:
            proc = subprocess.run(["bash", "-c", step.replace("$PWD/.venv/bin", str(Path(sys.executable).parent))],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=360)
            assert proc.returncode == 0, f"README step {step!r} failed: {proc.stderr.strip()}"
            if step.startswith("kubectl get sq"):
                row = next(r for r in proc.stdout.splitlines() if "first-query" in r)
                assert " True " in f" {row} " and "Running" in row, proc.stdout
    finally:  # gone, deregistered by its finalizer, before the next tests load the pool
        release.kubectl("delete", "-f", str(ROOT / "examples" / "first-query.yaml"), "--timeout=120s", check=False)


PROBE = """
import concurrent.futures, json, socket, sys
def opens(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=float(sys.argv[1])).close()
        return True
    except OSError:
        return False
targets = sys.argv[2:]
with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
    print(json.dumps(dict(zip(targets, pool.map(opens, targets)))))
"""
"""Opens a TCP connection to each host:port at once; prints which opened. A port a policy closes
times out (the enforcer drops the first packet), so the timeout bounds a refused probe."""

LISTENING = """
ports = set()
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(name).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(":")
        if state == "0A" and address not in ("0100007F", "00000000000000000000000001000000"):
            ports.add(int(port, 16))
print(" ".join(map(str, sorted(ports))))
"""
"""The TCP ports a pod listens on beyond its loopback, from its own /proc."""


def opens(node: NodeCluster, namespace: str, pod: str, targets: list[str], timeout: float = 3) -> dict[str, bool]:
    """From inside `pod`, which of `targets` (host:port) accept a connection."""
    proc = node.kubectl("exec", "-n", namespace, pod, "--", "python3", "-c", PROBE, str(timeout), *targets, timeout=90)
    return dict(json.loads(proc.stdout))


def listening(node: NodeCluster, namespace: str, pod: str) -> list[int]:
    proc = node.kubectl("exec", "-n", namespace, pod, "--", "python3", "-c", LISTENING, timeout=60)
    return [int(port) for port in proc.stdout.split()]


class TestIsolation:
    """Tenants' pods, another pool's and a namespace the pool does not admit, opening real
    connections to the pool's pods on this node, where kube-network-policies enforces the
    NetworkPolicies Sluice writes (`sluice.testing.node`; on kind, kindnet's enforcer). Every port
    a pod is kept from is one its pool's own pods reach in the same test, so a probe that fails to
    open means the policy, not a closed port. Checked once by hand: with the pool's policies
    deleted, every refusal here turns into an open connection."""

    PODS: dict[tuple[str, str], dict[str, str]] = {
        ("payments", "tenant"): {"app": "tenant"},  # a namespace the pool admits
        ("intruders", "outsider"): {"app": "outsider"},  # one it does not
        # another pool's executor beside this pool's pods, and one that wears this pool's labels in
        # another namespace
        (NS, "other-pool-executor"): {"sluice.dev/pool": "other", "spark-role": "executor"},
        ("elsewhere", "lookalike"): {"sluice.dev/pool": POOL, "spark-role": "executor"},
        ("monitoring", "prometheus"): {"app": "prometheus"},  # where the chart says Prometheus runs
    }

    @pytest.fixture(scope="class")
    @classmethod
    def probes(cls, release: NodeCluster) -> Iterator[NodeCluster]:
        from sluice.api.constants import RUNTIME_IMAGE

        objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                                         for name in ("intruders", "elsewhere", "monitoring")]
        for (namespace, name), pod_labels in cls.PODS.items():
            objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
                            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                                "name": "probe", "image": RUNTIME_IMAGE, "imagePullPolicy": "IfNotPresent",
                                "command": ["sleep", "3600"], "resources": {"requests": {"cpu": "10m"}}}]}})
        release.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
        for namespace, name in cls.PODS:
            release.kubectl("wait", "-n", namespace, "--for=condition=Ready", f"pod/{name}", "--timeout=120s", timeout=150)
        yield release
        release.kubectl("delete", "pod", "-n", NS, "other-pool-executor", "--wait=true", check=False)
        release.kubectl("delete", "namespace", "intruders", "elsewhere", "monitoring", "--wait=false", check=False)
        release.kubectl("delete", "pod", "-n", "payments", "tenant", "--wait=false", check=False)

    @staticmethod
    def pool(node: NodeCluster) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The pool's driver, an executor and the operator, as running pods."""
        (driver,) = pods(node, DRIVER)
        executor = pods(node, EXECUTORS)[0]
        (operator,) = pods(node, "app.kubernetes.io/component=operator")
        return driver, executor, operator

    def targets(self, node: NodeCluster) -> dict[str, list[str]]:
        """Every port the pool's pods listen on, by pod IP, and the control API by its Service."""
        driver, executor, _ = self.pool(node)
        service = get(node, "service", f"sluice-pool-{POOL}", "-n", NS)["spec"]["clusterIP"]
        return {"driver": [f"{driver['status']['podIP']}:{port}" for port in listening(node, NS, driver["metadata"]["name"])],
                "executor": [f"{executor['status']['podIP']}:{port}" for port in listening(node, NS, executor["metadata"]["name"])],
                "service": [f"{service}:{CONTROL_PORT}"]}

    def test_a_tenants_pod_opens_no_port_of_the_pool_and_the_operator_opens_its_control_api(self, probes: NodeCluster) -> None:
        node = probes
        driver, _, operator = self.pool(node)
        ports = self.targets(node)
        driver_ip = driver["status"]["podIP"]
        # what the pods serve: the control API, Spark's driver and block manager ports, the metrics
        # port on the driver; the executor's block manager (Spark picks its port; an executor's RPC
        # environment is a client's, it listens on nothing else)
        assert {f"{driver_ip}:{port}" for port in (CONTROL_PORT, DRIVER_PORT, BLOCK_MANAGER_PORT, METRICS_PORT)} <= set(ports["driver"])
        assert ports["executor"], "the executor pod listens on no port"
        # and the operator's metrics port (the chart's policy), which Prometheus's namespace opens
        scraped = f"{operator['status']['podIP']}:{OPERATOR_METRICS_PORT}"
        everything = ports["driver"] + ports["executor"] + ports["service"] + [scraped]
        tenant = opens(node, "payments", "tenant", everything)
        assert not any(tenant.values()), {t: ok for t, ok in tenant.items() if ok}
        assert opens(node, "monitoring", "prometheus", [scraped], timeout=10) == {scraped: True}
        assert opens(node, NS, operator["metadata"]["name"], [f"{driver_ip}:{CONTROL_PORT}", *ports["service"]],
                     timeout=10) == {f"{driver_ip}:{CONTROL_PORT}": True, ports["service"][0]: True}
        # the executor's ports: its own pool's driver opens every one of them
        assert all(opens(node, NS, driver["metadata"]["name"], ports["executor"], timeout=10).values())

    def test_the_pools_driver_and_executors_reach_each_other_and_the_broker(
            self, probes: NodeCluster, node_broker: KafkaBroker) -> None:
        node = probes
        driver, executor, _ = self.pool(node)
        driver_ip = driver["status"]["podIP"]
        spark = [f"{driver_ip}:{DRIVER_PORT}", f"{driver_ip}:{BLOCK_MANAGER_PORT}", node_broker.bootstrap]
        assert opens(node, NS, executor["metadata"]["name"], spark, timeout=10) == dict.fromkeys(spark, True)
        assert opens(node, NS, driver["metadata"]["name"], [node_broker.bootstrap], timeout=10) == {node_broker.bootstrap: True}
        # and the driver's control API is not the executors' to open
        assert opens(node, NS, executor["metadata"]["name"], [f"{driver_ip}:{CONTROL_PORT}"]) == {f"{driver_ip}:{CONTROL_PORT}": False}

    def test_another_pools_pod_and_a_lookalike_elsewhere_open_nothing_of_the_pool(self, probes: NodeCluster) -> None:
        node = probes
        ports = self.targets(node)
        everything = ports["driver"] + ports["executor"] + ports["service"]
        for namespace, name in ((NS, "other-pool-executor"), ("elsewhere", "lookalike")):
            opened = opens(node, namespace, name, everything)
            assert not any(opened.values()), (name, {t: ok for t, ok in opened.items() if ok})

    def test_a_namespace_the_pool_does_not_admit_has_its_query_refused_and_opens_nothing(self, probes: NodeCluster) -> None:
        node = probes
        refused = query("intruder", "payments", "stolen", "localhost:9092")
        refused["metadata"]["namespace"] = "intruders"
        node.kubectl("apply", "-f", "-", input=yaml.safe_dump(refused))
        try:
            condition = wait_for(lambda: next((c for c in ((get(node, "sq", "intruder", "-n", "intruders") or {}).get("status") or {})
                                               .get("conditions", []) if c["type"] == "Admitted"), None),
                                 timeout=60, what="the intruding query's Admitted condition")
            assert condition["status"] == "False" and condition["reason"] == "NamespaceNotAllowed", condition
            assert "intruders/intruder" not in runtime(node, "/v1/queries")["queries"]
        finally:
            node.kubectl("delete", "sq", "intruder", "-n", "intruders", "--timeout=60s", check=False)
        ports = self.targets(node)
        opened = opens(node, "intruders", "outsider", ports["driver"] + ports["executor"] + ports["service"])
        assert not any(opened.values()), {t: ok for t, ok in opened.items() if ok}

    def test_prometheus_namespace_opens_the_metrics_port_alone_and_it_serves_no_control_api(self, probes: NodeCluster) -> None:
        node = probes
        driver, _, _ = self.pool(node)
        ip = driver["status"]["podIP"]
        ports = self.targets(node)
        opened = opens(node, "monitoring", "prometheus", ports["driver"] + ports["executor"])
        assert {t for t, ok in opened.items() if ok} == {f"{ip}:{METRICS_PORT}"}, opened
        # what it serves there (asked from the node, as the kubelet's probe is): metrics, without a
        # token, and nothing of the control API
        with urllib.request.urlopen(f"http://{ip}:{METRICS_PORT}/metrics", timeout=10) as response:
            assert "sluice_runtime" in response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"http://{ip}:{METRICS_PORT}/v1/queries"), timeout=10)
        assert refused.value.code == 404

    def test_the_control_api_refuses_an_allowed_pod_without_this_pools_token(self, probes: NodeCluster) -> None:
        """From the operator's pod, which the policy lets in: no token, another pool's token (one the
        operator would make, secrets.token_urlsafe(32): a second pool's driver does not fit on this
        node's two cores beside the first), then this pool's."""
        import secrets

        node = probes
        driver, _, operator = self.pool(node)
        token = base64.b64decode(get(node, "secret", f"sluice-pool-{POOL}-token", "-n", NS)["data"]["token"]).decode()
        asks = """
import sys, urllib.error, urllib.request
for token in sys.argv[2:]:
    request = urllib.request.Request(sys.argv[1], headers={"Authorization": f"Bearer {token}"} if token != "-" else {})
    try:
        print(urllib.request.urlopen(request, timeout=10).status)
    except urllib.error.HTTPError as error:
        print(error.code)
"""
        url = f"http://{driver['status']['podIP']}:{CONTROL_PORT}/v1/queries"
        proc = node.kubectl("exec", "-n", NS, operator["metadata"]["name"], "--", "python3", "-c", asks, url,
                            "-", secrets.token_urlsafe(32), token, timeout=90)
        assert proc.stdout.split() == ["401", "401", "200"], proc.stdout


def test_the_running_pools_real_objects_pass_checkov_but_for_reasoned_skips(release: NodeCluster, tmp_path: Path) -> None:
    """What the API server holds for the pool (the driver's Deployment, its NetworkPolicies) and the
    executor pods Spark made from Sluice's template, scanned as they run."""
    node = release
    live = [*get(node, "deployments,networkpolicies", "-n", NS, "-l", f"sluice.dev/pool={POOL}")["items"],
            *get(node, "pods", "-n", NS, "-l", EXECUTORS)["items"]]
    objects = []
    for item in live:
        item.pop("status", None)
        item["metadata"].pop("managedFields", None)
        objects.append(item)
    findings = scan(objects, tmp_path / "scan")
    assert unexplained(findings, skips()) == []
    assert {f.check for f in findings if "-exec-" in f.resource} >= {"CKV_K8S_8"}  # the executor pods were scanned
    assert not any(f.check in ("CKV2_K8S_6", "CKV_K8S_22", "CKV_K8S_38") and "-exec-" in f.resource for f in findings)


@pytest.fixture(scope="module")
def ledger(release: NodeCluster, node_broker: KafkaBroker) -> Iterator[Load]:
    for topic in ("payments", "ledger"):
        node_broker.create_topic(topic, partitions=2)
    load = Load(node_broker, "payments", 200)
    release.kubectl("apply", "-f", "-", input=yaml.safe_dump(query("ledger", "payments", "ledger", node_broker.bootstrap)))
    yield load
    load.stop()


def test_a_kafka_query_runs_with_status_from_real_batches(release: NodeCluster, ledger: Load) -> None:
    node = release
    status = wait_for(lambda: (s := query_status(node, "ledger")).get("phase") == "Running" and s.get("batches", 0) >= 5
                      and s, timeout=180, every=1, what="the query Running with five batches")
    assert status["latency"]["p50Ms"] > 0 and status["latency"]["p99Ms"] >= status["latency"]["p50Ms"]
    assert 0 <= status["slaAttainment"] <= 1 and status["attainment"].endswith("%")
    assert status["bottleneck"], status
    assert status["inputRate"] > 0


def test_kubectl_sluice_shows_a_query_and_its_pool_and_bundles_a_report(
        release: NodeCluster, ledger: Load, tmp_path: Path) -> None:
    """The kubectl plugin, installed with the package as `kubectl-sluice`, run through kubectl itself
    as a user would, on the running pool and query."""
    import os
    import subprocess
    import sys
    import tarfile

    node = release
    wait_for(lambda: query_status(node, "ledger").get("batches", 0) >= 3, timeout=180, every=1,
             what="the query Running with batches")
    plane = getattr(node, "plane", None)  # e2e/kind.sh's cluster: kubectl is on PATH already
    paths = [str(Path(sys.executable).parent)] + ([str(plane.kube_bin)] if plane is not None else [])
    env = {**os.environ, "KUBECONFIG": str(node.kubeconfig), "PATH": ":".join([*paths, os.environ.get("PATH", "")])}

    def sluice(*args: str) -> str:
        proc = subprocess.run(["kubectl", "sluice", *args], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    shown = sluice("status", "ledger", "-n", "payments")
    assert shown.startswith(f"StreamingQuery payments/ledger on pool {POOL}: Running"), shown
    assert "p99 " in shown and "within SLA " in shown and "bottleneck: " in shown and "Ready: True" in shown
    pool = sluice("status", f"sp/{POOL}")
    assert pool.startswith(f"StreamingPool {POOL}: Running") and "executors " in pool and "Ready: True" in pool
    as_json = json.loads(sluice("status", "ledger", "-n", "payments", "--json"))
    assert (as_json["kind"], as_json["namespace"], as_json["status"]["phase"]) == ("StreamingQuery", "payments", "Running")
    assert "events" in json.loads(sluice("status", f"sp/{POOL}", "--json"))
    assert sluice("--version").startswith("kubectl sluice, version ")
    missing = subprocess.run(["kubectl", "sluice", "status", "no-such-thing", "-n", "payments"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no StreamingQuery or StreamingPool named 'no-such-thing'" in missing.stderr
    bundle = tmp_path / "report.tar.gz"
    sluice("report", POOL, "--out", str(bundle))
    old = subprocess.run(["kubectl", "sluice", "report", POOL, "-o", str(tmp_path / "old.tar.gz")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert old.returncode == 0 and "deprecated" in old.stderr and (tmp_path / "old.tar.gz").exists()
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        queries = json.load(tar.extractfile(f"sluice-report-{POOL}/queries.json"))  # type: ignore[arg-type]
        logs = [n for n in names if "/logs/" in n and n.endswith("/runtime.log")]
        assert logs and tar.extractfile(logs[0]).read()  # type: ignore[union-attr]
    assert {f"sluice-report-{POOL}/{n}" for n in ("pool.json", "objects.json", "events.json", "status.txt")} <= set(names)
    assert "ledger" in {q["metadata"]["name"] for q in queries}


def committing(node: NodeCluster, name: str) -> None:
    before = query_status(node, name).get("batches", 0)
    wait_for(lambda: query_status(node, name).get("batches", 0) > before + 1, timeout=90, every=1,
             what=f"{name} committing batches")


def test_kubectl_scale_adds_and_removes_executor_pods_and_loses_no_row(
        release: NodeCluster, ledger: Load, node_broker: KafkaBroker) -> None:
    node = release
    node.kubectl("scale", "sp", POOL, "--replicas", "2")
    wait_for(lambda: len(pods(node, EXECUTORS)) == 2, timeout=120, every=1, what="a second executor pod")
    wait_for(lambda: registered_executors(node) == 2, timeout=60, what="two executors registered")
    committing(node, "ledger")
    # a forced kill mid-run (no graceful decommission): the pod's running tasks die with it and
    # run again on the other executor; its transactions are aborted, so no row is written twice
    victim = pods(node, EXECUTORS)[0]["metadata"]["name"]
    node.kubectl("delete", "pod", "-n", NS, victim, "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: victim not in [p["metadata"]["name"] for p in pods(node, EXECUTORS)], timeout=60, every=1,
             what=f"executor pod {victim} gone")
    committing(node, "ledger")
    node.kubectl("scale", "sp", POOL, "--replicas", "1")
    wait_for(lambda: len(pods(node, EXECUTORS)) == 1 and registered_executors(node) == 1, timeout=150, every=1,
             what="the surplus executor pod removed")
    committing(node, "ledger")
    sent = ledger.stop()
    distinct, duplicates = exactly_once(node_broker, "payments", "ledger", sent)
    assert (distinct, duplicates) == (sent, 0), f"{sent} sent, {distinct} at the sink, {duplicates} doubled"


def spark_tasks(ip: str, seen: dict[int, tuple[str, str, float]]) -> None:
    """Add to `seen` every task Spark's own listener (its status store, through the driver's REST
    API) lists now: task id -> (its stage's FAIR pool, its executor, its launch in epoch seconds)."""
    base = f"http://{ip}:4040/api/v1/applications"
    with urllib.request.urlopen(base, timeout=10) as response:
        app = json.loads(response.read())[0]["id"]
    with urllib.request.urlopen(f"{base}/{app}/stages?details=true", timeout=30) as response:
        stages = json.loads(response.read())
    for stage in stages:
        for task in (stage.get("tasks") or {}).values():
            seen[int(task["taskId"])] = (str(stage.get("schedulingPool", "")), str(task["executorId"]),
                                         spark_time(task["launchTime"]))


def test_a_joining_executor_pod_runs_no_urgent_task_until_it_is_warm(
        release: NodeCluster, node_broker: KafkaBroker) -> None:
    """Warm before work on pods: under load, a second executor pod joins; Spark's listener shows
    it ran the bulk bands' tasks (a 30 s query's) while its JVM warmed up, no task of the urgent
    bands (a 1 s filter's) before the runtime called it warm, and urgent tasks after."""
    node = release
    manifests, loads = [], []
    for name, sla in (("alerts", "1s"), ("tally", "30s")):
        for topic in (f"{name}-in", name):
            node_broker.create_topic(topic, partitions=2)
        manifest = query(name, f"{name}-in", name, node_broker.bootstrap)
        manifest["spec"]["sla"] = {"latencyTarget": sla}
        manifests.append(manifest)
        loads.append(Load(node_broker, f"{name}-in", 200))
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))
    urgent = {band_name(i) for i in range(urgent_bands(BANDS))}
    seen: dict[int, tuple[str, str, float]] = {}
    try:
        wait_for(lambda: query_status(node, "alerts").get("batches", 0) >= 5, timeout=180, every=1,
                 what="alerts running")
        ip = pods(node, DRIVER)[0]["status"]["podIP"]
        # the pool's first executor warms up too; while none is warm a cold one takes every task
        # (nowhere else to run them), so the join is made once one is
        wait_for(lambda: any(e.get("warm") for e in runtime(node, "/v1/executors")["executors"]), timeout=150,
                 every=2, what="the pool's first executor warm")
        first = {e["id"] for e in runtime(node, "/v1/executors")["executors"]}
        node.kubectl("scale", "sp", POOL, "--replicas", "2")

        def joined() -> set[str]:
            spark_tasks(ip, seen)  # Spark keeps its last 300 stages: read them all along
            return {e["id"] for e in runtime(node, "/v1/executors")["executors"]} - first

        (new,) = wait_for(joined, timeout=180, every=2, what="a second executor registered")

        def warm_at() -> float | None:
            spark_tasks(ip, seen)
            listed = {e["id"]: e for e in runtime(node, "/v1/executors")["executors"]}
            return listed[new].get("warmAt") if listed[new].get("warm") else None

        warm = wait_for(warm_at, timeout=150, every=2, what="the new executor warm")
        assert warm is not None  # wait_for returns the condition's first truthy value
        warmed = warm

        def urgent_on_new() -> bool:  # the filter's partition that prefers the new executor goes there
            spark_tasks(ip, seen)
            return any(e == new and p in urgent and launch >= warmed for p, e, launch in seen.values())

        # read on until one has run there (or 90 s have passed: the assertion below then says so)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not urgent_on_new():
            time.sleep(2)
    finally:
        for load in loads:
            load.stop()
        node.kubectl("delete", "sq", "alerts", "tally", "-n", "payments", "--wait=true", "--timeout=120s", check=False)
        node.kubectl("scale", "sp", POOL, "--replicas", "1")
    on_new = [(pool, launch) for pool, executor, launch in seen.values() if executor == new]
    early = [launch for pool, launch in on_new if pool in urgent and launch < warmed]
    assert not early, f"{len(early)} urgent tasks on executor {new} before it was warm at {warmed}"
    assert any(pool not in urgent and launch < warmed for pool, launch in on_new), "it ran no bulk task while cold"
    assert any(pool in urgent and launch >= warmed for pool, launch in on_new), "it ran no urgent task once warm"
    assert any(pool in urgent and launch < warmed and executor != new for pool, executor, launch in seen.values())
    wait_for(lambda: len(pods(node, EXECUTORS)) == 1 and registered_executors(node) == 1, timeout=150, every=1,
             what="the surplus executor pod removed")


def test_a_killed_driver_restarts_and_its_queries_resume_from_their_checkpoints(
        release: NodeCluster, node_broker: KafkaBroker) -> None:
    node = release
    for topic in ("audit-in", "audit"):
        node_broker.create_topic(topic, partitions=2)
    load = Load(node_broker, "audit-in", 200)
    try:
        node.kubectl("apply", "-f", "-", input=yaml.safe_dump(query("audit", "audit-in", "audit", node_broker.bootstrap)))
        wait_for(lambda: query_status(node, "audit").get("batches", 0) >= 5, timeout=180, every=1, what="audit running")
        old = pods(node, DRIVER)[0]["metadata"]["name"]
        before_kill = len(set(sink_seqs(node_broker, "audit")))
        node.kubectl("delete", "pod", "-n", NS, old, "--grace-period=0", "--force", "--wait=false")
        wait_for(lambda: [p for p in pods(node, DRIVER) if ready(p) and p["metadata"]["name"] != old],
                 timeout=240, every=1, what="a new driver pod Ready")
        wait_for(lambda: (s := query_status(node, "audit")).get("phase") == "Running" and s.get("batches", 0) >= 3,
                 timeout=180, every=1, what="audit running again on the new driver")
    finally:
        sent = load.stop()
    distinct, duplicates = exactly_once(node_broker, "audit-in", "audit", sent)
    assert distinct == sent, f"{sent - distinct} events lost across the restart"
    # resumed from the checkpoint, and the batch in flight at the kill run again without writing
    # a row twice (the sink's default delivery, exactlyOnce)
    assert before_kill > 2000 and duplicates == 0, (before_kill, duplicates)


def test_a_real_time_query_holds_its_slot_on_executor_pods_and_writes_every_row(
        release: NodeCluster, node_broker: KafkaBroker) -> None:
    """Spark's Real-time Mode on the pool users install: its long-running task on an executor pod,
    its slot reserved in the pool's status while it runs and given back when it goes."""
    node = release
    for topic in ("rt-in", "rt-out"):
        node_broker.create_topic(topic, partitions=1)
    manifest = query("fraud", "rt-in", "rt-out", node_broker.bootstrap)
    manifest["spec"] |= {"execution": "realTime", "sla": {"latencyTarget": "100ms"}}
    manifest["spec"]["sink"]["delivery"] = "atLeastOnce"  # how Real-time Mode writes
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    try:
        # the phase comes with admission; execution and slots with the runtime's first status
        status = wait_for(lambda: (s := query_status(node, "fraud")).get("phase") == "Running" and "execution" in s
                          and s, timeout=180, every=1, what="the Real-time query Running with its runtime's status")
        assert status["execution"] == "realTime" and status.get("reservedSlots") == 1, status  # one source partition
        wait_for(lambda: (get(node, "sp", POOL) or {}).get("status", {}).get("reservedSlots") == 1, timeout=60,
                 what="the pool's status.reservedSlots")
        time.sleep(5)  # its task is reading before the load starts
        load = Load(node_broker, "rt-in", 200)
        time.sleep(15)
        sent = load.stop()
        # written as they come (at least once): every row at the sink well before its 60 s epoch ends
        seqs = wait_for(lambda: (s := sink_seqs(node_broker, "rt-out")) and len(set(s)) >= sent and s,
                        timeout=60, every=2, what=f"all {sent} events at rt-out")
        assert len(set(seqs)) == sent
    finally:
        node.kubectl("delete", "sq", "fraud", "-n", "payments", "--wait=true", "--timeout=120s", check=False)
    wait_for(lambda: (get(node, "sp", POOL) or {}).get("status", {}).get("reservedSlots") == 0, timeout=90,
             what="the pool's reserved slots given back")


@pytest.mark.extended  # DS2's decisions: the cluster tier on a real application; pods added and removed: kubectl scale above
def test_ds2_grows_the_pool_on_a_load_step_and_shrinks_it_after(release: NodeCluster, node_broker: KafkaBroker) -> None:
    node = release
    # the autoscaler's utilization is lowered so that a load step this 2-core machine can carry asks
    # for more than one executor: DS2 reads the tasks' CPU time, well below a pass-through query's
    # task run time (0.1-0.5 cores at 3,000 events/s), and at 0.04 it kept one executor at this
    # load (2026-12-07); short anti-flap times keep the test short
    auto = {"utilization": 0.01, "stabilizationWindow": "10s", "scaleDownDelay": "20s"}
    node.kubectl("patch", "sp", POOL, "--type", "json", "-p", json.dumps([
        {"op": "remove", "path": "/spec/executors"}, {"op": "add", "path": "/spec/autoscaling", "value": auto}]))
    for topic in ("step-in", "step"):
        node_broker.create_topic(topic, partitions=2)
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump(query("step", "step-in", "step", node_broker.bootstrap)))
    load = Load(node_broker, "step-in", 3000)
    try:
        try:
            grown = wait_for(lambda: (d := (get(node, "sp", POOL) or {}).get("status", {}).get("lastScalingDecision"))
                             and d["toExecutors"] >= 2 and d, timeout=180, every=1, what="DS2 deciding to grow")
        except AssertionError as error:
            said = [c for c in (get(node, "sp", POOL) or {}).get("status", {}).get("conditions", []) if c["type"] == "Scaled"]
            raise AssertionError(f"{error}; the pool says: {said}") from None
        assert "growing from 1" in grown["reason"]
        wait_for(lambda: len(pods(node, EXECUTORS)) >= 2, timeout=120, every=1, what="DS2's executor pods running")
    finally:
        sent = load.stop()
    try:
        shrunk = wait_for(lambda: (d := (get(node, "sp", POOL) or {}).get("status", {}).get("lastScalingDecision"))
                          and d["toExecutors"] == 1 and d, timeout=180, every=1, what="DS2 deciding to shrink")
    except AssertionError as error:
        scaled = [c for c in (get(node, "sp", POOL) or {}).get("status", {}).get("conditions", []) if c["type"] == "Scaled"]
        raise AssertionError(f"{error}; the pool says: {scaled}") from None
    assert "shrinking" in shrunk["reason"]
    wait_for(lambda: len(pods(node, EXECUTORS)) == 1, timeout=150, every=1, what="back to one executor pod")
    # through the growth and the shrink (tasks moved between executors): every row once
    distinct, duplicates = exactly_once(node_broker, "step-in", "step", sent)
    assert (distinct, duplicates) == (sent, 0), f"{sent} sent, {distinct} at the sink, {duplicates} doubled"


def test_deleting_queries_and_the_pool_leaves_nothing_behind(release: NodeCluster) -> None:
    node = release
    node.kubectl("delete", "sq", "-n", "payments", "--all", "--wait=true", "--timeout=120s")
    assert runtime(node, "/v1/queries")["queries"] == {}, "the finalizer left queries on the runtime"
    node.kubectl("delete", "sp", POOL, "--wait=true", "--timeout=120s")
    kinds = "deployments,replicasets,pods,services,secrets,configmaps,serviceaccounts,roles,rolebindings"
    wait_for(lambda: not get(node, kinds, "-n", NS, "-l", f"sluice.dev/pool={POOL}")["items"], timeout=180, every=1,
             what="every object of the pool garbage-collected")
    assert not get(node, "pods", "-n", NS, "-l", "spark-role=executor")["items"]
