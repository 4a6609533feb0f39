"""Starting a hosted query's stream on Spark: its files confined, its shape warmed, its writer built.

Called by the host's lifecycle thread only (`QueryHost._start`); nothing here keeps query state.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from sluice.api.common import shown
from sluice.api.constants import ASYNC_PROGRESS_CONF, BANDS, GRID
from sluice.api.files import FilesOutsideRoot, confine_query, tenant_root
from sluice.api.query import FilesSink, FilesSource, KafkaSink, NoopSink, StreamingQuery
from sluice.scheduler.bands import band_name

from . import jvm_sink, realtime
from .gate import Gate, JvmGate
from .hosted import HostedQuery
from .pipeline import build, direct_frame, direct_sink, spark_name, warm_shape, warm_up
from .policy import FairPool
from .session import async_progress_ms
from .spark_calls import one_line
from .spark_pools import ensure_pool
from .stages import job_description

log = logging.getLogger("sluice.runtime")


def confine(query: StreamingQuery, files_root: str | None) -> tuple[StreamingQuery, str | None]:
    """The query with its `files` paths under `<files_root>/<namespace>`, and why it is refused
    (None: it is not). Symbolic links along a path must not lead out of the tenant's root either."""
    if files_root is None:
        return query, None
    try:
        query = confine_query(query, files_root)
        for part in (query.spec.source, query.spec.sink):
            if isinstance(part, FilesSource | FilesSink):
                _confine_real(part.path, query.tenant, files_root)
    except FilesOutsideRoot as refused:
        return query, str(refused)
    return query, None


def _confine_real(path: str, namespace: str, root: str) -> None:
    own = os.path.realpath(tenant_root(root, namespace))
    real = os.path.realpath(path)
    if real != own and not real.startswith(own + os.sep):
        raise FilesOutsideRoot(f"'{shown(path)}' leads through a symbolic link to {shown(real)}, outside the files "
                               f"root of namespace '{namespace}'; write a path under it")


class Warmer:
    """Runs a stateful query's steps once on synthetic rows before its stream first starts
    (`pipeline.warm_up`): its first micro-batches then skip the JVM's cold start. One warm-up
    serves every query of its shape (`warm_shape`)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._warmed: set[str] = set()

    def warm(self, spark: Any, query: StreamingQuery, gated: bool) -> None:
        if not self.enabled or not query.spec.stateful or (shape := warm_shape(query)) in self._warmed:
            return
        self._warmed.add(shape)
        started = time.monotonic()
        # gated: in the least urgent band, so that bulk turns pace it behind running batches
        pool = band_name(BANDS - 1) if gated else None
        try:
            warm_up(spark, query, pool)
            log.info("query %s warmed up in %.1f s", query.key, time.monotonic() - started)
        except Exception as error:  # best effort: the stream's own start reports real errors
            log.info("query %s: warm-up skipped (%s)", query.key, one_line(error))


def micro_batch_stream(spark: Any, hosted: HostedQuery, gate: Gate, gates: Any | None, fixed: FairPool | None,
                       direct: bool, checkpoint: str, interval: float) -> Any:
    """Start a micro-batch query's stream: Sluice's JVM sink asks the gate inside Spark's own write
    for noop and Kafka sinks, `foreachBatch` does for the others. `interval` 0: back to back."""
    query = hosted.query
    if fixed is not None:  # before its first batch names it (else Spark makes it at weight 1)
        ensure_pool(spark, fixed.name, fixed.weight, fair_inside=True)
    spark.conf.set("spark.sql.shuffle.partitions", str(query.spec.resources.shufflePartitions))
    if direct and direct_sink(query):  # Spark writes it; the JVM sink asks the gate
        plan = build(spark, query, measured=False, keep_ts=True)
        frame, options = direct_frame(plan.frame, query)
        options |= {"sluice.query": query.key, "sluice.grid": ",".join(str(1 - q) for q in GRID),
                    "sluice.description": job_description(query.key)}
        if fixed is not None:
            options["sluice.pool"] = fixed.name
        if gates is not None:
            gates.register(query.key, JvmGate(gate, hosted))
        options |= async_progress(query, async_interval_ms(spark))
        writer = frame.writeStream.format(jvm_sink.PROVIDER).options(**options)
    else:
        sink = query.spec.sink
        if isinstance(sink, KafkaSink) and sink.delivery == "exactlyOnce":
            raise ValueError("sink.delivery is exactlyOnce, but this runtime writes through foreachBatch (no Sluice "
                             "JVM sink: it needs a JDK and Maven, or SLUICE_SINK_JAR); set it to atLeastOnce")
        plan = build(spark, query)
        writer = plan.frame.writeStream.foreachBatch(gate.for_query(hosted))
    writer = writer.queryName(spark_name(query.key)).outputMode(plan.output_mode).option("checkpointLocation", checkpoint)
    if interval > 0:
        writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
    return writer.start()


ASYNC_SINK_CHECK = "_asyncProgressTrackingOverrideSinkSupportCheck"
"""Spark internal: the query option that lets async progress tracking run on a sink Spark does not
list by name (it lists its own noop, console, memory and Kafka sinks; Sluice's JVM sink delegates to
the noop and Kafka ones under a name of its own). `tests/spark/test_streams.py` fails if it moves."""


def async_progress(query: StreamingQuery, interval_ms: int) -> dict[str, str]:
    """The query options that turn on Spark's async progress tracking (offset and commit logs written
    on a thread of their own, durably every `interval_ms`), for a query where that is safe: stateless
    (Spark refuses it on state) and written to noop or to Kafka at least once, where replaying up to
    `interval_ms` of batches after a restart is within the delivery asked for. Else none."""
    sink = query.spec.sink
    at_least_once = isinstance(sink, NoopSink) or (isinstance(sink, KafkaSink)
                                                   and sink.micro_batch_delivery == "atLeastOnce")
    if interval_ms <= 0 or query.spec.stateful or not at_least_once:
        return {}
    return {"asyncProgressTrackingEnabled": "true", "asyncProgressTrackingCheckpointIntervalMs": str(interval_ms),
            ASYNC_SINK_CHECK: "true"}


def async_interval_ms(spark: Any) -> int:
    """`ASYNC_PROGRESS_CONF` from the session (`session.async_progress_ms`)."""
    return async_progress_ms(spark.conf.get(ASYNC_PROGRESS_CONF, None))


def realtime_stream(spark: Any, query: StreamingQuery, checkpoint: str) -> Any:
    """Start a query in Spark's Real-time Mode (its Kafka writer, `sluice.runtime.realtime`)."""
    plan = build(spark, query, measured=False, keep_ts=True)
    return realtime.writer(plan.frame, query, checkpoint).queryName(spark_name(query.key)).start()
