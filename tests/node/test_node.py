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

from sluice.api.constants import CONTROL_PORT, DRIVER_PORT, METRICS_PORT, OPERATOR_METRICS_PORT
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


def test_the_pools_network_policies_select_its_real_pods(release: NodeCluster) -> None:
    """Each NetworkPolicy of the pool selects the pods it means, by the labels those pods really carry
    (Spark's own `spark-role` on executor pods, the chart's on the operator pod). This node's bridge
    plugin does not enforce NetworkPolicy, and no plugin that does builds here (docs/development.md), so this checks
    selection, not enforcement. The metrics port serves /metrics without the control API's token."""
    node = release

    def selected(selector: dict[str, Any]) -> set[str]:
        text = ",".join(f"{k}={v}" for k, v in selector["matchLabels"].items())
        return {p["metadata"]["name"] for p in pods(node, text)}

    policies = {p["metadata"]["name"].removeprefix(f"sluice-pool-{POOL}-"): p["spec"]
                for p in get(node, "networkpolicies", "-n", NS, "-l", f"sluice.dev/pool={POOL}")["items"]}
    assert set(policies) == {"driver", "executors"}
    driver = {p["metadata"]["name"] for p in pods(node, DRIVER)}
    executors = {p["metadata"]["name"] for p in pods(node, EXECUTORS)}
    operator = {p["metadata"]["name"] for p in pods(node, "app.kubernetes.io/component=operator")}
    assert len(driver) == 1 and executors and len(operator) == 1
    assert selected(policies["driver"]["podSelector"]) == driver
    by_port = {rule["ports"][0]["port"]: rule for rule in policies["driver"]["ingress"]}
    assert selected(by_port[CONTROL_PORT]["from"][0]["podSelector"]) == operator
    assert selected(by_port[DRIVER_PORT]["from"][0]["podSelector"]) == executors
    assert "from" not in by_port[METRICS_PORT]  # Prometheus and the kubelet's probe, from anywhere
    assert selected(policies["executors"]["podSelector"]) == executors
    assert selected(policies["executors"]["ingress"][0]["from"][0]["podSelector"]) == driver | executors
    (pod,) = pods(node, DRIVER)
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{METRICS_PORT}/metrics", timeout=10) as response:
        assert "sluice_runtime" in response.read().decode()
    denied = urllib.request.Request(f"http://{pod['status']['podIP']}:{METRICS_PORT}/v1/queries")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(denied, timeout=10)
    assert refused.value.code == 404  # the metrics port serves nothing of the control API


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
    # the autoscaler's utilization is lowered so that a load step this 2-core machine can carry
    # (3,000 events/s of a pass-through query: ~0.1-0.5 cores) asks for more than one executor;
    # short anti-flap times keep the test short
    auto = {"utilization": 0.04, "stabilizationWindow": "10s", "scaleDownDelay": "20s"}
    node.kubectl("patch", "sp", POOL, "--type", "json", "-p", json.dumps([
        {"op": "remove", "path": "/spec/executors"}, {"op": "add", "path": "/spec/autoscaling", "value": auto}]))
    for topic in ("step-in", "step"):
        node_broker.create_topic(topic, partitions=2)
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump(query("step", "step-in", "step", node_broker.bootstrap)))
    load = Load(node_broker, "step-in", 3000)
    try:
        grown = wait_for(lambda: (d := (get(node, "sp", POOL) or {}).get("status", {}).get("lastScalingDecision"))
                         and d["toExecutors"] >= 2 and d, timeout=180, every=1, what="DS2 deciding to grow")
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
