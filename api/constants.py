"""Sluice's constants, each written once: the API group, the policies, the band count, the ports.

Everything else (CLI choices, builders, the Spark session, the scheduler core, the chart's
defaults) imports them from here.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ApiVersion = Literal["sluice.dev/v1alpha1"]
"""The resources' apiVersion, as a type for the models' `apiVersion` field."""
API_VERSION: Final[ApiVersion] = get_args(ApiVersion)[0]
GROUP, VERSION = API_VERSION.split("/")
POOLS: Final = "streamingpools"
QUERIES: Final = "streamingqueries"

Policy = Literal["fifo", "fair", "edf", "cameo"]
"""The policies a pool may run; what each means for the runtime is defined once, in
`sluice.runtime.policy`."""
POLICIES: Final[tuple[Policy, ...]] = get_args(Policy)
GATED_POLICIES: Final[tuple[Policy, ...]] = ("edf", "cameo")
"""Policies whose batches wait at the gate for the scheduler's grant."""
DEFAULT_POLICY: Final[Policy] = "cameo"
URGENT_LANE_CHOICES: Final[tuple[str, ...]] = ("gated", "all", "none")
"""Who gets the urgent lane in `sluice run --urgent-lane` and the benchmarks: gated policies (the
product's choice), every policy (a benchmark's like-for-like setup), or none."""
PriorityMechanism = Literal["threadNice", "bulkNice", "podWeight", "none"]
"""The CPU priority lever in force for a pool's urgent work (`sluice.runtime.priority` says what
each means and how the runtime finds which the node allows)."""
GATES: Final[tuple[str, ...]] = ("inprocess", "sidecar")
"""Where `sluice run`'s gate asks (`--gate`): the scheduler in the runtime's process, or a
scheduler sidecar process over HTTP on loopback, as in a pool pod."""

BANDS: Final = 8
"""FAIR priority bands (pools band0..band7) written into fairscheduler.xml."""
CRITICAL_LANE: Final = 1
"""Gate slots beyond a pool's capacity, per registered latency-critical query
(`spec.sla.critical`), that only critical queries' batches take (`Scheduler.lane`): a query has
one batch in flight at most, so a critical batch never waits at a full gate, for a bulk batch to
end or for another critical one, as its tasks never wait for a bulk task's slot (the FAIR bands)."""
RUNTIME_CAPACITY: Final = 4
"""Batches the in-process scheduler grants at once in a pool runtime started by the tests and the
density benchmark (`sluice.testing.runtime_process`, `sluice bench density --capacity`)."""

CONTROL_PORT: Final = 8480
"""The pool runtime's control API (and its /metrics, /healthz); in a pool pod only the operator reaches it."""
METRICS_PORT: Final = 8481
"""A pool pod's /metrics and /healthz alone, open to the operator, to Prometheus (the pods of
`METRICS_FROM_NAMESPACES`) and to the kubelet's probe."""
METRICS_FROM_NAMESPACES: Final[tuple[str, ...]] = ("monitoring",)
"""The namespaces whose pods may scrape the operator's and the pools' metrics ports unless the
chart says others (`networkPolicy.metricsFromNamespaces`, `SLUICE_METRICS_FROM`)."""
OPERATOR_POD_LABEL: Final = ("sluice.dev/role", "operator")
"""The label on the operator's pods (the chart sets it): a pool's NetworkPolicy lets these reach its control API."""
SCHEDULER_PORT: Final = 8470
"""The scheduler sidecar, inside the pool pod."""
OPERATOR_METRICS_PORT: Final = 8080
"""The operator's /metrics and /healthz."""
OPERATOR_HEALTH_PORT: Final = 8081
"""kopf's liveness endpoint in the operator (the chart's liveness probe)."""
DRIVER_PORT: Final = 7078
BLOCK_MANAGER_PORT: Final = 7079
LOCALITY_WAIT: Final = "0s"
"""A pool's `spark.locality.wait`: a task launches on the first free slot. Spark's default waits
up to 3 s for the executor a Kafka partition's consumer was cached on, a wait a 1 s SLA cannot
afford (a local master has one executor, so it never shows there). `runtime/locality.py` raises
it while state moves. `local-cluster` keeps Spark's 3 s: with 0 s there the executor warm-up
job's tasks ran elsewhere and state moves waited on it (measured)."""

WARMUP_CONF: Final = "spark.sluice.warmup.maxSeconds"
"""The Spark setting a pool's `spec.executor.warmup` becomes: how long a joining executor may be
kept off urgent work while it warms up (`Warmup.MAX_SECONDS` in the sink jar; 0: off)."""
EXECUTOR_WARMUP: Final = "60s"
"""A pool's default `spec.executor.warmup` (docs/performance.md, "Joins under load")."""
START_WARMUP_CONF: Final = "spark.sluice.startWarmup.seconds"
"""The Spark setting a pool's `spec.startWarmup` becomes: how long the runtime runs its synthetic
queries before it serves (`runtime/start_warmup.py`; 0 or unset: not at all)."""
START_WARMUP: Final = "45s"
"""A pool's default `spec.startWarmup`: about as long as a cold pool's JIT compilers took most of
its CPU under load (docs/performance.md, "Warm at start")."""

ExecutorJit = Literal["tiered", "c1", "low"]
"""A pool's executor JVMs' JIT compilers (`spec.executor.jit`; the JVM options:
`runtime.session.EXECUTOR_JIT_OPTIONS`): HotSpot's default tiered compilers, C1 alone, or the
default compilers at the bulk tasks' lower priority."""
EXECUTOR_JITS: Final[tuple[ExecutorJit, ...]] = get_args(ExecutorJit)
EXECUTOR_JIT: Final[ExecutorJit] = "tiered"
"""The default (docs/performance.md, "JVM start")."""
EXECUTOR_JIT_CONF: Final = "spark.sluice.executor.jit"
"""The Spark setting a pool's `spec.executor.jit` becomes."""
URGENT_RESERVE_CONF: Final = "spark.sluice.urgentReserve"
"""The Spark setting a pool's `spec.executor.urgentReserve` becomes (`UrgentLane.URGENT_RESERVE`
in the sink jar): bulk turns an executor holds back while urgent tasks run in it, where its
threads have no priorities."""
URGENT_RESERVE: Final = 0
"""A pool's default `spec.executor.urgentReserve`: off, as it costs bulk queries their SLAs
(docs/performance.md, "A bulk turn held back")."""

BULK_TASKS_CONF: Final = "spark.sluice.executor.bulkTasks"
"""The Spark setting a pool's `spec.executor.bulkTasks` becomes (set only where given): bulk tasks
at once in each executor under a gated pool's urgent lane, in place of its cores
(`runtime.session.executor_lane`)."""
BULK_TASKS_PER_CORE: Final = 4
"""At most this many bulk turns a core of an executor: half its lane's slots (8 a core,
`runtime.session.LANE_SLOTS_PER_CORE`), so urgent tasks still find slots free beside them."""

ASYNC_PROGRESS_CONF: Final = "spark.sluice.asyncProgress.intervalMs"
"""The Spark setting for Spark's async progress tracking on the queries that allow it (stateless,
written by Sluice's JVM sink to noop or to Kafka at least once, `runtime/streams.py`): each such
query writes its offset and commit logs on a thread of its own, durably once every this many
milliseconds instead of twice a batch; a restart replays up to that much. 0: off."""
ASYNC_PROGRESS_MS: Final = 0
"""Its default (off until a measurement shows it pays: docs/performance.md)."""

RUNTIME_IMAGE = "ghcr.io/sluice-dev/sluice-runtime:0.1.0"
"""The runtime image a pool without `spec.image` uses unless the operator is told another
(`SLUICE_RUNTIME_IMAGE`, the chart's `runtimeImage`). Nothing publishes it: build it from
`images/runtime.Dockerfile` and push it where the cluster pulls from."""

GRID: Final[tuple[float, ...]] = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
"""The quantiles at which a batch's latencies are kept (the runtime's sink, its JVM sink and the
simulator all use this grid)."""


def _masses(grid: tuple[float, ...]) -> tuple[float, ...]:
    """Probability mass each grid point stands for (half the gap to each neighbour)."""
    out = []
    for i, q in enumerate(grid):
        lo = (q + grid[i - 1]) / 2 if i > 0 else 0.0
        hi = (q + grid[i + 1]) / 2 if i + 1 < len(grid) else 1.0
        out.append(hi - lo)
    return tuple(out)


MASSES: Final[tuple[float, ...]] = _masses(GRID)
"""The weight of each GRID point when batches' latencies are merged."""
