"""Chaos: the operator process SIGKILLed at random points while queries are created, updated and
deleted against the real apiserver, and started again each time. After the last restart it
converges: one of each object its pool owns, every query of the apiserver registered with the
pool's runtime at its latest spec, no registration left of a deleted query, every finalizer done.

Real parts: the apiserver (etcd), the operator as its own process (`python -m sluice.operator`),
the pool runtime's control API over loopback HTTP with a QueryHost on real Spark. Seeded by
`--chaos-seed`; `--chaos-rounds` x 4 kills (at least 20).
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sluice.runtime.control import make_control_app
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread
from sluice.testing.controlplane import ControlPlane, free_port
from sluice.testing.processes import spawn, stop
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]

SYSTEM = "sluice-chaos"
TENANTS = ("chaos-a", "chaos-b")
NAMES = ("q0", "q1", "q2")
POOL = "chaos"


@dataclass
class Chaos:
    plane: ControlPlane
    host: QueryHost
    logs: Path
    env: dict[str, str]
    proc: Any = None
    starts: int = 0
    servers: list[ServerThread] = field(default_factory=list)

    def start_operator(self) -> None:
        """Start it and wait until it watches (so a kill lands in its handling, not its imports)."""
        self.starts += 1
        log = self.logs / f"operator-{self.starts}.log"
        self.proc = spawn("chaos-operator", [sys.executable, "-m", "sluice.operator"], log, env=self.env)
        wait_for(lambda: "Activity 'login' succeeded" in log.read_text(errors="replace"), 60,
                 f"the operator to start (log: {log})", every=0.05)

    def lives_that_handled(self) -> int:
        """Operator runs that got to handle at least one object before they were killed."""
        return sum("Handler '" in (self.logs / f"operator-{n}.log").read_text(errors="replace")
                   for n in range(1, self.starts + 1))

    def handled_now(self) -> int:
        """Handler results (succeeded, failed, to be retried) the running operator has logged."""
        return (self.logs / f"operator-{self.starts}.log").read_text(errors="replace").count("Handler '")

    def kill_operator(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        stop("chaos-operator", self.proc)

    def kubectl(self, *args: str, stdin: str | None = None) -> Any:
        return self.plane.kubectl(*args, input=stdin, check=False)

    def queries(self) -> list[dict[str, Any]]:
        """The StreamingQueries of this test's namespaces (the session's apiserver holds others')."""
        return [q for ns in TENANTS for q in self.objects("streamingqueries", ns)]

    def objects(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json"] + (["-n", namespace] if namespace else ["-A"]) + (["-l", selector] if selector else [])
        return list(json.loads(self.plane.kubectl(*args).stdout)["items"])


def _query(name: str, namespace: str, sla_ms: int, suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": name, "namespace": namespace},
            "spec": {"pool": POOL, "source": {"type": "rate", "rowsPerSecond": 5}, "pipeline": [{"filter": "value % 2 = 0"}],
                     "sink": {"type": "noop"}, "sla": {"latencyTarget": f"{sla_ms}ms"}, "trigger": {"interval": "2s"},
                     "suspend": suspend}}


@pytest.fixture(scope="module")
def chaos(crds_installed: ControlPlane, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    plane = crds_installed
    for ns in (SYSTEM, *TENANTS):
        plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    logs = Path(tmp_path_factory.mktemp("chaos-operator"))
    # its own namespaces only: the session's apiserver holds other tests' queries (pools are
    # cluster-scoped and always watched)
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "SLUICE_NAMESPACE": SYSTEM,
           "SLUICE_WATCH_NAMESPACES": ",".join(TENANTS),
           "SLUICE_METRICS_PORT": "-1", "SLUICE_HEALTH_PORT": "-1", "SLUICE_STATUS_INTERVAL": "2",
           "SLUICE_POOL_SYNC_INTERVAL": "2", "SLUICE_PEERING": "false"}
    host = QueryHost(spark, logs / "checkpoints", LocalScheduler(Scheduler("cameo", capacity=2)))
    world = Chaos(plane, host, logs, env)
    port = free_port()
    world.start_operator()
    try:
        plane.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool",
            "metadata": {"name": POOL, "annotations": {"sluice.dev/runtime-url": f"http://127.0.0.1:{port}"}},
            "spec": {"policy": "cameo", "allowedNamespaces": list(TENANTS)}}))
        secret = wait_for(lambda: next(iter(world.objects("secret", SYSTEM, f"sluice.dev/pool={POOL}")), None), 60,
                          "the pool's token Secret")
        token = base64.b64decode(secret["data"]["token"]).decode()
        world.servers.append(ServerThread(make_control_app(host, token), port=port).start())
        yield world
    finally:
        if world.proc is not None and world.proc.poll() is None:
            for ns in TENANTS:  # the finalizers need the operator
                plane.kubectl("delete", "streamingqueries", "--all", "-n", ns, "--wait=true", "--timeout=60s", check=False)
            plane.kubectl("delete", "streamingpool", POOL, "--wait=true", "--timeout=60s", check=False)
        if world.proc is not None:
            stop("chaos-operator", world.proc)
        for server in world.servers:
            server.stop()
        host.stop_all()


def test_an_operator_killed_at_random_points_converges(chaos: Chaos, chaos_rounds: int, chaos_seed: int) -> None:
    rng = random.Random(chaos_seed)
    kills = max(20, 4 * chaos_rounds)
    done: list[str] = []
    for round_ in range(kills):
        for _ in range(rng.randint(1, 3)):
            namespace, name = rng.choice(TENANTS), rng.choice(NAMES)
            action = rng.choice(("apply", "apply", "delete"))
            if action == "apply":
                spec = _query(name, namespace, rng.choice((1500, 2000, 3000)), rng.random() < 0.3)
                chaos.kubectl("apply", "-f", "-", stdin=json.dumps(spec))
                done.append(f"{round_}: apply {namespace}/{name} sla {spec['spec']['sla']['latencyTarget']} "
                            f"suspend {spec['spec']['suspend']}")
            else:
                chaos.kubectl("delete", "streamingquery", name, "-n", namespace, "--wait=false", "--ignore-not-found")
                done.append(f"{round_}: delete {namespace}/{name}")
        # somewhere in the operator's handling of what just changed: after 0-3 of its handlers have
        # finished (counted, not timed: on a busy 2-core node its first handler can take 3 s), then
        # a random moment more
        after, limit = rng.randint(0, 3), time.monotonic() + 15  # fewer objects than that: killed at the limit
        while chaos.handled_now() < after and time.monotonic() < limit:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.05, 2.0) if after == 0 else rng.uniform(0.0, 0.5))
        chaos.kill_operator()
        chaos.start_operator()
    what = f"seed {chaos_seed}, {kills} kills, operations: {done[-12:]}"

    last: list[str] = [""]

    def converged() -> bool:
        last[0] = differences()
        return not last[0]

    def differences() -> str:
        queries = chaos.queries()
        waiting = [q["metadata"]["name"] for q in queries if q["metadata"].get("deletionTimestamp")]
        if waiting:
            return f"finalizers still pending on {waiting}"
        wanted = {f"{q['metadata']['namespace']}/{q['metadata']['name']}": q for q in queries}
        hosted = dict(chaos.host.queries)
        if set(hosted) != set(wanted):
            return f"registered {sorted(hosted)} but the apiserver has {sorted(wanted)}"
        for key, body in wanted.items():  # at its latest spec, in its phase
            spec = hosted[key].query.spec
            if spec.sla.latencyTarget.text != body["spec"]["sla"]["latencyTarget"] or spec.suspend != body["spec"]["suspend"]:
                return f"{key} registered at sla {spec.sla.latencyTarget.text} suspend {spec.suspend}, not {body['spec']}"
            if hosted[key].phase != ("Suspended" if spec.suspend else "Running"):
                return f"{key} is {hosted[key].phase} ({hosted[key].message})"
        return ""

    try:
        wait_for(converged, 180, "the operator to converge", every=1)
    except AssertionError:
        raise AssertionError(f"not converged: {last[0]} ({what}; logs in {chaos.logs})") from None
    for kind in ("deployments", "services", "configmaps", "serviceaccounts"):
        owned = chaos.objects(kind, SYSTEM, f"sluice.dev/pool={POOL}")
        assert len(owned) == 1, (kind, [o["metadata"]["name"] for o in owned], what)
    assert len(chaos.objects("secrets", SYSTEM, f"sluice.dev/pool={POOL}")) == 1, what
    handled = chaos.lives_that_handled()
    assert handled >= kills // 2, f"only {handled} of {chaos.starts} operator runs handled anything: the kills missed ({what})"
    print(f"chaos seed {chaos_seed}: {kills} operator kills over {len(done)} operations ({handled} of "
          f"{chaos.starts} operator runs handled objects before their kill); converged with "
          f"{len(chaos.host.queries)} queries registered, 0 duplicates, 0 orphans, every finalizer done")


def test_the_operator_rides_out_an_apiserver_restart(chaos: Chaos, chaos_seed: int) -> None:
    """kube-apiserver SIGKILLed and started again under a running operator: its status timers
    resume (a running query's batch count moves on in its status) and its watches resume (a
    query created after the restart is registered), without the operator being restarted."""
    rng = random.Random(chaos_seed)
    if chaos.proc is None or chaos.proc.poll() is not None:
        chaos.start_operator()
    operator = chaos.proc

    def batches(namespace: str, name: str) -> int:
        body = chaos.plane.get("sq", name, namespace) or {}  # None while the apiserver is away
        return int((body.get("status") or {}).get("batches") or 0)

    chaos.kubectl("apply", "-f", "-", stdin=json.dumps(_query("steady", "chaos-a", 2000, False)))
    before = wait_for(lambda: (n := batches("chaos-a", "steady")) > 0 and n, 90, "the query's batches in its status")
    down = rng.uniform(2.0, 6.0)
    chaos.plane.restart_apiserver(down=down)
    wait_for(lambda: batches("chaos-a", "steady") > before + 2, 120,
             f"the status timer after an apiserver restart (down {down:.1f}s, seed {chaos_seed})", every=1)
    chaos.kubectl("apply", "-f", "-", stdin=json.dumps(_query("after", "chaos-b", 3000, True)))
    wait_for(lambda: "chaos-b/after" in chaos.host.queries, 120,
             f"a query created after the apiserver restart registered (down {down:.1f}s, seed {chaos_seed})", every=1)
    assert chaos.proc is operator and operator.poll() is None  # the same operator process throughout
    print(f"chaos seed {chaos_seed}: apiserver down {down:.1f}s; the operator's timers and watches resumed")
