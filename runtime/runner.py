"""`sluice run`: run StreamingQuery manifests locally on the embedded default (`local[*]`).

Policies: `cameo` and `edf` gate every micro-batch through the Sluice scheduler core (in-process)
and pick a FAIR band per batch; `fifo` and `fair` are Spark on its own: FIFO scheduling with no
gate, or FAIR scheduling with one equal pool per query and no gate.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.api.constants import CRITICAL_LANE, DEFAULT_POLICY, GATES
from sluice.api.query import StreamingQuery
from sluice.api.wire import QueryStatus
from sluice.scheduler.client import SchedulerClient
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler

from . import priority, realtime
from .gate import Gatekeeper
from .host import QueryHost
from .policy import mode_of
from .session import Lane, SessionConfig, build_session, lane_for, lane_wanted


@contextlib.contextmanager
def sidecar(policy: str, capacity: int, log: Path, timeout: float = 30.0) -> Iterator[str]:
    """A scheduler sidecar process on a free loopback port, as the pool pod runs it, its output in
    `log`; yields its URL."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sluice.scheduler", "--port", "0", "--policy", policy,
                                 "--capacity", str(capacity)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while "listening on " not in (text := log.read_text(errors="replace")):
            if proc.poll() is not None or time.monotonic() > deadline:
                last = (text.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"the scheduler sidecar did not start: {last}")
            time.sleep(0.05)
        yield text.split("listening on ", 1)[1].split()[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class RunOptions:
    policy: str = DEFAULT_POLICY
    duration: float | None = None
    master: str = "local[*]"
    workdir: Path | None = None
    capacity: int | None = None
    on_tick: Callable[[dict[str, QueryStatus]], None] | None = None
    tick: float = 1.0
    warmup: float = 0.0
    """Seconds after every query has been added whose batches are left out of the latency figures."""
    timeline: bool = False
    """Keep every batch's latencies for the whole run and put them in the report."""
    weights: dict[str, float] = field(default_factory=dict)
    """Tenant (namespace) -> quota weight, from a StreamingPool's `quotas` (default 1)."""
    stop: threading.Event = field(default_factory=threading.Event)
    drain: float = 0.0
    """Seconds the run may go on after `duration` until every query has read the rows `sent_file`
    names (a benchmark's load has stopped by then); 0: stop at `duration`."""
    sent_file: Path | None = None
    """JSON {query key: rows sent}, written by the load generator once it has stopped."""
    urgent_lane: str = "gated"
    """Who gets the urgent lane (`session.LANE_CHOICES`): gated policies, all, or none."""
    gate: str = "inprocess"
    """Where a gated policy's scheduler runs (`GATES`): in this process, or as the pool pod's
    sidecar does, a `python -m sluice.scheduler` process asked over HTTP on loopback."""
    ready_file: Path | None = None
    """Written once every query has been added (Spark up, each query started or refused): a load
    generator can wait for it instead of guessing Spark's start time. The warm-up and the duration
    count from that moment."""


def _sent(path: Path | None) -> dict[str, int] | None:
    """The rows each query was sent, once the load generator has written them; else None."""
    if path is None or not path.exists():
        return None
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
    except (ValueError, AttributeError):
        return None  # still being written


def all_read(statuses: dict[str, QueryStatus], sent: dict[str, int] | None) -> bool:
    """Every query of this run named in `sent` has read (in committed batches) at least the rows
    it was sent (pure); queries `sent` names that this run does not host are another run's. No
    counts yet, or none of this run's: False."""
    if sent is None:
        return False
    mine = [key for key in sent if key in statuses]
    return bool(mine) and all(statuses[key].rows >= sent[key] for key in mine)


def _needs_kafka(queries: list[StreamingQuery]) -> bool:
    return any(q.spec.source.type == "kafka" or q.spec.sink.type == "kafka" for q in queries)


def run(queries: list[StreamingQuery], options: RunOptions) -> dict[str, Any]:
    """Run the queries until `duration` passes or `stop` is set; returns the report."""
    if options.gate not in GATES:
        raise ValueError(f"gate {options.gate!r}: use one of {', '.join(GATES)}.")
    mode = mode_of(options.policy)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="sluice-run-"))
    master = options.master
    reserved = realtime.reserved_total(queries)
    # urgent tasks find a free slot at once; bulk ones run one a core, taking turns
    lane = lane_for(lane_wanted(options.urgent_lane, mode.gated), master == "local[*]", os.cpu_count() or 2)
    if master == "local[*]":  # Real-time queries hold their slots: give micro-batches the cores besides them
        master = realtime.local_master(lane.slots, reserved)
    config = SessionConfig(
        master=master,
        scheduling=mode.scheduling,
        urgent_lane=lane.on,
        bulk_tasks=lane.bulk_tasks,
        kafka=_needs_kafka(queries),
        workdir=workdir,
    )
    with contextlib.ExitStack() as stack:
        gate: Gatekeeper | None = None
        capacity: int | None = None
        if mode.gated:
            # Work-conserving by default: a Spark batch is many tasks, so capping whole batches at the
            # core count starves far-deadline queries and costs throughput. The gate orders requests
            # that arrive together; the FAIR bands give urgent tasks the slots at each task launch.
            capacity = (options.capacity or max(2 * (os.cpu_count() or 2), len(queries))) + reserved
            if options.gate == "sidecar":
                workdir.mkdir(parents=True, exist_ok=True)
                gate = SchedulerClient(stack.enter_context(sidecar(options.policy, capacity, workdir / "scheduler.log")))
            else:
                gate = LocalScheduler(Scheduler(options.policy, capacity=capacity, lane=CRITICAL_LANE))
        return _run(queries, options, config, gate, lane, master, capacity)


def _run(queries: list[StreamingQuery], options: RunOptions, config: SessionConfig, gate: Gatekeeper | None,
         lane: Lane, master: str, capacity: int | None = None) -> dict[str, Any]:
    spark = build_session(config)
    mode = mode_of(options.policy)
    started = time.time()
    # nothing is measured until every query is in: starting a query on a cold JVM takes seconds
    host = QueryHost(spark, config.workdir / "checkpoints", gate, mode.fixed_pool,
                     latency_horizon=1e9 if options.timeline else 60.0, measure_from=math.inf)
    try:
        for query in queries:
            host.add(query, options.weights.get(query.tenant, 1.0))
        ready = time.time()
        host.measure_from = ready + options.warmup
        if options.ready_file is not None:
            options.ready_file.write_text(f"{ready}\n")
        drained: dict[str, Any] = {}
        with host.lock:
            drain = realtime.drain_limit(options.drain, any(h.execution == "realTime" for h in host.queries.values()))
        while not options.stop.is_set() and host.broken is None:
            if options.duration is not None and time.time() - ready >= options.duration:
                over = time.time() - ready - options.duration
                read = all_read(host.statuses(), _sent(options.sent_file))
                if over >= drain or read:
                    drained = {"limit_s": drain, "took_s": round(over, 1), "all_read": read}
                    break
            options.stop.wait(options.tick)
            if options.on_tick:
                options.on_tick(host.statuses())
        statuses = host.statuses()
    finally:
        if host.broken is None:  # else there is no driver left to stop queries on
            host.stop_all()
    if host.broken is not None:
        raise RuntimeError(f"{host.broken}.")
    per_query: dict[str, dict[str, Any]] = {}
    lever = priority.decide(gate is not None, lane.on, priority.probe(), on_pods=False)
    report: dict[str, Any] = {"policy": options.policy, "seconds": round(time.time() - started, 1),
                              "started_at": started, "cores": os.cpu_count() or 1, "queries": per_query,
                              "spark": {"master": master, "urgent_lane": options.urgent_lane, "lane_on": lane.on,
                                        "bulk_tasks": lane.bulk_tasks,
                                        "priorities": lever.mechanism == "threadNice",
                                        "priority": lever.model_dump()},
                              "gate": options.gate if gate is not None else "none", "drain": drained,
                              "gate_capacity": capacity,
                              "critical_lane": CRITICAL_LANE if gate is not None else None}
    with host.lock:
        phases = {key: hosted.phase_quantiles() for key, hosted in host.queries.items()}
        work = {key: hosted.work_input() for key, hosted in host.queries.items()}
    for key, status in statuses.items():
        per_query[key] = {
            "p50_ms": status.p50_ms, "p99_ms": status.p99_ms, "max_ms": status.max_ms,
            "sla_ms": status.sla_ms, "attainment": status.attainment_total, "rows": status.rows,
            "output_rows": status.output_rows, "batches": status.batches, "phase": status.phase,
            "message": status.message, "bands": status.bands, "phases_ms": phases.get(key, {}),
            "critical_path": status.criticalPath, "bottleneck": status.bottleneck,
            "costs": None if status.costs is None else status.costs.model_dump(),
            "cold_ms": status.cold_ms,
            # the work fit's input (costs.fit says what it produced): [rows, driver s, task CPU s,
            # task run s, tasks, driver CPU s or null, bulk-turn wait s or null] of each recent batch
            # and each older one kept for its size
            "work_samples": {part: [[s.rows, round(s.driver, 6), round(s.cpu, 6), round(s.run, 6), s.tasks,
                                     None if s.driver_cpu is None else round(s.driver_cpu, 6),
                                     None if s.turn_wait is None else round(s.turn_wait, 6)]
                                    for s in samples]
                             for part, samples in zip(("recent", "kept"), work.get(key, ([], [])), strict=True)},
        }
        if options.timeline:
            hosted = host.queries[key]
            per_query[key]["timeline"] = [
                [round(b.committed - started, 3), b.rows, [round(x * 1000, 1) for x in b.latencies]]
                for b in hosted.window.batches
            ]
            # each recent batch's grant: [seconds on the report's clock, batch id, band, slack s, waited s]
            per_query[key]["grants"] = [
                [round(granted - started, 3), batch, hosted.band_log[batch], round(slack, 3), round(waited, 3)]
                for batch, (granted, slack, waited) in sorted(hosted.grant_log.items()) if batch in hosted.band_log
            ]
    return report


def stop_session() -> None:
    """Stop the active SparkSession (a new policy needs a fresh one: the scheduler mode is fixed)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def install_interrupt(stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM stop the run cleanly (every query is stopped, the report written)."""

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def live_table(statuses: dict[str, QueryStatus]) -> Any:
    from rich.table import Table

    table = Table(title="sluice run", expand=False)
    for column in ("query", "phase", "in rows/s", "p50 ms", "p99 ms", "SLA ms", "attainment", "batches", "scheduler"):
        table.add_column(column, justify="left" if column in ("query", "phase", "scheduler") else "right")
    for key, s in statuses.items():
        att = s.attainment
        late = s.p99_ms is not None and s.p99_ms > s.sla_ms
        p99 = "-" if s.p99_ms is None else f"[{'red' if late else 'green'}]{s.p99_ms:.0f}[/]"
        table.add_row(
            key, s.phase if not s.message else f"{s.phase}: {s.message[:60]}",
            f"{s.input_rate:.0f}", "-" if s.p50_ms is None else f"{s.p50_ms:.0f}", p99,
            f"{s.sla_ms:.0f}", "-" if att is None else f"{att:.1%}", str(s.batches), s.scheduler,
        )
    return table


def write_report(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
