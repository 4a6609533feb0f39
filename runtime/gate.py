"""The gate: asked before each micro-batch of every hosted query.

Queries writing to Spark's noop and Kafka sinks are asked by Sluice's JVM sink (`ask`, one py4j
call on the stream thread; `sluice.runtime.jvm_sink`); the others' sinks are wrapped in this
`foreachBatch` function (`run`).

Before the batch's action it asks the scheduler for a grant with cheap facts (rows expected from
the input rate, the oldest event from the previous batch), sets `spark.scheduler.pool` to the
granted band, runs the sink's write and notes when it completed (`sluice.runtime.measure`).
Everything else about the batch (its rows, its latency) arrives with its progress, off the batch
path. The batch's cost report goes to the scheduler when its progress arrives (the host's
listener), which frees its slot; one whose progress never came travels with the query's next ask.
A batch covered by an earlier
group grant (Drizzle) runs in that grant's band without asking.

A stateful batch may be delayed but never skipped: the gate always runs the action; on shutdown
or scheduler loss it fails open (runs at once in Spark's default pool) and says so.

The gate holds the host's lock only to read and write the query's state, never across the
scheduler's answer or a Spark call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from sluice.api.common import query_labels
from sluice.scheduler.bands import DEFAULT_BAND
from sluice.scheduler.core import Completion, Grant, covers
from sluice.scheduler.policies import BatchRequest, QuerySpec

from .batching import expected_rows, oldest_event
from .hosted import HostedQuery
from .measure import write
from .metrics import Metrics
from .policy import FairPool
from .spark_pools import POOL_PROPERTY
from .stages import job_description

log = logging.getLogger("sluice.runtime")


class Gatekeeper(Protocol):
    """The scheduler as the runtime sees it: the sidecar's client or the in-process core."""

    mode: str

    def register(self, spec: QuerySpec) -> bool: ...
    def unregister(self, key: str) -> bool: ...
    def dispatch(self, request: BatchRequest, completed: Sequence[Completion] = ()) -> Grant: ...
    def complete(self, query: str, completed: Sequence[Completion]) -> bool: ...


FixedPool = Callable[[QuerySpec], FairPool | None]
"""Ungated hosts: the FAIR pool a query's batches run in (None: Spark's default)."""


def with_progress(hosted: HostedQuery, done: Completion) -> Completion:
    """What the batch's progress taught since it ran: its input rows, its worst latency, and the
    C_path feedback (what followed the action on its critical path: Spark's offset commit)."""
    timeline = hosted.timelines.get(done.batch_id)
    if timeline is None or not timeline.durations_ms:
        return done
    tail = timeline.durations_ms.get("commitOffsets")
    return replace(done, rows=int(timeline.rows), latency=done.latency if timeline.latency is None else timeline.latency,
                   tail=done.tail if done.tail is not None or tail is None else tail / 1000)


class Gate:
    def __init__(self, spark: Any, scheduler: Gatekeeper | None, fixed_pool: FixedPool, metrics: Metrics,
                 lock: threading.Lock, clock: Callable[[], float]) -> None:
        self.spark = spark
        self.scheduler = scheduler
        self.fixed_pool = fixed_pool
        self.metrics = metrics
        self.lock = lock
        self.clock = clock
        self.before_stateful: list[Callable[[str, int], object]] = []
        """Called as a stateful query's batch asks, before its jobs (Megaphone's moves land then)."""

    def for_query(self, hosted: HostedQuery) -> Callable[[Any, int], None]:
        def gate(frame: Any, batch_id: int) -> None:
            self.run(hosted, frame, batch_id)

        return gate

    def _grant(self, hosted: HostedQuery, request: BatchRequest) -> tuple[Grant, float]:
        """Ask for a grant; returns it and the coordination time (asking minus queueing)."""
        key, batch_id = request.query, request.batch_id
        with self.lock:
            if self.scheduler is None or hosted.stopping:
                fixed = self.fixed_pool(hosted.spec)
                band = DEFAULT_BAND if fixed is None else fixed.name
                return Grant(key, batch_id, band, 1, 0.0, 0.0, 0.0, fail_open=self.scheduler is not None), 0.0
            group = hosted.group
            if group is not None and batch_id != group.batch_id and covers(group.batch_id, group.last, batch_id):
                hosted.grouped += 1  # covered by the group grant (Drizzle): no ask, same band
                return replace(group, batch_id=batch_id, waited=0.0), 0.0
            completed, hosted.completions = [with_progress(hosted, c) for c in hosted.completions], []
        started = time.perf_counter()
        grant = self.scheduler.dispatch(request, completed)
        asked = time.perf_counter() - started
        with self.lock:
            hosted.gate_mode = "fail-open" if grant.fail_open else "gated"
            hosted.group = grant if grant.k > 1 and not grant.fail_open else None
        return grant, max(asked - grant.waited, 0.0)

    def _admit(self, hosted: HostedQuery, batch_id: int) -> tuple[BatchRequest, Grant, float, str | None, float]:
        """Before a batch's action: ask for its grant and record it. Returns the request, the grant,
        the coordination time, the FAIR pool to run in (None: Spark's default) and when it entered."""
        entered = self.clock()
        if self.before_stateful and hosted.query.spec.stateful:
            for before in self.before_stateful:
                try:
                    before(hosted.query.key, batch_id)
                except Exception as error:  # py4j: never into the batch; the mover plans again
                    log.warning("state moves of %s before batch %d failed: %s", hosted.query.key, batch_id, error)
        with self.lock:
            request = BatchRequest(hosted.query.key, batch_id,
                                   expected_rows(hosted.input_rate, hosted.last_batch_started, entered),
                                   oldest_event(hosted.newest_input, hosted.last_newest))
        grant, coordination = self._grant(hosted, request)
        pool = None if (self.scheduler is None and self.fixed_pool(hosted.spec) is None) else grant.band
        with self.lock:
            hosted.last_batch_started = entered
            hosted.record_band(batch_id, grant.band, entered + grant.waited, grant.slack, grant.waited)
            timeline = hosted.timeline(batch_id)
            timeline.gate_wait, timeline.gate_ask = grant.waited, coordination
        self.metrics.gate_wait.labels(*query_labels(hosted.query.key)).set(grant.waited)
        return request, grant, coordination, pool, entered

    def ask(self, hosted: HostedQuery, batch_id: int) -> str | None:
        """The JVM sink's question before a batch's tasks (`sluice.runtime.jvm_sink`): wait for the
        grant and return the FAIR pool to run in. What `run` does after the write happens when the
        batch's progress arrives (`QueryHost.on_progress`, with `finish`)."""
        request, grant, coordination, pool, _ = self._admit(hosted, batch_id)
        if self.scheduler is not None and not grant.fail_open:
            with self.lock:
                hosted.asked[batch_id] = (request.rows, coordination)
        return pool

    def finish(self, hosted: HostedQuery, batch_id: int, action: float) -> None:
        """A batch the JVM sink wrote has reported (its progress): count it and free its slot with
        the next completion sent. Called by the host's listener, holding the lock."""
        asked = hosted.asked.pop(batch_id, None)
        for stale in [b for b in hosted.asked if b < batch_id]:
            del hosted.asked[stale]
        hosted.batches += 1
        if asked is not None:
            rows, coordination = asked
            hosted.completions.append(Completion(hosted.query.key, batch_id, action, rows, coordination=coordination))

    def run(self, hosted: HostedQuery, frame: Any, batch_id: int) -> None:
        query = hosted.query
        labels = query_labels(query.key)
        request, grant, coordination, pool, entered = self._admit(hosted, batch_id)
        sc = self.spark.sparkContext
        sc.setLocalProperty(POOL_PROPERTY, pool)
        sc.setJobDescription(job_description(query.key, batch_id))
        began = time.perf_counter()
        try:
            written = write(frame, query, batch_id, self.clock)
        finally:
            sc.setLocalProperty(POOL_PROPERTY, None)
            sc.setJobDescription(None)
        action = time.perf_counter() - began
        # each batch reports itself when its progress arrives, with its rows and latency from it
        # (`with_progress`; the host's listener), else with the next ask (a group's slot frees
        # with its last batch)
        done = Completion(query.key, batch_id, action, request.rows, coordination=coordination)
        with self.lock:
            hosted.keep_rows(written.collected)
            hosted.timeline(batch_id).committed = written.committed
            if hosted.last_newest is None:
                hosted.last_newest = entered
            hosted.batches += 1
            if self.scheduler is not None and not grant.fail_open:
                hosted.completions.append(done)
        self.metrics.batches.labels(*labels).inc()
        self.metrics.batch_seconds.labels(*labels).set(action)

    def flush(self, hosted: HostedQuery) -> None:
        """Send completions still held for the next ask (the query stops)."""
        if self.scheduler is None:
            return
        with self.lock:
            completed, hosted.completions = [with_progress(hosted, c) for c in hosted.completions], []
        if completed:
            self.scheduler.complete(hosted.query.key, completed)


class JvmGate:
    """The py4j side of the JVM sink's `dev.sluice.sink.Gate` for one query."""

    def __init__(self, gate: Gate, hosted: HostedQuery) -> None:
        self.gate, self.hosted = gate, hosted

    def ask(self, batch_id: int) -> str | None:
        try:
            return self.gate.ask(self.hosted, int(batch_id))
        except Exception as error:  # never into Spark's stream thread: run now, Spark's default pool
            log.warning("the gate of %s failed open: %s", self.hosted.query.key, error)
            return None

    class Java:
        implements = ["dev.sluice.sink.Gate"]
