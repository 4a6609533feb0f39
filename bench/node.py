"""`sluice bench cameo --target node`: a scenario on the pool users install.

The same scenario files as the local target, applied as `StreamingQuery` manifests to a
`StreamingPool` on the project's one-node Kubernetes: the helm-installed operator, the driver pod
whose gate asks the scheduler sidecar over HTTP, executor pods with JVMs of their own (a gated
pool's urgent lane runs its slots and bulk turns in each: `runtime/session.py::executor_lane`), and
no capability to raise a thread's priority. The
policy is the pool's `spec.policy`; each run gets a fresh pool (a fresh driver JVM), as each local
run gets a fresh `sluice run`.

The harness's figures come from every measured batch of every query, read from the runtime's
control API (`GET /v1/queries/{ns}/{name}/batches`, polled well within its one-minute window):
the same per-batch latencies `sluice run --timeline` gives locally, so both targets are judged
alike (rows sent against rows read, unread rows outside the SLA). Beside them, what users see:
each StreamingQuery's status (p99, attainment over its last minute) read when the load stops,
against the harness's figure over the same minute.

The cluster: a running dev cluster (`sluice dev cluster up`) if there is one, else one brought up
for the benchmark and stopped after it (a cold machine builds its binaries and images first).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from sluice.api.constants import API_VERSION, CONTROL_PORT, CRITICAL_LANE, EXECUTOR_JIT, MASSES
from sluice.api.manifest import load_query
from sluice.api.query import KafkaSink, StreamingQuery
from sluice.api.scenario import Scenario
from sluice.api.wire import BatchList
from sluice.runtime.latency import weighted_quantile
from sluice.runtime.realtime import drain_limit
from sluice.scheduler.execution import mode_of, reserved_slots

from .placement import Placement
from .procfs import SERIES_EVERY_S, ThreadSeries, machine_busy_seconds, pod_cpu_seconds, pod_pids
from .scenario_runs import AUTO, drain_seconds, for_run, machine_use, start_load

NS = "sluice-system"
"""The helm release's namespace (the operator, the pool's pods)."""
RELEASE = "sluice"
POLL_S = 10.0
"""Seconds between reads of each query's batches: the runtime keeps a minute of them."""
STATUS_WINDOW_S = 60.0
"""The span of a StreamingQuery's status figures (the runtime's latency window)."""
POOL_READY_S = 300.0
QUERIES_READY_S = 300.0


class Cluster(Protocol):
    ip: str
    workdir: Path

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> Any: ...

    def helm(self, *args: str) -> Any: ...


@dataclass
class NodeTarget:
    """A cluster with Sluice installed and a Kafka broker its pods reach."""

    cluster: Cluster
    broker: Any
    say: Callable[[str], None] = print
    placement: Placement = field(default_factory=lambda: Placement("node", reason="not asked"))
    """The groups the broker and the load run in, beside the node's `kubepods` (`bench.placement`)."""

    def get(self, *args: str) -> Any:
        proc = self.cluster.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(proc.stdout) if proc.returncode == 0 else None

    def apply(self, objects: list[dict[str, Any]]) -> None:
        """As JSON: YAML 1.1 (kubectl's) reads an unquoted `n` or `y` as a boolean, and PyYAML
        writes an aggregate named `n` unquoted."""
        proc = self.cluster.kubectl("apply", "-f", "-", check=False,
                                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl apply refused the run's objects: {proc.stderr.strip()}")


def install(cluster: Cluster, say: Callable[[str], None]) -> None:
    """`helm install` the chart from this tree unless its release is there; where it is (a dev
    cluster kept from before), this tree's CRDs applied over it: helm never upgrades a chart's
    CRDs, and a pool with a field the old schema lacks would be refused."""
    root = Path(__file__).resolve().parents[1]
    if cluster.helm("status", RELEASE, "--namespace", NS).returncode == 0:
        say(f"using the installed release {RELEASE} in {NS}, with this tree's CRDs")
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(root / "crds"))
        return
    say("helm install (the chart of this tree) ...")
    proc = cluster.helm("install", RELEASE, str(root), "--namespace", NS, "--create-namespace", "--wait",
                        "--timeout", "4m")
    if proc.returncode != 0:
        raise RuntimeError(f"helm install failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")


@contextlib.contextmanager
def open_target(workdir: Path | None, say: Callable[[str], None]) -> Iterator[NodeTarget]:
    """The dev cluster if one runs, else a node of the benchmark's own (stopped after it); the
    release installed; a broker on the node's address. Their files (the node's containerd root
    holds the images unpacked, gigabytes) go to `workdir`, by default a scratch folder removed
    after: never beside the results, where linters and git would walk them."""
    from sluice.testing.kafka import KafkaBroker
    from sluice.testing.node import NodeCluster, NodeError, dev_cluster

    scratch = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-node-")) if workdir is None else workdir
    workdir.mkdir(parents=True, exist_ok=True)
    cluster: Any = dev_cluster()
    owned = None
    if cluster is not None:
        say("using the running dev cluster (its images are those it started with: "
            "'sluice dev cluster down' and up again after changing the runtime)")
    else:
        say("no dev cluster runs: bringing up a one-node Kubernetes for this benchmark "
            "(a cold machine builds its binaries and images first: 15-20 min) ...")
        try:
            owned = cluster = NodeCluster(workdir / "cluster", say=say).start()
        except NodeError as error:
            raise RuntimeError(str(error)) from None
    try:
        install(cluster, say)
        shutil.rmtree(workdir / "kafka", ignore_errors=True)
        broker = KafkaBroker(workdir / "kafka", host=cluster.ip).start()
        try:
            say(f"kafka ready at {broker.bootstrap} (reachable from the pods)")
            yield NodeTarget(cluster, broker, say)
        finally:
            broker.stop()
    finally:
        if owned is not None:
            owned.stop()
        if scratch:
            mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                       if line.split()[1].startswith(str(workdir.resolve()))]
            if mounted:  # never delete through a mount (a pod's volume): say where it is instead
                say(f"left {workdir} in place: {len(mounted)} mounts remain under it (umount, then remove it)")
            else:
                shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class Pool:
    """One run's StreamingPool and its runtime's control API (through its Service)."""

    target: NodeTarget
    name: str
    token: str = ""
    url: str = ""
    executors: list[list[float]] = field(default_factory=list)
    """(seconds since the load started, executors registered) at each poll."""
    joined: dict[str, float] = field(default_factory=dict)
    """Each executor seen, by id: when it registered with the driver (epoch seconds, Spark's own)."""
    warmed: dict[str, float] = field(default_factory=dict)
    """Executor id -> when it became warm (`warmAt`: it takes urgent tasks from then on)."""

    def connect(self) -> None:
        secret = self.target.get("secret", f"sluice-pool-{self.name}-token", "-n", NS)
        service = self.target.get("service", f"sluice-pool-{self.name}", "-n", NS)
        if secret is None or service is None:
            raise RuntimeError(f"the pool {self.name} has no token Secret or Service in {NS} yet")
        self.token = base64.b64decode(secret["data"]["token"]).decode()
        self.url = f"http://{service['spec']['clusterIP']}:{CONTROL_PORT}"

    def call(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


@dataclass
class PoolCpu:
    """The CPU the pool's pods (driver with its sidecar, executors) used while the load ran,
    against the machine's: the rest (the control plane, the operator, the broker, the load
    generator) is what the pool's batches could not use (`sluice simulate`'s other cores).
    The pool's pods are listed at every poll (`POLL_S`) and each one's cgroup and threads by kind
    (`ThreadSeries`) read every `SERIES_EVERY_S`; a pod gone between two reads loses what it used
    after the last one."""

    pool: Pool
    began: tuple[float, float] = (0.0, 0.0)
    """(monotonic seconds, the machine's busy CPU seconds) as the load started."""
    first: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    threads: ThreadSeries = field(default_factory=ThreadSeries)
    pods: dict[str, list[list[float]]] = field(default_factory=dict)
    """Each pod by name: [seconds since the load started, CPU seconds since] at each read (a pod
    started later counted from its start)."""

    def _pods(self, listing: bool) -> dict[str, float]:
        """Each pod's CPU seconds now; `listing`: ask the API server which pods the pool has (else
        the pods known, read from their cgroups alone: cheap enough to read every few seconds)."""
        if listing:
            listed = self.pool.target.get("pods", "-n", NS, "-l", f"sluice.dev/pool={self.pool.name}") or {"items": []}
            self.names.update({item["metadata"]["uid"]: item["metadata"]["name"] for item in listed["items"]})
        used = {uid: pod_cpu_seconds(uid) for uid in self.names}
        return {uid: cpu for uid, cpu in used.items() if cpu is not None}

    def start(self) -> None:
        self.began = (time.monotonic(), machine_busy_seconds())
        self.first = self._pods(listing=True)
        self.last = dict(self.first)
        self.threads.sample(pid for uid in self.first for pid in pod_pids(uid))

    def sample(self, listing: bool = False) -> None:
        now = round(time.monotonic() - self.began[0], 1)
        used = self._pods(listing)
        for uid, cpu in used.items():
            self.first.setdefault(uid, 0.0)  # started after the load did
            self.last[uid] = cpu
            self.pods.setdefault(self.names[uid], []).append([now, round(cpu - self.first[uid], 3)])
        self.threads.sample(pid for uid in used for pid in pod_pids(uid))

    def use(self) -> dict[str, Any]:
        """`scenario_runs.machine_use`'s figures, the pool's pods as the runs, and the series (the
        threads' by kind, `machine`, and each pod's)."""
        self.sample(listing=True)
        pods = sum(self.last[uid] - self.first[uid] for uid in self.last)
        used: dict[str, Any] = machine_use((self.began[0], self.began[1], 0.0),
                                           (time.monotonic(), machine_busy_seconds(), pods))
        return {**used, "series": {**self.threads.series, **self.pods}}


def spark_setup(spec: dict[str, Any], executors: dict[str, Any], cores: int) -> dict[str, Any]:
    """The pool's Spark setup as a report says it (`sluice simulate --costs` reads it: `whatif.recorded_setup`):
    `spec` the StreamingPool's spec, `executors` its runtime's `GET /v1/executors`, `cores` the
    node's (this machine's: the one node holds the driver and every executor)."""
    per_executor = int(spec["executor"]["cores"])
    return {"master": "k8s", "executor_cores": per_executor, "host_cores": cores,
            "task_slots": executors.get("taskSlots") or per_executor, "bulk_tasks": executors.get("bulkTasks"),
            "priorities": bool(executors.get("raisedPriorities")), "lane_on": str(executors.get("urgentLane", "")).startswith("on")}


EXECUTOR_REQUEST_M = 1000
"""Millicores the pool's executors request in all: two of 500m, as the node tier's pool."""
TOPIC_PARTITIONS = 2
"""Partitions of each query's source and sink topic (as the local harness makes them)."""


def pool_manifest(name: str, policy: str, namespaces: list[str], checkpoints: Path, reserved: int = 0,
                  jit: str = EXECUTOR_JIT, warmup: str | None = None, start_warmup: str | None = None,
                  urgent_reserve: int | None = None, bulk_tasks: int | None = None) -> dict[str, Any]:
    """Sized for this 2-core node as the node tier's pool is: CPU requests of 500m let the driver
    and two executors fit beside the operator (Spark still runs 2 tasks at once per executor).
    `reserved`: task slots the scenario's Real-time queries will hold; the pool may then grow by
    the executors they fill (admission counts maxExecutors x cores), the executors' requests
    splitting the same core between them, so every scenario's pool asks the node for as much."""
    most = 2 + -(-reserved // 2)
    request = "500m" if most == 2 else f"{EXECUTOR_REQUEST_M // most}m"
    return {
        "apiVersion": API_VERSION, "kind": "StreamingPool", "metadata": {"name": name},
        "spec": {"executor": {"cores": 2, "memory": "1Gi", "cpuRequest": request, "jit": jit,
                              **({"warmup": warmup} if warmup else {}),
                              **({"urgentReserve": urgent_reserve} if urgent_reserve is not None else {}),
                              **({"bulkTasks": bulk_tasks} if bulk_tasks is not None else {})},
                 "driver": {"cpuRequest": "500m"}, "minExecutors": 1, "maxExecutors": most,
                 **({"startWarmup": start_warmup} if start_warmup else {}),
                 "policy": "cameo" if policy == AUTO else policy, "allowedNamespaces": namespaces,
                 "checkpoints": {"hostPath": str(checkpoints)}},
    }


def reserved_by(manifests: list[dict[str, Any]]) -> int:
    """Task slots the Real-time queries among `manifests` hold on topics of `TOPIC_PARTITIONS`."""
    total = 0
    for manifest in manifests:
        query = load_query(manifest)
        if mode_of(query).mode == "realTime":
            total += reserved_slots(TOPIC_PARTITIONS, getattr(query.spec.source, "minPartitions", None))
    return total


def _phase(item: dict[str, Any] | None) -> str:
    return str(((item or {}).get("status") or {}).get("phase", ""))


def _wait(what: str, check: Callable[[], bool], timeout: float, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s")
        time.sleep(every)


def run_once(scenario: Scenario, queries: list[StreamingQuery], policy: str, target: NodeTarget, folder: Path,
             log: Any = print, jit: str = EXECUTOR_JIT, warmup: str | None = None,
             start_warmup: str | None = None, urgent_reserve: int | None = None,
             bulk_tasks: int | None = None) -> dict[str, Any]:
    """One policy on a fresh pool: returns a report shaped as `sluice run --report --timeline`'s,
    plus the pool's executors over time and the StreamingQueries' own status figures. `jit`: the
    pool's `spec.executor.jit`; `warmup`: its `spec.executor.warmup`, `start_warmup` its
    `spec.startWarmup`, `urgent_reserve` its `spec.executor.urgentReserve`, `bulk_tasks` its
    `spec.executor.bulkTasks` (None: the pool's defaults)."""
    folder = folder.absolute()  # its checkpoints are a hostPath
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    broker, name = target.broker, queries[0].spec.pool
    tag = uuid.uuid4().hex[:8]
    topics = [broker.create_topic(f"{scenario.name}-{i}-{tag}", partitions=TOPIC_PARTITIONS) for i in range(len(queries))]
    sinks = [broker.create_topic(f"{scenario.name}-{i}-{tag}-out", partitions=TOPIC_PARTITIONS)
             if isinstance(q.spec.sink, KafkaSink)
             else None for i, q in enumerate(queries)]
    manifests = [for_run(q, s.load, broker.bootstrap, t, policy, sink, s.critical)
                 for q, s, t, sink in zip(queries, scenario.queries, topics, sinks, strict=True)]
    namespaces = sorted({q.tenant for q in queries})
    checkpoints = folder / "checkpoints"
    checkpoints.mkdir(mode=0o777)
    checkpoints.chmod(0o777)  # the runtime runs as uid 185
    (folder / "manifests.yaml").write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    target.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces])
    target.apply([pool_manifest(name, policy, namespaces, checkpoints, reserved_by(manifests), jit, warmup,
                                 start_warmup, urgent_reserve, bulk_tasks)])
    pool = Pool(target, name)
    try:
        _wait(f"the pool {name} was not Running", lambda: _phase(target.get("sp", name)) == "Running", POOL_READY_S)
        pool.connect()
        target.apply(manifests)

        def all_running() -> bool:
            hosted: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                hosted = pool.call("/v1/queries")["queries"]
            failed = [f"{key}: {status.get('message', '')}" for key, status in hosted.items()
                      if status.get("phase") == "Failed"]
            if failed:
                raise RuntimeError(f"the pool refused a query ({'; '.join(failed)})")
            return bool(hosted) and all(hosted.get(q.key, {}).get("phase") == "Running" for q in queries)

        try:
            _wait(f"the {len(queries)} queries were not Running in the pool", all_running, QUERIES_READY_S)
        except RuntimeError as error:  # say which, and what their status says
            raise RuntimeError(f"{error}: {_not_running(target, queries)}") from None
        return _measure(scenario, queries, policy, pool, topics, folder, log)
    finally:
        _tear_down(target, name, queries, namespaces)
        shutil.rmtree(checkpoints, ignore_errors=True)


def _not_running(target: NodeTarget, queries: list[StreamingQuery]) -> str:
    """Each query not Running and its status's last word (its condition's message)."""
    out = []
    for q in queries:
        status = ((target.get("sq", q.metadata.name, "-n", q.tenant) or {}).get("status")) or {}
        if status.get("phase") != "Running":
            said = list(dict.fromkeys(c["message"] for c in status.get("conditions") or []  # Reconciling: "nothing in progress"
                                      if c.get("status") != "True" and c.get("type") != "Reconciling" and c.get("message")))
            out.append(f"{q.key} {status.get('phase') or 'without a phase'}{' (' + ' '.join(said) + ')' if said else ''}")
    return "; ".join(out) or "each is Running by its StreamingQuery status"


def _measure(scenario: Scenario, queries: list[StreamingQuery], policy: str, pool: Pool, topics: list[str],
             folder: Path, log: Any) -> dict[str, Any]:
    """Load as the scenario says, from now; every batch read as it commits; then the drain."""
    broker = pool.target.broker
    seconds = scenario.duration.seconds + scenario.warmup.seconds
    ready = time.time()
    measure_from = ready + scenario.warmup.seconds
    batches: dict[str, list[list[Any]]] = {q.key: [] for q in queries}
    since_ready: dict[str, list[list[Any]]] = {q.key: [] for q in queries}  # the warm-up's too: the status's minute
    last: dict[str, float] = {q.key: 0.0 for q in queries}
    statuses: dict[str, Any] = {}
    paths: dict[str, list[list[Any]]] = {q.key: [] for q, s in zip(queries, scenario.queries, strict=True) if s.critical}
    """Each critical query's critical path at each poll: [seconds since the load started, its
    shares over the recent batches, batches run in each FAIR band so far] (what a join changes)."""

    def poll() -> None:
        for q in queries:
            with contextlib.suppress(OSError, ValueError):
                listed = BatchList.model_validate(pool.call(f"/v1/queries/{q.key}/batches?since={last[q.key]}"))
                for b in listed.batches:
                    row = [round(b.committed - ready, 3), b.rows, b.latencies_ms]
                    if b.committed >= ready:
                        since_ready[q.key].append(row)
                    if b.committed >= measure_from:
                        batches[q.key].append(row)
                    last[q.key] = max(last[q.key], b.committed)
        with contextlib.suppress(OSError, ValueError):
            listed = pool.call("/v1/executors")
            pool.executors.append([round(time.time() - ready, 1), float(listed["current"])])
            pool.joined.update({e["id"]: float(e["addedAt"]) for e in listed.get("executors", []) if e.get("addedAt")})
            pool.warmed.update({e["id"]: float(e["warmAt"]) for e in listed.get("executors", []) if e.get("warmAt")})
        with contextlib.suppress(OSError, ValueError):
            statuses.update(pool.call("/v1/queries")["queries"])
            at = round(time.time() - ready, 1)
            for key, series in paths.items():
                status = statuses.get(key) or {}
                series.append([at, status.get("criticalPath") or {}, status.get("bands") or {}])

    cpu = PoolCpu(pool)
    cpu.start()
    placement = pool.target.placement
    sides = placement.cpu_seconds()
    producers, stop, sent = start_load(scenario, queries, topics, broker.bootstrap, seconds, placement.load_thread)
    while any(p.is_alive() for p in producers) and time.time() - ready < seconds + 60:
        for _ in range(int(POLL_S / SERIES_EVERY_S)):
            time.sleep(SERIES_EVERY_S)
            cpu.sample()
        poll()
        cpu.sample(listing=True)
    stop.set()
    for p in producers:
        p.join(60)
    load_end = time.time()
    machine = cpu.use()
    machine["placement"] = placement.record(sides, placement.cpu_seconds(), machine["seconds"])
    poll()
    loaded = dict(statuses)  # each query's status as the load stops: its costs fitted on the load's batches
    users = {key: _shown_status(pool.target.get("sq", key.split("/")[1], "-n", key.split("/")[0]))
             for key in batches}  # what `kubectl get sq` says as the load stops
    # the drain: until every query read what it was sent, or its SLA has passed (as locally)
    limit = drain_limit(drain_seconds(queries), any(s.get("execution") == "realTime" for s in statuses.values()))
    while time.time() - load_end < limit:
        time.sleep(min(POLL_S / 2, limit))
        poll()
        if all(int(statuses.get(k, {}).get("rows", 0)) >= int(sent.get(k, {}).get("sent", 0)) for k in batches):
            break
    poll()
    # read after the drain, the last join seen: kubectl forks no process during the load, and a
    # scaling decided as the load stopped (its executor joining in the drain) is counted
    scaled = scalings(pool.target, pool.name, ready)
    report: dict[str, Any] = {"policy": policy, "target": "node", "gate": "sidecar", "started_at": ready, "queries": {}, "sent": sent,
                              "executors": pool.executors,
                              "joins": sorted(round(at - ready, 1) for at in pool.joined.values() if at > ready),
                              "scalings": scaled,
                              "warm_after_join_s": sorted(round(pool.warmed[e] - at, 1) for e, at in pool.joined.items()
                                                          if at > ready and e in pool.warmed),
                              "drain": {"limit_s": limit,
                                                                     "took_s": round(time.time() - load_end, 1)},
                              "urgent_lane": _pool_status(pool).get("urgentLane", ""), "machine": machine,
                              "cores": os.cpu_count() or 1, "gate_capacity": None, "critical_lane": CRITICAL_LANE}
    spec = ((pool.target.get("sp", pool.name) or {}).get("spec")) or {}
    with contextlib.suppress(OSError, ValueError, KeyError):
        report["spark"] = spark_setup(spec, pool.call("/v1/executors"), report["cores"])
        report["gate_capacity"] = int(spec["executor"]["cores"]) * max(int(spec.get("maxExecutors", 1)), 1)  # the sidecar's
    for q in queries:
        status = statuses.get(q.key, {})
        own = _last_minute(since_ready[q.key], load_end - ready, q.spec.sla.latencyTarget.ms)
        report["queries"][q.key] = {"timeline": batches[q.key], "rows": int(status.get("rows", 0)),
                                    "batches": int(status.get("batches", 0)), "phase": status.get("phase", ""),
                                    "message": status.get("message", ""),
                                    "scheduler": status.get("scheduler", ""),
                                    "critical_path": status.get("criticalPath", {}),
                                    "critical_path_series": paths.get(q.key, []),
                                    "costs": loaded.get(q.key, {}).get("costs"), "cold_ms": status.get("cold_ms", []),
                                    "status_at_load_end": users[q.key], "harness_at_load_end": own}
    (folder / "report.json").write_text(json.dumps(report) + "\n")
    log(f"  {policy} (node): " + ", ".join(f"{k} p99 {v['harness_at_load_end']['p99_ms']} ms over the last minute "
                                            f"(status {v['status_at_load_end']['p99_ms']} ms)"
                                            for k, v in report["queries"].items()))
    return report


def scalings(target: NodeTarget, name: str, since: float) -> list[dict[str, Any]]:
    """The pool's scaling decisions from `since` on (its `Autoscaled` events, each with DS2's
    reason), oldest first: `at_s` seconds after `since`."""
    listed = target.get("events", "-A", "--field-selector",
                        f"involvedObject.kind=StreamingPool,involvedObject.name={name},reason=Autoscaled") or {}
    found = []
    for item in listed.get("items") or []:
        stamp = item.get("eventTime") or item.get("lastTimestamp")
        with contextlib.suppress(TypeError, ValueError):
            at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            if at >= since:
                found.append({"at_s": round(at - since, 1), "reason": str(item.get("message", ""))})
    return sorted(found, key=lambda scaling: scaling["at_s"])


def _pool_status(pool: Pool) -> dict[str, Any]:
    """The StreamingPool's status as the operator last wrote it."""
    return dict(((pool.target.get("sp", pool.name) or {}).get("status")) or {})


def _shown_status(item: dict[str, Any] | None) -> dict[str, Any]:
    status = (item or {}).get("status") or {}
    return {"p99_ms": (status.get("latency") or {}).get("p99Ms"), "attainment": status.get("slaAttainment"),
            "phase": status.get("phase", "")}


def _last_minute(timeline: list[list[Any]], end: float, sla_ms: float) -> dict[str, Any]:
    """The harness's p99 and attainment over the minute before `end` (seconds since the load
    started): the span of the status figures read then."""
    return timeline_figures(timeline, end - STATUS_WINDOW_S, end, sla_ms)


def timeline_figures(timeline: list[list[Any]], start: float, end: float, sla_ms: float) -> dict[str, Any]:
    """p99 (ms) and attainment of the batches of a run's `timeline` ([seconds since the load
    started, rows, latencies at the grid's quantiles]) committed from `start` to `end`."""
    sample = sorted((lat, rows * m) for t, rows, lats in timeline if start <= t <= end and rows > 0
                    for lat, m in zip(lats, MASSES, strict=False))
    total = sum(w for _, w in sample)
    return {"p99_ms": weighted_quantile(sample, 0.99),
            "attainment": sum(w for v, w in sample if v <= sla_ms) / total if total else None}


JOIN_WINDOW_S = 30.0
"""Seconds after an executor joins that its cost is looked for (a cold JVM compiles its first minute)."""


def join_figures(timeline: list[list[Any]], joins: list[float], sla_ms: float,
                 window: float = JOIN_WINDOW_S) -> dict[str, Any]:
    """A query's attainment in the `window` seconds after each executor join (`joins`: seconds
    since the load started, as the timeline's) and over the rest of its timeline (pure)."""
    def after(t: float) -> bool:
        return any(j <= t < j + window for j in joins)

    near = [row for row in timeline if after(row[0])]
    rest = [row for row in timeline if not after(row[0])]
    return {"window_s": window, "joins": [{"at_s": j, **timeline_figures(timeline, j, j + window, sla_ms)} for j in joins],
            "after_joins": timeline_figures(near, -1e12, 1e12, sla_ms), "rest": timeline_figures(rest, -1e12, 1e12, sla_ms)}


def join_lines(runs: dict[str, list[dict[str, Any]]], queries: list[StreamingQuery], critical: list[bool]) -> list[str]:
    """Per run with executor joins, per critical query: attainment in the window after the joins
    against the rest of the measured window."""
    lines = []
    for policy, reports in runs.items():
        for r, report in enumerate(reports):
            joins = report.get("joins") or []
            for q in (q for q, c in zip(queries, critical, strict=True) if c):
                if not joins or q.key not in report["queries"]:
                    continue
                f = join_figures(report["queries"][q.key]["timeline"], joins, q.spec.sla.latencyTarget.ms)
                near, rest = f["after_joins"]["attainment"], f["rest"]["attainment"]

                def pct(v: Any) -> str:
                    return "-" if v is None else f"{v:.1%}"

                warm = report.get("warm_after_join_s") or []
                warmed = f" (warm {', '.join(f'{w:.0f}' for w in warm)} s after)" if warm else ""
                lines.append(f"{policy} #{r + 1} {q.key}: executors joined at {', '.join(f'{j:.0f}' for j in joins)} s{warmed}; "
                             f"attainment {pct(near)} in the {JOIN_WINDOW_S:.0f} s after, {pct(rest)} over the rest")
            lines += [f"{policy} #{r + 1} scaled at {s['at_s']:.0f} s: {s['reason']}" for s in report.get("scalings") or []]
    return lines


def _tear_down(target: NodeTarget, name: str, queries: list[StreamingQuery], namespaces: list[str]) -> None:
    """The queries, then the pool; waits until its driver pod is gone, so the next run starts fresh."""
    for ns in namespaces:
        target.cluster.kubectl("delete", "sq", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False,
                               timeout=150)
    target.cluster.kubectl("delete", "sp", name, "--wait=true", "--timeout=180s", check=False, timeout=200)

    def gone() -> bool:
        listed = target.get("pods", "-n", NS, "-l", f"sluice.dev/pool={name}") or {"items": []}
        return not listed["items"]

    with contextlib.suppress(RuntimeError):
        _wait(f"the pool {name}'s pods were still there", gone, 180, every=2)


def status_lines(runs: dict[str, list[dict[str, Any]]], queries: list[StreamingQuery]) -> list[str]:
    """The StreamingQueries' own figures against the harness's over the same last minute."""
    lines = []
    for policy, reports in runs.items():
        for r, report in enumerate(reports):
            for q in queries:
                item = report["queries"].get(q.key, {})
                shown, own = item.get("status_at_load_end", {}), item.get("harness_at_load_end", {})

                def ms(v: Any) -> str:
                    return "-" if v is None else f"{v:.0f} ms"

                def pct(v: Any) -> str:
                    return "-" if v is None else f"{v:.1%}"

                lines.append(f"{policy} #{r + 1} {q.key}: status p99 {ms(shown.get('p99_ms'))}, attainment "
                             f"{pct(shown.get('attainment'))}; harness (same minute) p99 {ms(own.get('p99_ms'))}, "
                             f"attainment {pct(own.get('attainment'))}")
    return lines
