"""The StreamingQuery custom resource: one tenant's streaming query with a latency SLA."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from .common import CommonStatus, DnsName, Model, ObjectMeta
from .constants import API_VERSION, ApiVersion
from .expressions import (
    MAX_LENGTH,
    check_expression,
    check_predicate,
    check_select_item,
    output_name,
    referenced_columns,
    schema_columns,
)
from .units import Duration, PositiveDuration

Predicate = Annotated[str, Field(max_length=MAX_LENGTH), AfterValidator(check_predicate)]
ValueExpr = Annotated[str, Field(max_length=MAX_LENGTH), AfterValidator(check_expression)]
SelectItem = Annotated[str, Field(max_length=MAX_LENGTH), AfterValidator(check_select_item)]
ColumnName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


# ---------------------------------------------------------------- sources


class RateSource(Model):
    """Spark's `rate` source: rows per second with a synthetic timestamp (ticks in whole seconds)."""

    type: Literal["rate"]
    rowsPerSecond: int = Field(default=100, gt=0, le=10_000_000)
    """Rows generated per second."""
    numPartitions: int | None = Field(default=None, gt=0, le=4096)
    """Partitions of the generated data."""


class RateMicroBatchSource(Model):
    """Spark's `rate-micro-batch` source: a fixed number of rows per batch on a synthetic clock."""

    type: Literal["rate-micro-batch"]
    rowsPerBatch: int = Field(default=100, gt=0, le=10_000_000)
    """Rows per micro-batch."""
    numPartitions: int | None = Field(default=None, gt=0, le=4096)
    """Partitions of the generated data."""


class FilesSource(Model):
    """A directory of JSON, CSV or Parquet files; new files are picked up as they appear."""

    type: Literal["files"]
    format: Literal["json", "csv", "parquet"]
    """File format."""
    path: str = Field(min_length=1)
    """Directory to watch."""
    schema_: str = Field(alias="schema", min_length=1)
    """Row schema as a Spark DDL string, e.g. 'ts TIMESTAMP, user STRING, amount DOUBLE'."""
    maxFilesPerTrigger: int | None = Field(default=None, gt=0, le=1_000_000)
    """At most this many new files per micro-batch."""
    eventTime: ColumnName | None = None
    """Timestamp column holding each row's production time (latency is measured from it)."""


class KafkaSource(Model):
    """A Kafka topic; each record's value is JSON parsed with `schema`, its timestamp kept as `kafka_ts`."""

    type: Literal["kafka"]
    bootstrapServers: str = Field(min_length=1)
    """Comma-separated host:port list."""
    topic: str = Field(min_length=1)
    """Topic to read."""
    schema_: str | None = Field(default=None, alias="schema")
    """Schema of the JSON value as a Spark DDL string; omitted: the value is kept as a string."""
    startingOffsets: Literal["earliest", "latest"] = "latest"
    """Where a new query starts reading."""
    maxOffsetsPerTrigger: int | None = Field(default=None, gt=0, le=10**12)
    """At most this many records per micro-batch."""
    minPartitions: int | None = Field(default=None, gt=0, le=4096)
    """Split each batch's read into at least this many tasks: shorter tasks let priority bands act sooner."""
    failOnDataLoss: bool = False
    """Fail the query when offsets were aged out of the topic before they were read."""


Source = Annotated[
    RateSource | RateMicroBatchSource | FilesSource | KafkaSource, Field(discriminator="type")
]

# ---------------------------------------------------------------- sinks


class ConsoleSink(Model):
    """Print each batch to the runtime's log."""

    type: Literal["console"]
    numRows: int = Field(default=20, gt=0, le=10_000)
    """Rows printed per batch."""


class FilesSink(Model):
    """Append each batch to a directory of files."""

    type: Literal["files"]
    format: Literal["json", "csv", "parquet"] = "parquet"
    """File format."""
    path: str = Field(min_length=1)
    """Output directory."""


Delivery = Literal["atLeastOnce", "exactlyOnce"]


class KafkaSink(Model):
    """Write each row as a JSON record to a Kafka topic."""

    type: Literal["kafka"]
    bootstrapServers: str = Field(min_length=1)
    """Comma-separated host:port list."""
    topic: str = Field(min_length=1)
    """Topic to write."""
    delivery: Delivery | None = None
    """exactlyOnce: each micro-batch's rows are written in Kafka transactions, and a consumer with
    isolation.level=read_committed sees every row once through task retries, replayed batches and
    killed executors; atLeastOnce: Spark's own Kafka writer, where a replayed batch writes its rows
    again. Omitted: exactlyOnce for micro-batches; Real-time Mode writes at least once."""

    @property
    def micro_batch_delivery(self) -> Delivery:
        """How its micro-batches are written: the field, or exactlyOnce when it is omitted."""
        return self.delivery or "exactlyOnce"


class MemorySink(Model):
    """Keep results in an in-memory table named after the query (tests, demos)."""

    type: Literal["memory"]


class NoopSink(Model):
    """Run the batch and discard its output (benchmarks)."""

    type: Literal["noop"]


Sink = Annotated[
    ConsoleSink | FilesSink | KafkaSink | MemorySink | NoopSink, Field(discriminator="type")
]

# ---------------------------------------------------------------- pipeline


class WithColumn(Model):
    """Add or replace a column."""

    name: ColumnName
    """Column name."""
    expr: ValueExpr
    """Row-local Spark SQL expression."""


class Watermark(Model):
    """Declare an event-time column and how late its data may arrive."""

    column: ColumnName
    """Event-time column (a timestamp)."""
    delay: Duration
    """How late data may arrive before it is dropped, e.g. '10s'."""


class Window(Model):
    """Assign rows to event-time windows: tumbling (no slide) or sliding; adds the column `window`."""

    column: ColumnName
    """Event-time column the windows are cut on; it must carry a watermark."""
    size: PositiveDuration
    """Window length, e.g. '10s'."""
    slide: PositiveDuration | None = None
    """Slide for sliding windows; omitted: tumbling."""

    @model_validator(mode="after")
    def _slide_fits(self) -> Window:
        if self.slide is not None and self.slide.seconds > self.size.seconds:
            raise ValueError(
                f"slide '{self.slide}' is longer than size '{self.size}'; make slide at most size"
            )
        return self


AggregateFn = Literal["count", "sum", "avg", "min", "max", "approx_percentile"]


class Aggregation(Model):
    """One aggregate of a group."""

    model_config = Model.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [  # the API server's copy of _column_fits
                {"rule": "self.fn == 'count' || has(self.column)", "message": "every fn but count needs a 'column' to aggregate"},
                {"rule": "self.fn != 'approx_percentile' || has(self.percentile)",
                 "message": "approx_percentile needs 'percentile', e.g. 0.99"},
                {"rule": "self.fn == 'approx_percentile' || !has(self.percentile)",
                 "message": "'percentile' only applies to approx_percentile"},
            ]
        }
    }

    fn: AggregateFn
    """Aggregate function."""
    column: ColumnName | None = None
    """Input column (not needed for count)."""
    name: ColumnName | None = None
    """Output column; default fn_column."""
    percentile: float | None = Field(default=None, gt=0, lt=1)
    """For approx_percentile: the percentile in (0, 1)."""

    @model_validator(mode="after")
    def _column_fits(self) -> Aggregation:
        if self.fn != "count" and self.column is None:
            raise ValueError(f"{self.fn} needs a 'column' to aggregate")
        if self.fn == "approx_percentile" and self.percentile is None:
            raise ValueError("approx_percentile needs 'percentile', e.g. 0.99")
        if self.fn != "approx_percentile" and self.percentile is not None:
            raise ValueError(f"'percentile' only applies to approx_percentile, not {self.fn}")
        return self

    @property
    def output(self) -> str:
        return self.name or (f"{self.fn}_{self.column}" if self.column else self.fn)


_STEP_KINDS = ("filter", "select", "withColumn", "watermark", "window", "groupBy", "aggregate")


class Step(Model):
    """One pipeline step: exactly one of its fields is set."""

    model_config = Model.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in _STEP_KINDS) + " == 1",
                    "message": "a pipeline step sets exactly one of " + ", ".join(_STEP_KINDS),
                }
            ]
        }
    }

    filter: Predicate | None = None
    """Keep rows for which this boolean Spark SQL expression holds."""
    select: list[SelectItem] | None = Field(default=None, min_length=1, max_length=256)
    """Keep these expressions (each may end in `AS name`)."""
    withColumn: WithColumn | None = None
    """Add or replace one column."""
    watermark: Watermark | None = None
    """Declare event time and allowed lateness."""
    window: Window | None = None
    """Cut event-time windows (needs a watermark on the same column before it)."""
    groupBy: list[ColumnName] | None = Field(default=None, min_length=1, max_length=32)
    """Group keys (include `window` after a window step); an aggregate step must follow."""
    aggregate: list[Aggregation] | None = Field(default=None, min_length=1, max_length=64)
    """Aggregates of the group; must follow a groupBy step."""

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(
                "a pipeline step is a mapping with one key, e.g. {filter: \"x > 0\"}"
            )
        set_keys = [k for k in _STEP_KINDS if data.get(k) is not None]
        if len(set_keys) > 1:
            raise ValueError(
                f"a step sets exactly one of {', '.join(_STEP_KINDS)}; this one sets "
                f"{' and '.join(set_keys)}: split it into separate steps"
            )
        if not set_keys and not (set(data) - set(_STEP_KINDS)):
            raise ValueError(f"a step is empty; set one of {', '.join(_STEP_KINDS)}")
        return data

    @property
    def kind(self) -> str:
        return next(k for k in _STEP_KINDS if getattr(self, k) is not None)


# ---------------------------------------------------------------- spec


class Sla(Model):
    """The latency objective of the query."""

    latencyTarget: PositiveDuration
    """End-to-end latency target (event production to sink commit), e.g. '500ms' or '2s'."""
    percentile: float = Field(default=99, gt=0, le=100)
    """Percentile of events the target applies to."""
    critical: bool = False
    """A latency-critical query: sizing (`sluice size`, the operator's SLA-aware sizing) keeps 99%
    of its rows within the target, and 95% of any other query's."""


class Trigger(Model):
    """When micro-batches start (set it only to override the interval Sluice picks from the SLA)."""

    interval: Duration = Duration.parse("0s")
    """Processing-time trigger interval; 0s starts the next batch as soon as one ends."""


class Resources(Model):
    """Hints for sizing; the autoscaler refines them from measured rates."""

    shufflePartitions: int = Field(default=4, gt=0, le=4096)
    """spark.sql.shuffle.partitions for this query (state partitions; frozen in its checkpoint)."""
    expectedRate: float | None = Field(default=None, gt=0)
    """Expected input rate in rows per second."""
    cores: float | None = Field(default=None, gt=0)
    """Expected cores needed at the expected rate."""


Execution = Literal["auto", "microBatch", "realTime"]
REALTIME_STEPS = ("filter", "select", "withColumn")
"""Pipeline steps Spark's Real-time Mode runs (stateless); the others need micro-batches."""


def realtime_problem(source: str, sink: str, steps: list[str], delivery: str | None = None) -> str | None:
    """Why Spark's Real-time Mode cannot run this query (None: it can)."""
    if source != "kafka":
        return f"the source is {source}, and Real-time Mode reads Kafka only"
    if sink != "kafka":
        return f"the sink is {sink}, and Real-time Mode writes Kafka only here"
    if delivery == "exactlyOnce":
        return "the sink's delivery is exactlyOnce, and Real-time Mode writes at least once"
    stateful = sorted({s for s in steps if s not in REALTIME_STEPS})
    if stateful:
        return f"the pipeline has {', '.join(stateful)} steps, and Real-time Mode runs stateless pipelines only"
    return None


class StreamingQuerySpec(Model):
    """What to run and how fast it must be."""

    model_config = Model.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {"rule": "!has(self.execution) || self.execution != 'realTime' || (self.source.type == 'kafka' && "
                         "self.sink.type == 'kafka' && self.pipeline.all(s, " + " && ".join(
                             f"!has(s.{k})" for k in ("watermark", "window", "groupBy", "aggregate")) + "))",
                 "message": "execution realTime needs a Kafka source, a Kafka sink and a stateless pipeline "
                            "(filter, select, withColumn); use microBatch or auto"},
                {"rule": "!has(self.execution) || self.execution != 'realTime' || !has(self.sink.delivery) || "
                         "self.sink.delivery != 'exactlyOnce'",
                 "message": "execution realTime writes Kafka at least once; set sink.delivery to atLeastOnce or "
                            "use execution microBatch"},
            ]
        }
    }

    pool: DnsName
    """Name of the StreamingPool to run on."""
    source: Source
    """Where rows come from."""
    pipeline: list[Step] = Field(min_length=1, max_length=64)
    """Declarative steps, applied in order."""
    sink: Sink
    """Where results go."""
    sla: Sla
    """Latency objective."""
    trigger: Trigger | None = None
    """Micro-batch trigger. Omitted: the runtime picks the interval from the SLA and the measured
    batch costs (the largest whose worst case stays within the SLA) and adapts it."""
    resources: Resources = Field(default_factory=Resources)
    """Sizing hints."""
    suspend: bool = False
    """Stop the query (its checkpoint is kept) until set back to false."""
    execution: Execution = "auto"
    """microBatch, realTime (Spark's Real-time Mode: a stateless Kafka-to-Kafka query, rows
    processed as they arrive), or auto: Real-time Mode when the query can run in it and its SLA
    is below what micro-batches can keep, or when it is critical and its micro-batches would cost
    the pool more cores than its Real-time reservation holds; else micro-batches."""

    @model_validator(mode="after")
    def _pipeline_is_coherent(self) -> StreamingQuerySpec:
        check_pipeline(self.pipeline)
        check_columns(source_columns(self.source), self.pipeline)
        if self.execution == "realTime":
            problem = self.realtime_problem()
            if problem is not None:
                raise ValueError(f"execution is realTime but {problem}; use microBatch or auto")
        return self

    def realtime_problem(self) -> str | None:
        """Why Spark's Real-time Mode cannot run this query (None: it can)."""
        delivery = self.sink.delivery if isinstance(self.sink, KafkaSink) else None
        return realtime_problem(self.source.type, self.sink.type, [s.kind for s in self.pipeline], delivery)

    @property
    def stateful(self) -> bool:
        return any(s.groupBy is not None for s in self.pipeline)


class PipelineError(ValueError):
    """A pipeline whose steps do not fit together; carries the offending step's index."""

    def __init__(self, index: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.kind = kind


def check_pipeline(steps: list[Step]) -> None:
    """Check that steps fit together the way Structured Streaming can run them."""
    watermarked: set[str] = set()
    windowed = False
    aggregated = False
    for i, step in enumerate(steps):
        kind = step.kind
        prev = steps[i - 1].kind if i > 0 else None
        nxt = steps[i + 1].kind if i + 1 < len(steps) else None
        if aggregated and kind in ("watermark", "window", "groupBy"):
            raise PipelineError(
                i, kind, f"a {kind} step after the aggregation is not supported; move it before the groupBy"
            )
        if step.watermark is not None:
            watermarked.add(step.watermark.column)
        elif step.window is not None:
            if step.window.column not in watermarked:
                raise PipelineError(
                    i, "window",
                    f"column '{step.window.column}' has no watermark; add a watermark step on "
                    f"'{step.window.column}' before the window",
                )
            if windowed:
                raise PipelineError(i, "window", "a pipeline may have one window step; remove the second")
            windowed = True
        elif step.groupBy is not None:
            if nxt != "aggregate":
                raise PipelineError(i, "groupBy", "a groupBy step must be followed by an aggregate step")
            if windowed and "window" not in step.groupBy:
                raise PipelineError(
                    i, "groupBy",
                    "after a window step the group keys must include 'window'; add it to groupBy",
                )
        elif step.aggregate is not None:
            if prev != "groupBy":
                raise PipelineError(
                    i, "aggregate",
                    "an aggregation needs a groupBy step right before it naming its keys",
                )
            aggregated = True
    if windowed and not aggregated:
        raise PipelineError(
            next(i for i, s in enumerate(steps) if s.window is not None), "window",
            "a window step must be followed by groupBy (with 'window') and aggregate",
        )


TIMESTAMP_COLUMN = "_sluice_ts"
"""The column each source adds with the row's production time (the runtime's latency measure)."""


def source_columns(source: Source) -> set[str]:
    """The columns a source's rows carry, lower-cased as Spark matches them."""
    def ddl(schema: str, example: str) -> list[str]:
        names = schema_columns(schema)
        if names is None:
            raise PipelineError(-1, "source", f"schema '{schema[:80]}' is not a Spark DDL schema such as '{example}'")
        return names

    if isinstance(source, RateSource | RateMicroBatchSource):
        names = ["timestamp", "value"]
    elif isinstance(source, FilesSource):
        names = ddl(source.schema_, "ts TIMESTAMP, user STRING")
    elif source.schema_ is not None:
        names = ddl(source.schema_, "key STRING, amount DOUBLE")
    else:
        names = ["key", "value"]
    return {*names, TIMESTAMP_COLUMN}


SHOWN_COLUMNS = 12  # an error lists at most this many of the columns a step could read


def check_columns(known: set[str] | None, steps: list[Step]) -> None:
    """Every column a step names exists in the rows it reads (while those columns are known:
    an unaliased computed select item ends the check, since Spark names it itself)."""
    def need(i: int, kind: str, columns: set[str]) -> None:
        if known is None:
            return
        missing = sorted(columns - known)
        if missing:
            have = sorted(c for c in known if c != TIMESTAMP_COLUMN)
            listed = ", ".join(short(c) for c in have[:SHOWN_COLUMNS])
            more = f" and {len(have) - SHOWN_COLUMNS} more" if len(have) > SHOWN_COLUMNS else ""
            raise PipelineError(i, kind, f"column '{short(missing[0])}' does not exist here; the rows have "
                                         f"{listed}{more}")

    def short(name: str) -> str:
        return name if len(name) <= 40 else name[:40] + "..."

    for i, step in enumerate(steps):
        if known is None:
            return
        if step.filter is not None:
            need(i, "filter", referenced_columns(step.filter))
        elif step.select is not None:
            for item in step.select:
                need(i, "select", referenced_columns(item))
            outputs = [output_name(item) for item in step.select]
            known = None if None in outputs else {*(o for o in outputs if o), TIMESTAMP_COLUMN}
        elif step.withColumn is not None:
            need(i, "withColumn", referenced_columns(step.withColumn.expr))
            known.add(step.withColumn.name.lower())
        elif step.watermark is not None:
            need(i, "watermark", {step.watermark.column.lower()})
        elif step.window is not None:
            need(i, "window", {step.window.column.lower()})
            known.add("window")
        elif step.groupBy is not None:
            need(i, "groupBy", {c.lower() for c in step.groupBy})
        elif step.aggregate is not None:
            need(i, "aggregate", {a.column.lower() for a in step.aggregate if a.column})
            keys = steps[i - 1].groupBy or []
            known = {*(k.lower() for k in keys), *(a.output.lower() for a in step.aggregate), TIMESTAMP_COLUMN}


class StreamingQueryStatus(CommonStatus):
    """Observed state of a StreamingQuery."""

    batchIntervalMs: float | None = None
    """The micro-batch interval in force."""
    batchIntervalReason: str = ""
    """Why that interval, in one sentence (spec.trigger, or the SLA and the measured costs)."""
    execution: str = ""
    """microBatch or realTime: how the query runs (spec.execution, or chosen from its SLA)."""
    executionReason: str = ""
    """Why that mode, in one sentence."""
    reservedSlots: int = 0
    """Task slots a Real-time query holds while it runs, out of its pool's capacity."""

    batches: int | None = None
    """Micro-batches committed since the query started."""
    rows: int | None = None
    """Rows processed since the query started."""
    schedulerMode: str = ""
    """'gated' when the Cameo scheduler orders batches; 'fail-open' when it is unreachable."""
    kafkaLag: int | None = None
    """Kafka sources: rows behind the topics' latest offsets (at the last batch)."""
    producerRate: float | None = None
    """Kafka sources: rows per second the producers append to the topics."""


class StreamingQuery(Model):
    """A tenant's streaming query with a latency SLA; the namespace is the tenant."""

    apiVersion: ApiVersion = API_VERSION
    kind: Literal["StreamingQuery"] = "StreamingQuery"
    metadata: ObjectMeta
    spec: StreamingQuerySpec
    status: StreamingQueryStatus | None = None

    @property
    def tenant(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def key(self) -> str:
        """Unique name of the query inside a pool: tenant/name."""
        return f"{self.tenant}/{self.metadata.name}"
