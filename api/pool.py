"""The StreamingPool custom resource: one shared Spark runtime that hosts many tenants' queries."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue, model_validator

from .common import CommonStatus, DnsName, Model, ObjectMeta
from .constants import (
    API_VERSION,
    BULK_TASKS_PER_CORE,
    CRITICAL_LANE,
    EXECUTOR_JIT,
    EXECUTOR_WARMUP,
    START_WARMUP,
    URGENT_RESERVE,
    ApiVersion,
    ExecutorJit,
    Policy,
    PriorityMechanism,
)
from .files import DEFAULT_FILES_ROOT
from .units import Cpu, Duration, Memory, PositiveDuration

MEMORY_MIN, MEMORY_MAX = Memory.parse("512Mi"), Memory.parse("1Ti")
"""Spark refuses a JVM under ~450 MiB (its reserved 300 MiB x 1.5); above 1 TiB a heap is a typo."""


def _memory_bounds(value: Memory) -> Memory:
    if not MEMORY_MIN.bytes <= value.bytes <= MEMORY_MAX.bytes:
        raise ValueError(f"'{value.text}' is outside {MEMORY_MIN.text}..{MEMORY_MAX.text}; give a size such as '2Gi'")
    return value


BoundedMemory = Annotated[Memory, AfterValidator(_memory_bounds)]
_MEMORY_RULE: JsonValue = {"rule": f"quantity(self.memory).compareTo(quantity('{MEMORY_MIN.text}')) >= 0 && "
                        f"quantity(self.memory).compareTo(quantity('{MEMORY_MAX.text}')) <= 0",
                "message": f"memory must lie within {MEMORY_MIN.text}..{MEMORY_MAX.text}"}


def _at_most(longest: str, example: str) -> AfterValidator:
    """A duration's bound, refused in one sentence."""
    bound = Duration.parse(longest)

    def check(value: Duration) -> Duration:
        if value.seconds > bound.seconds:
            raise ValueError(f"'{value.text}' is longer than {longest}; give a duration of at most {longest}, "
                             f"such as '{example}'")
        return value

    return AfterValidator(check)


WarmupDuration = Annotated[Duration, _at_most("5m", "30s")]


_BULK_TASKS_RULE: JsonValue = {"rule": f"!has(self.bulkTasks) || self.bulkTasks <= {BULK_TASKS_PER_CORE} * self.cores",
                               "message": f"bulkTasks must be at most {BULK_TASKS_PER_CORE} x cores"}


class ExecutorShape(Model):
    """Size of one Spark executor pod."""

    model_config = Model.model_config | {"json_schema_extra": {"x-kubernetes-validations": [_MEMORY_RULE, _BULK_TASKS_RULE]}}

    cores: int = Field(default=1, ge=1, le=64)
    """Cores per executor: its task slots, or with a gated pool's urgent lane its bulk tasks at
    once (the lane gives each executor 8 slots a core, so urgent tasks find one free)."""
    memory: BoundedMemory = Memory.parse("1Gi")
    """Executor memory, e.g. '2Gi' (512Mi to 1Ti)."""
    cpuRequest: Cpu | None = None
    """CPU the executor pod requests from the scheduler, e.g. '500m'; omitted: `cores`. Lower it
    to pack executors on small nodes (Spark still runs `cores` tasks at once in each)."""
    warmup: WarmupDuration = Duration.parse(EXECUTOR_WARMUP)
    """Warm before work (gated policies): an executor that joins the running pool takes no urgent
    band's task for up to this long, until the bulk bands' tasks have warmed its JVM (16 tasks and
    its compilers quiet); at most 5m, '0s': off. On a 2-core node under load a join then cost the
    1 s filter under a point in the 30 s after it, against a 5-6 s stall on the cold JVM without
    (docs/performance.md, "Joins under load")."""
    urgentReserve: int = Field(default=URGENT_RESERVE, ge=0, le=63)
    """Gated policies on nodes that give threads no priorities (pods have no CAP_SYS_NICE): while
    urgent tasks run in an executor, and for a second after, its bulk tasks take this many turns
    fewer (never fewer than one), so a critical query's next batch finds a core no new bulk task
    took. 0 (the default): off. Bulk queries lose up to that many cores of each executor while
    critical queries run: on a 2-core node a 1 s filter kept 98.6% of rows against 87.7%, and its
    neighbour's 30 s aggregation 85.7% against 100% (docs/performance.md, "A bulk turn held back")."""
    bulkTasks: int | None = Field(default=None, ge=1, le=63)
    """Gated policies: bulk tasks that run at once in each executor (the urgent lane's turns);
    omitted: `cores`. Where threads get no priorities (pods without CAP_SYS_NICE) a turn-holding
    task shares its executor's CPU evenly with the compilers and the urgent tasks beside it, so
    more turns give bulk queries more of it and urgent ones less. On a 2-core node at twice
    two-tenants' load its 30 s aggregation kept 87.5% of rows at 4 against 73.8% at 2, one run each,
    and cameo's SLA capacity did not rise (docs/performance.md, "Bulk turns on pods"). Each
    executor keeps 8 slots a core, so urgent tasks still find one free; at most 4 a core."""
    jit: ExecutorJit = EXECUTOR_JIT
    """The executor JVMs' JIT compilers: `tiered` (HotSpot's default: C1, then C2 for hot code),
    `c1` (C1 alone: a new executor compiles for less CPU, and runs hot loops slower) or `low` (the
    default compilers below the task threads' priority, no privilege needed)."""

    @model_validator(mode="after")
    def _turns(self) -> ExecutorShape:
        if self.bulkTasks is not None and self.bulkTasks > BULK_TASKS_PER_CORE * self.cores:
            raise ValueError(f"bulkTasks {self.bulkTasks} is more than {BULK_TASKS_PER_CORE} x cores "
                             f"({BULK_TASKS_PER_CORE * self.cores}); give at most that, or more cores")
        return self


class DriverShape(Model):
    """Size of the driver pod (runtime + scheduler sidecar)."""

    model_config = Model.model_config | {"json_schema_extra": {"x-kubernetes-validations": [_MEMORY_RULE]}}

    cores: int = Field(default=1, ge=1, le=64)
    """Driver cores."""
    memory: BoundedMemory = Memory.parse("2Gi")
    """Driver memory, e.g. '2Gi' (512Mi to 1Ti)."""
    cpuRequest: Cpu | None = None
    """CPU the driver pod's runtime container requests, e.g. '500m'; omitted: `cores`."""


class Checkpoints(Model):
    """Where the pool's queries keep their checkpoints (offsets, commits, state): a volume that
    outlives the driver pod, so a restarted driver resumes every query where it stopped."""

    model_config = Model.model_config | {
        "json_schema_extra": {"x-kubernetes-validations": [
            {"rule": "!(has(self.claimName) && has(self.hostPath))",
             "message": "set one of checkpoints.claimName and checkpoints.hostPath, not both"}]}
    }

    claimName: DnsName | None = None
    """A PersistentVolumeClaim in the operator's namespace (ReadWriteOnce is enough: one driver
    pod mounts it). The choice for real clusters."""
    hostPath: str | None = Field(default=None, pattern=r"^/.*")
    """A directory on the node, writable by uid 185 (single-node and development clusters only:
    a driver rescheduled to another node finds none of its checkpoints)."""

    @model_validator(mode="after")
    def _one(self) -> Checkpoints:
        if self.claimName is not None and self.hostPath is not None:
            raise ValueError("set one of checkpoints.claimName and checkpoints.hostPath, not both")
        return self

    def volume(self) -> dict[str, object]:
        """The pod volume: the claim, the host directory, or (neither) an emptyDir lost with the pod."""
        if self.claimName is not None:
            return {"persistentVolumeClaim": {"claimName": self.claimName}}
        if self.hostPath is not None:
            return {"hostPath": {"path": self.hostPath, "type": "DirectoryOrCreate"}}
        return {"emptyDir": {}}


class Quota(Model):
    """Limits for one tenant namespace on this pool."""

    maxQueries: int | None = Field(default=None, ge=0, le=100_000)
    """At most this many queries from the namespace; omitted: unlimited."""
    weight: float = Field(default=1.0, gt=0)
    """The tenant's weight: under `fair` its queries share one Spark FAIR pool of this weight
    (relative to other tenants'). Reaches a query when it is next registered (created, updated,
    or the operator restarts)."""


AutoscalingMode = Literal["apply", "recommend", "off"]
_AT_MOST_A_DAY = _at_most("24h", "5m")
DayDuration = Annotated[Duration, _AT_MOST_A_DAY]
PositiveDayDuration = Annotated[PositiveDuration, _AT_MOST_A_DAY]


def _day_rule(field: str, optional: bool = False) -> JsonValue:
    check = f"duration(self.{field}) <= duration('24h')"
    if optional:  # omitted is fine; given, it must be above zero too
        check = f"!has(self.{field}) || (duration(self.{field}) > duration('0s') && {check})"
    return {"rule": check, "message": f"autoscaling.{field} must be at most 24h" + (" and above zero" if optional else "")}


class Autoscaling(Model):
    """How DS2 sizes the pool's executors (when `executors` is not fixed)."""

    model_config = Model.model_config | {
        "json_schema_extra": {"x-kubernetes-validations": [
            _day_rule("stabilizationWindow"), _day_rule("scaleDownDelay"), _day_rule("catchUp", optional=True)]}
    }

    mode: AutoscalingMode = "apply"
    """apply: DS2 sets the executor target. recommend: status shows what DS2 would do
    (`status.autoscaling.recommendation`) and nothing changes. off: no sizing at all."""
    utilization: float = Field(default=0.7, gt=0, le=1)
    """The busy share of the executors' cores DS2 sizes for (the rest is headroom that keeps
    micro-batches short enough for the SLAs)."""
    slaSizing: bool = True
    """Raise DS2's count to the fewest executors whose simulated schedule (the pool's measured
    costs, its policy) keeps every query's SLA; false: DS2's count alone."""
    stabilizationWindow: DayDuration = Duration.parse("1m")
    """After a change, no other change for this long: the runtime's measurements of the
    transition (executors starting, state reloading) are not the new size's."""
    scaleDownDelay: DayDuration = Duration.parse("5m")
    """The demand must want fewer executors for this long before the pool shrinks, and it
    shrinks to the most it wanted over that time (a dip does not shrink it)."""
    maxScaleDownFactor: float = Field(default=0.5, gt=0, le=1)
    """A shrink removes at most this share of the executors in one step (and at least one)."""
    catchUp: PositiveDayDuration | None = None
    """Time to drain a Kafka query's lag in: the target rate is the producer rate plus lag /
    catchUp. Omitted: 10x each query's latency target, at least 30 s and at most 10 min."""
    effectivenessThreshold: float = Field(default=0.1, ge=0, le=1)
    """A scale-up that raised throughput by less than this share of what it should have, while
    the pool was behind, is ineffective: it is recorded, and DS2 stops growing the pool past it
    until the spec changes or the pool shrinks."""


_MIN_EXECUTORS, _MAX_EXECUTORS = 1, 4
MAX_EXECUTORS = 10_000
"""The most executors a pool may name (a bound the API server can check: JSON integers beyond int64 are not)."""
_MIN = f"(has(self.minExecutors) ? self.minExecutors : {_MIN_EXECUTORS})"
_MAX = f"(has(self.maxExecutors) ? self.maxExecutors : {_MAX_EXECUTORS})"


class StreamingPoolSpec(Model):
    """A shared Spark runtime and its rules of admission."""

    # the same bounds as `_bounds` below, for the apiserver (`kubectl scale` too)
    model_config = Model.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {"rule": f"{_MIN} <= {_MAX}", "message": "minExecutors must be at most maxExecutors"},
                {"rule": f"!has(self.executors) || ({_MIN} <= self.executors && self.executors <= {_MAX})",
                 "message": "executors must lie within minExecutors..maxExecutors (default 1..4); "
                            "scale within them or change the bounds"},
            ]
        }
    }

    image: str | None = Field(default=None, min_length=1)
    """Container image of the runtime (Spark driver + executors) and scheduler sidecar; omitted:
    the operator's runtime image (the chart's `runtimeImage`)."""
    imagePullSecrets: list[DnsName] = Field(default_factory=list, max_length=16)
    """Secrets (in the operator's namespace) for pulling the image, for the driver and executors."""
    executor: ExecutorShape = Field(default_factory=ExecutorShape)
    """Executor pod shape."""
    driver: DriverShape = Field(default_factory=DriverShape)
    """Driver pod shape."""
    startWarmup: WarmupDuration = Duration.parse(START_WARMUP)
    """Warm at start: before the runtime serves (the pool Pending meanwhile), it runs a synthetic
    critical filter and windowed aggregation on its first executor for this long, so the first
    tenants' batches do not meet cold JVMs; at most 5m, '0s': off."""
    minExecutors: int = Field(default=_MIN_EXECUTORS, ge=0, le=MAX_EXECUTORS)
    """Fewest executors the autoscaler keeps."""
    maxExecutors: int = Field(default=_MAX_EXECUTORS, ge=1, le=MAX_EXECUTORS)
    """Most executors the autoscaler may request."""
    executors: int | None = Field(default=None, ge=0, le=MAX_EXECUTORS)
    """Fixed executor count (set by `kubectl scale`); omitted: DS2 chooses within min..max."""
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)
    """DS2's settings: mode, utilization, stabilization, scale-down delay and step, catch-up time."""
    checkpoints: Checkpoints = Field(default_factory=Checkpoints)
    """Checkpoint volume; omitted: an emptyDir, so a restarted driver pod starts every query
    afresh from its `startingOffsets` (set `claimName` to keep them)."""
    policy: Policy = "cameo"
    """Dispatch order across queries: fifo, fair (weighted per tenant), edf or cameo."""
    criticalLane: int = Field(default=CRITICAL_LANE, ge=0, le=64)
    """Gate slots beyond the pool's capacity per latency-critical query (`spec.sla.critical`) that
    only critical queries' batches take: a critical batch never waits at a full gate. 0: none."""
    filesRoot: str = Field(default=DEFAULT_FILES_ROOT, min_length=2, max_length=1024,
                           pattern=r"^(/[A-Za-z0-9_][A-Za-z0-9._-]*)+$")
    """Absolute directory under which each namespace's `files` sources and sinks live, in
    `<filesRoot>/<namespace>`: a query's relative path lies there, and a path outside it is refused."""
    allowedNamespaces: list[DnsName] = Field(default_factory=list, max_length=256)
    """Namespaces whose queries may use the pool; empty: every namespace."""
    quotas: dict[DnsName, Quota] = Field(default_factory=dict, max_length=256)
    """Per-namespace limits, keyed by namespace."""

    @model_validator(mode="after")
    def _bounds(self) -> StreamingPoolSpec:
        if self.minExecutors > self.maxExecutors:
            raise ValueError(
                f"minExecutors ({self.minExecutors}) is above maxExecutors ({self.maxExecutors}); "
                "make minExecutors at most maxExecutors"
            )
        if self.executors is not None and not (
            self.minExecutors <= self.executors <= self.maxExecutors
        ):
            raise ValueError(
                f"executors ({self.executors}) is outside minExecutors..maxExecutors "
                f"({self.minExecutors}..{self.maxExecutors})"
            )
        return self

    def admits(self, namespace: str) -> bool:
        return not self.allowedNamespaces or namespace in self.allowedNamespaces


class Recommendation(Model):
    """What DS2 would set, whether or not it was applied."""

    executors: int = 0
    """Executors DS2 recommends."""
    reason: str = ""
    """Why, in a sentence."""
    time: str = ""
    """RFC 3339 time of the recommendation."""
    microBatchSlots: int = 0
    """Task slots the micro-batch queries need at the pool's utilization (what a Real-time
    query's reservation must leave them)."""
    bound: str = ""
    """Which bound decided: rates (DS2: the work the input rates make) or slas (the simulated
    schedule needs more executors to keep every SLA)."""
    slaExecutors: int | None = None
    """The executors the simulated schedule keeps every SLA at (absent: not simulated, or not
    kept even at maxExecutors)."""


class ScaleUp(Model):
    """A scale-up awaiting its effectiveness check (after the stabilization window)."""

    time: str = ""
    fromExecutors: int = 0
    toExecutors: int = 0
    throughput: float = 0.0
    """Rows per second the pool's queries read before it."""
    targetRate: float = 0.0
    """Rows per second they had to read (producer rates plus lag to drain)."""
    queries: list[str] = Field(default_factory=list)
    """The queries then reading: the check compares these only (one started later is not a gain)."""


class IneffectiveScaling(Model):
    """A scale-up that added (almost) no throughput while the pool was behind."""

    time: str = ""
    fromExecutors: int = 0
    toExecutors: int = 0
    expectedRate: float = 0.0
    """Rows per second the pool should have gained."""
    observedRate: float = 0.0
    """Rows per second it gained."""
    generation: int = 0
    """The pool's generation then: a spec change clears the record."""


class AutoscalingStatus(Model):
    """DS2's memory between decisions, and what it recommends."""

    mode: str = ""
    """The mode in force."""
    recommendation: Recommendation | None = None
    """What DS2 would set now (in every mode but off)."""
    lagRows: int | None = None
    """Rows the pool's Kafka queries are behind their topics, summed."""
    scaleDownSince: str = ""
    """Since when (RFC 3339) the demand has wanted fewer executors than the pool has."""
    scaleDownTo: int = 0
    """The most executors the demand wanted since then (what a shrink goes down to)."""
    pendingScaleUp: ScaleUp | None = None
    """The last scale-up, until its effectiveness is checked."""
    ineffectiveScaling: IneffectiveScaling | None = None
    """A scale-up that did not help; DS2 does not grow past it."""
    slaSizingMs: int | None = None
    """Milliseconds the last sync's SLA-aware sizing took (`slaSizing`: simulations in a worker
    thread; near 0 when the measurements had not moved since an earlier sync)."""


class StateMigration(Model):
    """Where stateful queries' state partitions run, and the moves that spread them (Megaphone)."""

    placement: dict[str, int] = Field(default_factory=dict)
    """State partitions per executor id, over all stateful queries."""
    pendingMoves: int = 0
    """Moves still needed before state is balanced (and off executors being removed)."""
    moves: int = 0
    """Partitions moved since the runtime started."""
    movedBytes: int = 0


class PoolPriority(Model):
    """The CPU priority lever in force for the pool's urgent work, as the runtime found it."""

    mechanism: PriorityMechanism
    """threadNice: urgent tasks' threads at nice -5; bulkNice: bulk tasks' threads at nice 4 while
    they run; podWeight: only the pods' CPU requests weigh the pool against other pods; none."""
    reason: str = ""
    """Why this one, in one sentence (what the node allows: its RLIMIT_NICE, CAP_SYS_NICE)."""


class StreamingPoolStatus(CommonStatus):
    """Observed state of a StreamingPool."""

    queries: int = 0
    """Queries hosted now."""
    policy: str = ""
    """Policy in force."""
    selector: str = ""
    """Label selector of the pool's executor pods (the scale subresource's, for HPA and KEDA)."""
    autoscaling: AutoscalingStatus | None = None
    """DS2's recommendation, lag and anti-flap memory."""
    reservedSlots: int = 0
    """Task slots the pool's Real-time queries hold while they run (out of maxExecutors x cores)."""
    state: StateMigration | None = None
    """State placement and migration progress (pools with executors and stateful queries)."""
    urgentLane: str = ""
    """What the urgent lane does in the pool's runtime, in one sentence: on pods, bulk turns in
    each executor, and which thread priorities the node allows."""
    priority: PoolPriority | None = None
    """The CPU priority lever in force and why (found by trying what the node allows)."""


class StreamingPool(Model):
    """A shared Spark runtime (cluster-scoped) that hosts many tenants' streaming queries."""

    apiVersion: ApiVersion = API_VERSION
    kind: Literal["StreamingPool"] = "StreamingPool"
    metadata: ObjectMeta
    spec: StreamingPoolSpec
    status: StreamingPoolStatus | None = None
