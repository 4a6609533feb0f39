"""StreamingQuery spec -> Structured Streaming DataFrame, and the sink a batch is written to.

Every pipeline carries a hidden column `_sluice_ts`: the wall-clock time each row was produced.
It is where end-to-end latency is measured from:
- kafka: the record's timestamp (the producer's CreateTime);
- files: the column named by `source.eventTime`, else the time the batch was planned;
- rate: the source's own `timestamp` (Spark assigns it when the row is generated, in whole
  seconds, so latency carries up to one second of rounding);
- rate-micro-batch: the time the batch was planned (its own timestamps run on a synthetic clock,
  so latency then only covers planning to commit).
`select` steps keep it; an aggregation turns it into the time its output became due: the window's
end for windowed aggregations, the newest contributing row's time for plain groupBy.
Only expressions checked by the models (sluice.api.expressions) reach Spark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sluice.api.constants import GRID
from sluice.api.query import (
    Aggregation,
    FilesSink,
    FilesSource,
    KafkaSink,
    KafkaSource,
    RateMicroBatchSource,
    RateSource,
    StreamingQuery,
)

from .jvm_sink import DELEGATES
from .spark_pools import POOL_PROPERTY

TS = "_sluice_ts"
OBSERVED = "sluice"
"""The name of the observation every query's plan carries: its output rows and the GRID quantiles
of their production times, computed by Spark inside the sink's own job and reported in the
batch's progress (`observedMetrics`). Latency is measured from them, off the batch path."""


def spark_name(key: str) -> str:
    """The query's name in Spark (queryName, FAIR pool of the `fair` policy): one name per key.

    Letters and digits stay; every other byte of the key's UTF-8 becomes `_` and two hex digits
    (`/` is `_2f`, `-` is `_2d`, `_` itself `_5f`), so two keys never share a name.
    """
    return "".join(
        chr(b) if chr(b).isascii() and chr(b).isalnum() else f"_{b:02x}" for b in key.encode()
    )


@dataclass(frozen=True)
class Plan:
    """What the builder made of a spec."""

    frame: Any
    """The streaming DataFrame (observed, see OBSERVED)."""
    output_mode: str


def _source(spark: Any, query: StreamingQuery) -> Any:
    from pyspark.sql import functions as F

    source = query.spec.source
    if isinstance(source, RateSource):
        reader = spark.readStream.format("rate").option("rowsPerSecond", source.rowsPerSecond)
        if source.numPartitions:
            reader = reader.option("numPartitions", source.numPartitions)
        return reader.load().withColumn(TS, F.col("timestamp"))
    if isinstance(source, RateMicroBatchSource):
        reader = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", source.rowsPerBatch)
        if source.numPartitions:
            reader = reader.option("numPartitions", source.numPartitions)
        return reader.load().withColumn(TS, F.current_timestamp())
    if isinstance(source, FilesSource):
        reader = spark.readStream.format(source.format).schema(source.schema_)
        if source.format == "csv":
            reader = reader.option("header", "true")
        if source.maxFilesPerTrigger:
            reader = reader.option("maxFilesPerTrigger", source.maxFilesPerTrigger)
        frame = reader.load(source.path)
        ts = F.col(source.eventTime).cast("timestamp") if source.eventTime else F.current_timestamp()
        return frame.withColumn(TS, ts)
    if isinstance(source, KafkaSource):
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", source.bootstrapServers)
            .option("subscribe", source.topic)
            .option("startingOffsets", source.startingOffsets)
            .option("failOnDataLoss", str(source.failOnDataLoss).lower())
        )
        if source.maxOffsetsPerTrigger:
            reader = reader.option("maxOffsetsPerTrigger", source.maxOffsetsPerTrigger)
        if source.minPartitions:
            reader = reader.option("minPartitions", source.minPartitions)
        raw = reader.load()
        value = F.col("value").cast("string")
        if source.schema_:
            return raw.select(F.from_json(value, source.schema_).alias("v"), F.col("timestamp").alias(TS)).select("v.*", TS)
        return raw.select(F.col("key").cast("string").alias("key"), value.alias("value"), F.col("timestamp").alias(TS))
    raise ValueError(f"unsupported source type {source.type!r}")


def _aggregate(agg: Aggregation) -> Any:
    from pyspark.sql import functions as F

    if agg.column is None:  # only count may omit its column (checked by the model)
        column = F.count(F.lit(1))
    elif agg.fn == "count":
        column = F.count(F.col(agg.column))
    elif agg.fn == "approx_percentile" and agg.percentile is not None:
        column = F.percentile_approx(F.col(agg.column), agg.percentile)
    else:
        column = getattr(F, agg.fn)(F.col(agg.column))
    return column.alias(agg.output)


def build(spark: Any, query: StreamingQuery, measured: bool = True, keep_ts: bool = False) -> Plan:
    """The streaming DataFrame for a query's source and steps, without `_sluice_ts`.

    `measured`: observe the output rows' count and production-time quantiles (see OBSERVED);
    False gives the query as plain Spark would run it (the overhead benchmark's baseline)."""
    from pyspark.sql import functions as F

    frame, output_mode = steps(_source(spark, query), query)
    if measured:
        frame = frame.observe(
            OBSERVED,
            F.count(F.lit(1)).alias("n"),
            F.percentile_approx(F.col(TS).cast("double"), list(GRID), 1000).alias("q"),
        )
    return Plan(frame if keep_ts else frame.drop(TS), output_mode)


def steps(frame: Any, query: StreamingQuery) -> tuple[Any, str]:
    """The query's pipeline applied to `frame` (its source's columns and `_sluice_ts`), and the
    output mode it streams in."""
    from pyspark.sql import functions as F

    windowed = False
    keys: list[Any] = []
    for step in query.spec.pipeline:
        if step.filter is not None:
            frame = frame.filter(F.expr(step.filter))
        elif step.select is not None:
            items = [F.expr(item) for item in step.select]
            frame = frame.select(*items, F.col(TS))
        elif step.withColumn is not None:
            frame = frame.withColumn(step.withColumn.name, F.expr(step.withColumn.expr))
        elif step.watermark is not None:
            frame = frame.withWatermark(step.watermark.column, f"{step.watermark.delay.seconds} seconds")
        elif step.window is not None:
            w = step.window
            slide = f"{w.slide.seconds} seconds" if w.slide else None
            column = F.window(F.col(w.column), f"{w.size.seconds} seconds", slide)
            frame = frame.withColumn("window", column)
            windowed = True
        elif step.groupBy is not None:
            keys = [F.col(k) for k in step.groupBy]
        elif step.aggregate is not None:
            aggs = [_aggregate(a) for a in step.aggregate]
            due = F.max(F.col(TS)).alias(TS)
            frame = frame.groupBy(*keys).agg(*aggs, due)
            if windowed:
                frame = frame.withColumn(TS, F.col("window.end"))
    return frame, "append" if not query.spec.stateful or windowed else "update"


WARM_UP_ENV = "SLUICE_WARM_UP"
"""`0` turns the warm-up off (a measurement knob)."""
WARM_UP_ROWS = 2_000
"""Synthetic rows a stateful query's pipeline runs over once before its stream starts."""


def warm_up(spark: Any, query: StreamingQuery, pool: str | None = None, rows: int = WARM_UP_ROWS) -> None:
    """Run the query's steps once over `rows` synthetic rows of its source's columns (a static
    frame, written to noop), so its first micro-batch finds the aggregation's generated code
    compiled and its hot paths warm. On this machine a windowed aggregation with a percentile
    over 10,000 rows took 4.3 s cold and 0.6 s after one run; on a loaded JVM its first
    micro-batches took 13-25 s (the multi-tenant scenario). Data-dependent columns get simple
    values (ids, ids as strings, the last `rows` milliseconds as times); other types stay null.
    `pool`: the FAIR pool its job runs in (the calling thread's is restored after)."""
    frame, _ = steps(synthetic(spark, query, rows), query)
    sc = spark.sparkContext
    before = sc.getLocalProperty(POOL_PROPERTY)
    sc.setLocalProperty(POOL_PROPERTY, pool)
    try:
        frame.drop(TS).write.format("noop").mode("overwrite").save()
    finally:
        sc.setLocalProperty(POOL_PROPERTY, before)


def warm_shape(query: StreamingQuery) -> str:
    """What a warm-up depends on: the source's kind and columns, the steps (their literals
    included) and the shuffle partitions. Queries of one shape plan the same generated code, so
    one warm-up serves them all (a pool of many tenants' copies of one pipeline warms once)."""
    source = query.spec.source
    return json.dumps([source.type, getattr(source, "schema_", None), query.spec.resources.shufflePartitions,
                       [step.model_dump(mode="json", exclude_none=True) for step in query.spec.pipeline]],
                      sort_keys=True)


LITERAL = re.compile(r"'(?:[^']|'')*'|(?<![\w.])\d+(?:\.\d+)?")
"""A step's literals: SQL strings and numbers (not the digits of a name such as `col2`)."""


def cost_shape(query: StreamingQuery) -> str:
    """What a batch's cost depends on: `warm_shape` with the steps' literals left out. Tenants'
    copies of one pipeline differ in thresholds, keys and window sizes, which change the generated
    code but hardly the cost of a batch."""
    source = query.spec.source
    steps = json.dumps([step.model_dump(mode="json", exclude_none=True) for step in query.spec.pipeline], sort_keys=True)
    return json.dumps([source.type, getattr(source, "schema_", None), query.spec.resources.shufflePartitions,
                       LITERAL.sub("?", steps)])


def synthetic(spark: Any, query: StreamingQuery, rows: int) -> Any:
    """A static frame shaped like the query's source (its columns and `_sluice_ts`)."""
    from pyspark.sql import functions as F

    source = query.spec.source
    if isinstance(source, RateSource | RateMicroBatchSource):
        ddl = "timestamp TIMESTAMP, value BIGINT"
    elif isinstance(source, KafkaSource) and not source.schema_:
        ddl = "key STRING, value STRING"
    else:
        ddl = source.schema_ or ""
    now = F.expr(f"timestamp_millis(unix_millis(current_timestamp()) - {rows} + id)")
    columns = []
    for field in spark.createDataFrame([], ddl).schema.fields:
        kind = field.dataType.typeName()
        if kind == "string":
            value = F.col("id").cast("string")
        elif kind in ("long", "integer", "short", "byte", "double", "float", "decimal"):
            value = (F.col("id") % 1000).cast(field.dataType)
        elif kind == "timestamp":
            value = now
        elif kind == "boolean":
            value = F.col("id") % 2 == 0
        else:
            value = F.lit(None).cast(field.dataType)
        columns.append(value.alias(field.name))
    return spark.range(rows).select(*columns, now.alias(TS))


def write_batch(frame: Any, query: StreamingQuery, batch_id: int) -> None:
    """The sink's action for one micro-batch (inside foreachBatch).

    Files land in `<path>/batch_id=<id>/`, overwritten if Spark replays the batch after a crash,
    so a replay never duplicates rows (reading `<path>` gives a `batch_id` column).
    """

    sink = query.spec.sink
    if sink.type == "console":
        frame.show(sink.numRows, truncate=False)
    elif isinstance(sink, FilesSink):
        frame.write.mode("overwrite").format(sink.format).save(f"{sink.path}/batch_id={batch_id}")
    elif isinstance(sink, KafkaSink):
        kafka_records(frame).write.format("kafka").options(**kafka_options(sink)).save()
    elif sink.type == "memory":  # the host collects memory batches itself
        raise ValueError("memory batches are collected by the host")
    elif sink.type == "noop":
        frame.write.format("noop").mode("overwrite").save()
    else:  # pragma: no cover - the models admit no other type
        raise ValueError(f"unsupported sink type {sink.type!r}")


def kafka_records(frame: Any, keep_ts: bool = False) -> Any:
    """A Kafka sink's records: each row as one JSON `value`, in bytes (without `_sluice_ts`, kept
    after it as the last column when `keep_ts`)."""
    from pyspark.sql import functions as F

    value = F.to_json(F.struct(*[c for c in frame.columns if c != TS])).cast("binary").alias("value")
    return frame.select(value, F.col(TS)) if keep_ts else frame.select(value)


def kafka_options(sink: KafkaSink) -> dict[str, str]:
    return {"kafka.bootstrap.servers": sink.bootstrapServers, "topic": sink.topic}


def direct_sink(query: StreamingQuery) -> bool:
    """Can Sluice's JVM sink write this query (`sluice.runtime.jvm_sink`)? Spark's noop and Kafka
    sinks, yes; files (one directory per batch id), memory and console go through foreachBatch."""
    return query.spec.sink.type in DELEGATES


def direct_frame(frame: Any, query: StreamingQuery) -> tuple[Any, dict[str, str]]:
    """The frame the JVM sink writes (`_sluice_ts` last) and its delegate's options."""
    sink = query.spec.sink
    if isinstance(sink, KafkaSink):
        return kafka_records(frame, keep_ts=True), {"sluice.delegate": "kafka", **kafka_options(sink),
                                                    "sluice.delivery": sink.micro_batch_delivery}
    return frame.select(*[c for c in frame.columns if c != TS], TS), {"sluice.delegate": sink.type}
