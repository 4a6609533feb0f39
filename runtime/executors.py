"""Executor targets: grow through Spark's request API, shrink by draining chosen executors.

Growing is one call: `SparkContext.requestTotalExecutors(n)`; the cluster manager (Kubernetes,
or standalone in `local-cluster` mode) starts the missing executors. Shrinking needs more,
because lowering the request never stops a running executor: the runtime picks victims and
kills them through the scheduler backend (py4j), keeping the lowered request so nothing
replaces them.

Which executors go (`victims`, pure): idle ones first (no running task, so no batch loses
work), then those holding the fewest cached blocks, then the newest (older executors have warm
JITs and loaded state stores). Kills are graceful for `grace` seconds: Spark itself refuses to
kill an executor that is running a task (`force=False`), so a victim goes between two
micro-batches. The busy check is Spark's own, atomic with the kill (it also stops offering the
victim tasks), so the runtime asks for every victim and retries every 50 ms while Spark refuses:
with back-to-back batches an executor is idle only for moments, which a slower poll of the
status API misses. After `grace` seconds the rest are killed by force; their running tasks are
retried elsewhere and state reloads from the checkpoint (slower batch, nothing lost; a Kafka
sink with `delivery: atLeastOnce` may then get a task's rows twice; exactlyOnce does not).

Megaphone on Spark: when stateful queries run, their state partitions sit in state stores on the
executors, and an executor's removal makes the next batch reload its share from the checkpoint.
Removing several at once makes one batch pay for all of it. So with state held, the shrink is
paced: one executor at a time, and the next only after the previous one is gone and every
stateful query has committed a batch since (each batch pays a bounded share, interleaved with
processing). The grace deadline still bounds the whole shrink: once it has passed, the rest go
together, by force. Where state partitions move first (`plan_moving`), the grace counts from the
last partition moved: the leaving executors go once their state has left, however long the paced
moves take (measured: a 120 s grace from the change forced a 1 GiB shrink with 17-23 units
still to move), and a mover that stalls still ends the shrink a grace after its last move. On a
grow, state moves onto a new executor only once it is warm (with the urgent lane, warm as the
lane's warm-up calls it, `Warmup.java`, since until then urgent tasks stay off it; else once it
has run a task, or `WARM_AFTER` has passed), so the batches that pay for its JVM's start are not also
the ones that reload state; the scaler gives each new executor a task of its own at once
(`executor_warmup`: a small job that prefers it), since a stream's tasks stay where their data is.

With executors to decommission (`session.DECOMMISSION`, on for every session with a cluster
manager), a graceful removal decommissions the victim instead (`decommissionExecutors`): it takes
no new task, finishes its running ones, hands its shuffle files to the executors that stay, and
exits. A kill, even of an idle executor, took the map outputs of the batch in flight with it,
and that batch's next stage failed its fetches and ran the map stage again (seconds per kill in
`sluice bench rescale`). A forced removal after the grace is still a kill.

`plan` is pure (executors, target, now in, one step out); `ExecutorScaler` is the thin shell:
the list comes from Spark's status REST API, the kills from a background thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sluice.api.constants import WARMUP_CONF
from sluice.api.pool import PoolPriority
from sluice.api.wire import ExecutorInfo, ExecutorState

from . import executor_warmup, jvm_sink
from .batching import settled
from .megaphone import Executor, StateMover
from .stages import spark_time

if TYPE_CHECKING:
    from .host import QueryHost

log = logging.getLogger("sluice.runtime.executors")
DRAIN_POLL = 0.05
"""Seconds between graceful kill attempts while Spark refuses a busy victim."""
WARM_AFTER = 30.0
"""Seconds after which a new executor takes state partitions even if it has run no task yet
(a query whose source never gives it one would otherwise never use it)."""


class ExecutorTargetError(RuntimeError):
    """This runtime cannot take executor targets (local mode, dynamic allocation, no status API)."""


@dataclass(frozen=True, slots=True)
class ExecutorView:
    id: str
    active_tasks: int
    added_at: float
    """Epoch seconds."""
    cached_blocks: int = 0
    host: str = ""
    completed_tasks: int = 0

    def warm(self, now: float) -> bool:
        """Whether state may move onto it: it has run a task (its JVM loaded the query's classes
        and compiled its hot code), or it has been up `WARM_AFTER` seconds."""
        return self.completed_tasks > 0 or now - self.added_at >= WARM_AFTER


@dataclass(frozen=True, slots=True)
class Step:
    kill: tuple[str, ...] = ()
    force: bool = False


def parse_executors(rows: list[dict[str, Any]]) -> list[ExecutorView]:
    """Live executors (not the driver) from /api/v1/applications/<app>/executors."""
    out = []
    for row in rows:
        if row.get("id") == "driver" or not row.get("isActive", True):
            continue
        out.append(ExecutorView(str(row["id"]), int(row.get("activeTasks", 0)), spark_time(row.get("addTime")),
                                int(row.get("rddBlocks", 0)), str(row.get("hostPort", "")).rpartition(":")[0],
                                int(row.get("completedTasks", 0))))
    return out


def victims(executors: list[ExecutorView], count: int) -> list[str]:
    """The `count` executors to remove: idle first, then fewest cached blocks, then newest."""
    ranked = sorted(executors, key=lambda e: (e.active_tasks > 0, e.cached_blocks, -e.added_at, e.id))
    return [e.id for e in ranked[:max(count, 0)]]


def plan(executors: list[ExecutorView], target: int, removing: frozenset[str], since: float, now: float,
         grace: float, paced: bool = False, settled: bool = True) -> Step:
    """One scale-down step: which executors to kill now and whether by force.

    `removing` are kills already under way (they stay listed until Spark notices them gone);
    `since` is when the current target was set. Victims go gracefully until `grace` has passed.
    `paced` (state is held): one executor per step, and only once the last kill is done and
    `settled` (every stateful query committed a batch since).
    """
    staying = [e for e in executors if e.id not in removing]
    surplus = len(staying) - target
    if surplus <= 0:
        return Step()
    force = now - since >= grace
    if paced and not force:
        if removing or not settled:
            return Step()
        surplus = 1
    return Step(tuple(victims(staying, surplus)), force)  # graceful: Spark kills only the idle ones


def plan_moving(executors: list[ExecutorView], target: int, removing: frozenset[str], leaving: frozenset[str],
                holding: set[str], since: float, now: float, grace: float,
                moved_at: float | None = None) -> tuple[frozenset[str], Step]:
    """One scale-down step when state partitions move first (Megaphone, `megaphone.StateMover`):
    the surplus is chosen once (`leaving`, kept across steps, topped up if the target drops), its
    partitions move off a few per batch, and each victim is killed gracefully once no state
    partition is active on it (`holding` is the last listing's executors). After `grace` with no
    state moved (from the target's change `since`, or from the last move, `moved_at`, whichever is
    later: a shrink goes once its partitions have left, however long the paced moves take, and a
    stalled one still ends), the rest go by force. Returns the leaving set and the step."""
    staying = [e for e in executors if e.id not in removing]
    surplus = len(staying) - target
    if surplus <= 0:
        return frozenset(), Step()
    if now - max(since, moved_at if moved_at is not None else since) >= grace:
        return frozenset(), Step(tuple(victims(staying, surplus)), True)
    chosen = [e for e in sorted(leaving) if e in {s.id for s in staying}][:surplus]
    chosen += victims([e for e in staying if e.id not in chosen], surplus - len(chosen))
    return frozenset(chosen), Step(tuple(v for v in chosen if v not in holding))


@dataclass
class _Target:
    value: int
    since: float
    removing: set[str] = field(default_factory=set)
    killed: list[str] = field(default_factory=list)
    leaving: frozenset[str] = frozenset()


class ExecutorScaler:
    """Sets a Spark application's executor count; shrinking drains in a background thread."""

    def __init__(self, spark: Any, grace: float = 30.0, interval: float = 0.5,
                 clock: Callable[[], float] = time.time,
                 stateful: Callable[[], dict[str, int]] | None = None, mover: StateMover | None = None,
                 paced: bool = True) -> None:
        """`stateful`: committed batch counts of the running stateful queries (pacing, see above);
        `mover`: moves state partitions between batches (grow and shrink); without one a shrink is
        paced by whole executors; `paced=False` kills the surplus at once (Spark's own way, for
        `sluice bench rescale`)."""
        self.spark = spark
        self.mover = mover
        self.paced = paced
        self.urgent_lane = ""
        """`session.lane_sentence` of the runtime (set by its entry point), reported in `state`."""
        self.lane: tuple[int | None, int | None, bool] = (None, None, False)
        """(task slots, bulk tasks at once, raised priorities) in each executor, as its entry point
        started the lane, reported in `state`: what a recording's setup is for `sluice simulate`."""
        self.priority: PoolPriority | None = None
        """The priority lever in force (`priority.decide`, set by the entry point), reported in `state`."""
        self.stateful = stateful or (lambda: {})
        self._mark: dict[str, int] = {}
        self.grace = grace
        self.interval = interval
        self.clock = clock
        self._target: _Target | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._refused = False
        self._moved_at: float | None = None
        """When the mover last moved a state partition (the clock's seconds)."""
        self._moves_seen = 0
        """The mover's moves as the scaler last saw them."""
        conf = spark.sparkContext.getConf()
        self._warming_up = (jvm_sink.LANE_PLUGIN in (conf.get("spark.plugins") or "")
                            and float(conf.get(WARMUP_CONF, "0") or 0) > 0 and jvm_sink.loaded(spark))
        """Executors warm up before urgent work here (the lane's plugin, a warm-up above 0)."""
        self._warmth_trouble = ""
        self._warmth_seen = 0
        """Warm-up events logged so far."""
        self.warm_ups: dict[str, float | None] = {}
        """Executor id -> seconds its warm-up job took (None while it runs, or if it failed)."""
        if mover is not None:
            self._ensure_thread()  # state moves on growth need no target change

    @classmethod
    def for_host(cls, host: QueryHost, grace: float = 30.0, interval: float = 0.5, moving: bool = True,
                 paced: bool = True) -> ExecutorScaler:
        """The scaler of a runtime's executors: drains paced on the host's stateful batches and,
        when `moving`, moves their state partitions (Megaphone), woken by each stateful commit."""
        mover = StateMover(host.spark, host.stateful_queries, host.metrics, host.reads.slacks) if moving else None
        scaler = cls(host.spark, grace=grace, interval=interval, stateful=host.stateful_batches, mover=mover, paced=paced)
        if moving:
            host.after_stateful_commit.append(scaler.wake)
            assert mover is not None
            host.gate.before_stateful.append(mover.apply)
        return scaler

    # ------------------------------------------------------------------ reading

    def _url(self) -> str:
        sc = self.spark.sparkContext
        if not sc.uiWebUrl:
            raise ExecutorTargetError("executor targets read Spark's status API; leave spark.ui.enabled on")
        return f"{sc.uiWebUrl.rstrip('/')}/api/v1/applications/{sc.applicationId}/executors"

    def executors(self) -> list[ExecutorView]:
        with urllib.request.urlopen(self._url(), timeout=5) as response:
            return parse_executors(json.loads(response.read()))

    def state(self) -> ExecutorState:
        executors = self.executors()
        listed = {e.id for e in executors}
        with self._lock:
            target = self._target
            value = target.value if target else None
            removing = sorted(target.removing & listed) if target else []
            removed = list(target.killed) if target else []
            leaving = sorted(target.leaving & listed) if target else []
        mover = self.mover
        warmth = self.warmth()
        known = warmth.executors if warmth else {}
        return ExecutorState(
            current=len(executors),
            target=value,
            removing=removing,
            removed=removed,
            executors=[ExecutorInfo(id=e.id, activeTasks=e.active_tasks, addedAt=e.added_at or None,
                                    warm=known[e.id] == "warm" if e.id in known else None,
                                    warmAt=warmth.warm_at(e.id) if warmth else None)
                       for e in executors],
            leaving=leaving,
            placement=mover.placement() if mover else {},
            stateMoves=mover.moves if mover else 0,
            stateMovedBytes=mover.moved_bytes if mover else 0,
            pendingMoves=mover.pending() if mover else 0,
            urgentLane=self.urgent_lane,
            taskSlots=self.lane[0], bulkTasks=self.lane[1], raisedPriorities=self.lane[2],
            priority=self.priority,
        )

    def warmth(self) -> jvm_sink.Warmth | None:
        """The executors' warm-up where they warm up before urgent work (`jvm_sink.warmth`), else
        None; its trouble, if any, logged once."""
        if not self._warming_up:
            return None
        found = jvm_sink.warmth(self.spark)
        if found.trouble and found.trouble != self._warmth_trouble:
            log.warning("joining executors take urgent tasks while they warm up: %s", found.trouble)
        self._warmth_trouble = found.trouble
        for line in found.events[self._warmth_seen:]:
            log.info("executor warm-up: %s", line)
        self._warmth_seen = len(found.events)
        return found

    # ------------------------------------------------------------------ writing

    def check(self) -> None:
        """Raise ExecutorTargetError with one sentence if this application cannot take targets."""
        sc = self.spark.sparkContext
        if sc._jsc.sc().isLocal():
            raise ExecutorTargetError(
                "executor targets need a cluster manager (Kubernetes or local-cluster); this runtime runs in local mode")
        if sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
            raise ExecutorTargetError(
                "spark.dynamicAllocation.enabled is true, so Spark's allocation manager owns the executor count; "
                "turn it off to set targets")
        self._url()

    def set_target(self, target: int) -> bool:
        """Ask for `target` executors; surplus ones are drained in the background. Returns Spark's answer."""
        if target < 0:
            raise ValueError("target must be a whole number of executors, 0 or more")
        self.check()
        sc = self.spark.sparkContext
        jvm = sc._jvm
        no_locality = jvm.PythonUtils.toScalaMap(jvm.java.util.HashMap())
        accepted = bool(sc._jsc.sc().requestTotalExecutors(target, 0, no_locality))
        with self._lock:
            removing = self._target.removing if self._target else set()
            self._target = _Target(target, self.clock(), removing)
        self._ensure_thread()
        self._wake.set()
        return accepted

    def wake(self) -> None:
        """Run a step now (a stateful batch has committed: its state moves go in before the next
        batch's tasks are placed, not up to `interval` later, when that batch may already run)."""
        self._wake.set()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="sluice-executors", daemon=True)
            self._thread.start()

    def step(self) -> Step:
        """List executors, forget finished kills, and carry out one planned step."""
        executors = self.executors()
        listed = {e.id for e in executors}
        with self._lock:
            target = self._target
            # executors being removed (decommissioning ones stay listed until they exit) take no
            # new task: their units must move off too, never onto them
            leaving = target.leaving | frozenset(target.removing & listed) if target else frozenset()
        if self.mover is not None and executors:  # state moves between batches (none in local mode)
            now = self.clock()
            for e in executors:
                if e.completed_tasks == 0 and e.id not in self.warm_ups and e.id not in leaving and e.host:
                    self._warm(e)
            warmth = self.warmth()  # where executors warm up before urgent work, state waits for it too
            known = warmth.executors if warmth else {}
            self.mover.step([Executor(e.id, e.host, known[e.id] == "warm" if e.id in known else e.warm(now))
                             for e in executors], leaving)
            if self.mover.moves > self._moves_seen:  # reported as a batch asked, since the last step
                self._moved_at, self._moves_seen = now, self.mover.moves
        with self._lock:
            target = self._target
            if target is None:
                return Step()
            target.removing &= listed
            held = self.stateful()
            if self.mover is not None and held:
                target.leaving, decision = plan_moving(executors, target.value, frozenset(target.removing), target.leaving,
                                                       self.mover.holding(), target.since, self.clock(), self.grace,
                                                       self._moved_at)
            else:
                decision = plan(executors, target.value, frozenset(target.removing), target.since, self.clock(), self.grace,
                                paced=bool(held) and self.paced, settled=settled(self._mark, held))
        if not decision.kill:
            return decision
        if self.decommissions and not decision.force:
            done = decommission(self.spark, list(decision.kill), f"executor target {target.value}")
        else:
            done = kill(self.spark, list(decision.kill), decision.force)
        with self._lock:
            target.removing.update(done)
            target.killed.extend(done)
            if done:
                self._mark = held
        self._refused = len(done) < len(decision.kill)  # busy: ask again soon
        if done:
            log.info("removing executors %s (%s) toward a target of %d", ", ".join(done),
                     "forced" if decision.force else "decommissioned" if self.decommissions else "idle", target.value)
        return Step(tuple(done), decision.force)

    def _warm(self, executor: ExecutorView) -> None:
        """Give a new executor a task of its own, in a thread of its own (the job blocks)."""
        self.warm_ups[executor.id] = None

        def run() -> None:
            start = time.monotonic()
            try:
                executor_warmup.run_on(self.spark, executor.host, executor.id)
            except Exception as error:  # py4j: the context is stopping; WARM_AFTER still applies
                log.info("warming executor %s: %s", executor.id, error)
                return
            self.warm_ups[executor.id] = round(time.monotonic() - start, 3)
            log.info("executor %s warmed in %.1f s", executor.id, time.monotonic() - start)
            self._wake.set()  # its state may move now

        threading.Thread(target=run, name=f"sluice-warm-{executor.id}", daemon=True).start()

    @property
    def decommissions(self) -> bool:
        """Whether a graceful removal decommissions (`session.DECOMMISSION` is on) or kills an idle executor."""
        conf = self.spark.sparkContext.getConf()
        return bool(conf.get("spark.decommission.enabled", "false").lower() == "true")

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(DRAIN_POLL if self._refused else self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.step()
            except (OSError, ValueError) as error:  # the UI may be restarting; try again next round
                log.debug("executor step: %s", error)
            except Exception as error:  # py4j: the context is stopping
                log.info("executor step stopped: %s", error)
                return

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.mover is not None:
            try:
                self.mover.stop()
            except Exception as error:  # py4j: the context already stopped, taking its conf along
                log.debug("locality wait not given back: %s", error)


# ---------------------------------------------------------------------- Spark internals (py4j)
# The scheduler backend's removal calls; `tests/spark/test_executors.py` fails loudly if a Spark
# upgrade changes them.


def kill(spark: Any, ids: list[str], force: bool) -> list[str]:
    """`killExecutors`: Spark refuses a busy executor unless `force`; returns the ones it kills."""
    sc = spark.sparkContext
    backend = sc._jsc.sc().schedulerBackend()
    # adjustTargetNumExecutors=False: the request already says the target; countFailures=False
    killed = backend.killExecutors(sc._jvm.PythonUtils.toSeq(ids), False, False, force)
    return [str(killed.apply(i)) for i in range(killed.size())]


def decommission(spark: Any, ids: list[str], why: str) -> list[str]:
    """`decommissionExecutors`: each stops taking tasks, finishes its running ones, migrates its
    shuffle blocks and exits; returns the ones Spark accepted (busy ones too)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    pairs = sc._gateway.new_array(jvm.scala.Tuple2, len(ids))
    for i, executor in enumerate(ids):
        info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo(f"sluice: {why}", jvm.scala.Option.apply(None))
        pairs[i] = jvm.scala.Tuple2(executor, info)
    # adjustTargetNumExecutors=False (as for kills); triggeredByExecutor=False: the driver asks
    accepted = sc._jsc.sc().schedulerBackend().decommissionExecutors(pairs, False, False)
    return [str(accepted.apply(i)) for i in range(accepted.size())]
