"""`sluice simulate` and `sluice size`: their inputs (manifests, costs, rates) and their outputs.

The simulation itself is pure (`sluice.scheduler.simulate`); this module turns what a user has
into its queries, one sentence per problem:

- **manifests**, checked as `sluice validate` checks them (the CLI reads them);
- **costs** per query: from a recorded `sluice run --report` (each query's `costs`: fixed ms,
  per-row µs, commit ms, input rate), or declared in the rates file (`fixed`, `perRow`, `commit`);
- **rates** per query, in the benchmark scenario's load syntax (`rate`, `bursts`, `keys`,
  `trigger`), from a rates file (`queries: {namespace/name: {...}}`) or a scenario file (its
  manifests and loads together); else the recording's measured input rate, else the manifest's
  `spec.resources.expectedRate`, else a `rate` source's `rowsPerSecond`.

DS2's count is the operator's own (`autoscaler.decide`) on the same costs and rates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluice.api.query import RateSource, StreamingQuery
from sluice.api.scenario import Burst, LoadSpec, ScenarioError, load_scenario
from sluice.api.units import Duration
from sluice.api.wire import BatchCosts
from sluice.scheduler import intervals
from sluice.scheduler.simulate import SimQuery


class WhatIfError(ValueError):
    """Bad input: the message is one sentence naming the file or query and the fix."""


class DeclaredLoad(LoadSpec):
    """A query's load in the scenario syntax, and optionally its batch costs."""

    model_config = ConfigDict(extra="forbid")
    fixed: Duration | None = None
    """What a batch costs whatever its rows, e.g. 150ms."""
    perRow: float | None = Field(default=None, ge=0)
    """Seconds each input row adds to a batch, e.g. 2.0e-5."""
    commit: Duration | None = None
    """Offset commit after the batch's action, e.g. 30ms."""
    critical: bool = False
    """Latency-critical (as `spec.sla.critical`)."""


class RatesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    queries: dict[str, DeclaredLoad] = Field(min_length=1)
    """namespace/name -> its load (and costs)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """One query's costs from a `sluice run --report`."""

    fixed: float
    per_row: float
    commit: float
    rate: float
    p99: float | None = None
    """What the recorded run measured: p99 latency (s) and the share of rows within the SLA."""
    attainment: float | None = None
    work: tuple[float, float, float, int, float] | None = None
    """(driver s, task CPU s, task CPU s a row, tasks, run time to CPU): the batch as work on the cores, when the
    run recorded its stage times."""
    driver_cpu: float | None = None
    """Seconds of the driver's work on the CPU (the report's `driver_cpu_ms`; `--model cores-cpu`)."""
    cold: tuple[float, ...] = ()
    """Seconds its first batches with rows took (the report's `cold_ms`): a cold start."""
    lag: float = 0.0
    """Seconds after its production a row became readable (the report's `lag_ms`)."""
    spread: float = 1.0
    """How much its warm batches' costs varied beyond their rows (the report's `costs.spread`)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """The Spark setup a recording ran on, as the simulation's pool takes it."""

    cores: int
    gate: int | None = None
    """Batches its gate granted at once."""
    task_slots: int | None = None
    """Spark's task slots (`local[N]`'s N)."""
    driver_shares: bool = False
    """A local master: the driver shared the cores with the tasks."""
    other_cores: float = 0.0
    """Cores the rest of the machine kept busy while the recorded load ran (its broker, its load
    generator): `sluice bench cameo` measures them (`machine.other_cores` in the report)."""
    host_cores: float | None = None
    """A local-cluster master: the machine's cores, which its executor JVMs and driver share."""
    priority: bool = False
    """The urgent lane raised its urgent bands' thread priorities (on, with CAP_SYS_NICE)."""
    bulk_tasks: int | None = None
    """The urgent lane's bulk turns: tasks outside the urgent bands that ran at once, at most."""
    lane: int = 0
    """Gate slots its critical queries had beyond `gate` (`critical_lane`; 0 in recordings without one)."""
    busy: tuple[tuple[float, float], ...] = ()
    """The cores its JVMs' own threads (JIT compilers, collectors) took over the run: (from second
    of the load, cores) steps (`Pool.busy`), where the recording measured them (`machine.series`'s
    `jit` and `gc`, which `sluice bench cameo` reads locally and on the node target)."""
    turns_measured: bool = False
    """Its tasks' run times came without their waits for a bulk turn (the JVM sink measured them:
    a seventh figure in its work samples; older recordings lack it), so a batch's tasks ran at most
    `bulk_tasks` at once in them."""


def off_cpu(run_ratio: float, tasks: int, setup: Setup) -> float:
    """A task's seconds off the CPU per second of its CPU, from the recording's run time to CPU time
    (`--model cores-wait`). A batch alone on the recorded setup runs min(tasks, slots) task threads
    on its cores, so each task's run time is at least that over the cores times its CPU from
    sharing its own batch's cores; what the ratio holds beyond that the task spent off the CPU
    (state-store and shuffle writes, fetches) or lost to other processes, neither taking a core of
    the pool's. The recording's quieter batches give the ratio (`scheduler.costs.DRIVER_QUANTILE`).
    The slices lost to other processes are also in a recording's `other_cores`: with both (the
    default where a recording has them) that share is counted twice. Where the recording's run
    times are without the waits for a bulk turn, a batch ran at most `bulk_tasks` tasks at once
    (an urgent one, of few tasks, as many anyway)."""
    running = min(max(tasks, 1), setup.task_slots or setup.cores)
    if setup.turns_measured and setup.bulk_tasks is not None:
        running = min(running, setup.bulk_tasks)
    return max(run_ratio - max(1.0, running / setup.cores), 0.0)


def driver_on_cpu(query: SimQuery, cpu: float) -> SimQuery:
    """`query` with its driver's work split (`--model cores-cpu`): `cpu` seconds on the shared
    cores, the rest of its recorded driver time (offsets' and the commit's round trips, and what
    the recording's batches waited for a core) a wait without one."""
    if query.driver is None:
        return query
    on_cpu = min(cpu, query.driver)
    return replace(query, driver=on_cpu, driver_wait=query.driver - on_cpu)


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise WhatIfError(f"{path}: cannot be read ({error.strerror}); check the path.") from None
    except yaml.YAMLError as error:
        raise WhatIfError(f"{path}: is not valid YAML or JSON ({str(error).splitlines()[0]}).") from None


def read_rates(path: Path) -> dict[str, DeclaredLoad]:
    """A rates file: `queries: {namespace/name: {rate, bursts, keys, trigger, fixed, perRow, commit}}`."""
    try:
        return RatesFile.model_validate(_yaml(path)).queries
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise WhatIfError(f"{path}: {where}: {first['msg']}.") from None


def read_scenario(path: Path) -> tuple[list[StreamingQuery], dict[str, DeclaredLoad], tuple[float, float]]:
    """A benchmark scenario: its manifests, each query's load (critical as the scenario says),
    and its span (seconds run: warm-up plus duration; seconds of warm-up), as `sluice bench` runs it."""

    try:
        scenario, queries = load_scenario(path)
    except ScenarioError as error:
        raise WhatIfError(str(error)) from None
    loads = {q.key: DeclaredLoad(**s.load.model_dump(), critical=s.critical)
             for q, s in zip(queries, scenario.queries, strict=True)}
    return queries, loads, (scenario.duration.seconds + scenario.warmup.seconds, scenario.warmup.seconds)


def read_costs(path: Path, known: Sequence[str]) -> dict[str, Recorded]:
    """Each query's costs from a `sluice run --report` file."""
    raw = _yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("queries"), dict):
        raise WhatIfError(f"{path}: is not a `sluice run --report` file (no `queries` object); record one with "
                          "`sluice run -f ... --report FILE`.")
    out: dict[str, Recorded] = {}
    for key, entry in raw["queries"].items():
        if key not in known:
            raise WhatIfError(f"{path}: query {key} is in the costs but in no manifest given; pass its manifest "
                              "with -f or record the costs of these queries.")
        raw_costs = entry.get("costs") if isinstance(entry, dict) else None
        if raw_costs is None:
            continue  # fewer than 3 batches measured: the rates file may declare it
        try:
            costs = BatchCosts.model_validate(raw_costs)
        except ValidationError as error:
            raise WhatIfError(_costs_problem(path, key, error)) from None
        fixed, per_row, commit = costs.fixed_ms / 1000, costs.per_row_us / 1e6, costs.commit_ms / 1000
        rate = costs.input_rate
        work = None
        if costs.driver_ms is not None and costs.task_cpu_ms is not None and costs.task_cpu_per_row_us is not None:
            work = (costs.driver_ms / 1000, costs.task_cpu_ms / 1000, costs.task_cpu_per_row_us / 1e6, costs.tasks or 1,
                    costs.task_run_ratio or 1.0)
        out[key] = Recorded(fixed, per_row, commit, rate, _number(entry.get("p99_ms"), 1000),
                            _number(entry.get("attainment"), 1), work,
                            None if costs.driver_cpu_ms is None else costs.driver_cpu_ms / 1000,
                            _cold(path, key, entry.get("cold_ms", [])), costs.lag_ms / 1000, costs.spread or 1.0)
    return out


def _cold(path: Path, key: str, raw: Any) -> tuple[float, ...]:
    """A report's `cold_ms` (a list of milliseconds, zero or more) as seconds."""
    if not isinstance(raw, list) or not all(isinstance(x, int | float) and math.isfinite(x) and x >= 0 for x in raw):
        raise WhatIfError(f"{path}: queries.{key}.cold_ms must be a list of milliseconds, each zero or more (the "
                          "cost of the query's first batches); record it again with `sluice run --report` or remove it.")
    return tuple(float(x) / 1000 for x in raw)


def _costs_problem(path: Path, key: str, error: ValidationError) -> str:
    """One sentence for the first problem of a report's costs (`api.runtime.BatchCosts`, as `sluice run` writes them)."""
    first = error.errors()[0]
    where = f"{path}: queries.{key}.costs"
    if tuple(first["loc"]) == ("spread",):
        return (f"{where}.spread must be a number of at least 1 (a 90th percentile over a median); record the "
                "costs again with `sluice run --report` or remove it.")
    if first["type"] in ("greater_than_equal", "finite_number"):
        return (f"{where} has a negative or non-finite figure ({'.'.join(map(str, first['loc']))}); costs and rates "
                "are milliseconds, microseconds and rows per second, zero or more.")
    field = ".".join(map(str, first["loc"])) or "(the object)"
    return (f"{where}.{field}: {first['msg'].lower()}; record the costs again with `sluice run --report` (it "
            "writes fixed_ms, per_row_us, commit_ms and input_rate, each a number).")


_LOCAL = re.compile(r"local\[(\d+|\*)\]")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\d+,(\d+),\d+\]")


def recorded_setup(path: Path) -> Setup | None:
    """The recorded run's cores, gate and Spark master, if the report says (`sluice run --report`):
    a local master is one executor of the machine's cores; a local-cluster one has executors of
    its stated cores, all on the machine's cores (`host_cores`); a pool on the one-node Kubernetes
    (`sluice bench cameo --target node`: `spark.executor_cores`) the same, its executor pods' task
    slots and bulk turns as its runtime told them."""
    raw = _yaml(path)
    cores = raw.get("cores") if isinstance(raw, dict) else None
    if not isinstance(cores, int) or cores <= 0:
        return None
    gate = raw.get("gate_capacity")
    spark = raw.get("spark")
    master = spark.get("master") if isinstance(spark, dict) else None
    local = _LOCAL.fullmatch(master) if isinstance(master, str) else None
    slots = None if local is None else cores if local.group(1) == "*" else int(local.group(1))
    machine = raw.get("machine")
    other = machine.get("other_cores") if isinstance(machine, dict) else None
    other_cores = float(other) if isinstance(other, int | float) and math.isfinite(other) and other > 0 else 0.0
    cluster = _LOCAL_CLUSTER.fullmatch(master) if isinstance(master, str) else None
    raised = spark.get("priorities", spark.get("lane_on")) if isinstance(spark, dict) else None  # before "priorities": root here
    bulk = spark.get("bulk_tasks") if isinstance(spark, dict) else None
    lane = raw.get("critical_lane")
    per_executor = spark.get("executor_cores") if isinstance(spark, dict) else None
    told = spark.get("task_slots") if isinstance(spark, dict) else None
    each, host = cores, None
    if isinstance(per_executor, int) and per_executor > 0:  # executor pods on one node (`--target node`)
        each, host = per_executor, float(cores)
        slots = told if isinstance(told, int) and told > 0 else per_executor
    elif cluster is not None:
        each, host = int(cluster.group(1)), float(cores)
    return Setup(each, gate if isinstance(gate, int) and gate > 0 else None, slots, host is not None or local is not None,
                 other_cores, host, raised is True, bulk if isinstance(bulk, int) and bulk > 0 else None,
                 lane if isinstance(lane, int) and lane > 0 else 0,
                 jvm_busy(machine.get("series") if isinstance(machine, dict) else None), _turns_measured(raw))


BUSY_STEP_S = 10.0
"""Seconds each step of a recording's JVM cores spans at least: the node target lists the pool's
pods every 10 s, so a pod started between two listings is first read at the next, its CPU since
its start all in one read."""


def jvm_busy(series: Any) -> tuple[tuple[float, float], ...]:
    """A recording's JVMs' own cores over time (`machine.series`: `jit` and `gc`, each
    [seconds since the load started, CPU seconds since] at each read, summed over its JVMs) as
    steps of at least `BUSY_STEP_S`: from each, the cores the two together took until the next."""
    if not isinstance(series, dict):
        return ()
    kinds: list[dict[float, float]] = []
    for kind in ("jit", "gc"):
        points = series.get(kind)
        kinds.append({float(p[0]): float(p[1]) for p in (points if isinstance(points, list) else ())
                      if isinstance(p, list) and len(p) == 2 and all(isinstance(x, int | float) and math.isfinite(x)
                                                                      for x in p)})
    reads = [(t, sum(k[t] for k in kinds)) for t in sorted(set.intersection(*(set(k) for k in kinds)))]
    kept = [(0.0, 0.0)]
    for t, used in reads:
        if t - kept[-1][0] >= BUSY_STEP_S:
            kept.append((t, used))
    if reads and kept[-1] != reads[-1]:  # the last read: a short tail joins the step before it
        if len(kept) > 1 and reads[-1][0] - kept[-1][0] < BUSY_STEP_S:
            kept.pop()
        kept.append(reads[-1])
    return tuple((round(t, 3), round(max((later_used - used) / (later - t), 0.0), 4))
                 for (t, used), (later, later_used) in pairwise(kept) if later > t)


def _turns_measured(raw: dict[str, Any]) -> bool:
    """Whether any work sample of the report carries its tasks' waits for a bulk turn (a seventh
    figure, not null): its run times are then without them."""
    queries = raw.get("queries")
    for entry in queries.values() if isinstance(queries, dict) else ():
        samples = entry.get("work_samples") if isinstance(entry, dict) else None
        for part in samples.values() if isinstance(samples, dict) else ():
            if any(isinstance(s, list) and len(s) >= 7 and s[6] is not None for s in part if isinstance(part, list)):
                return True
    return False


def _number(value: Any, scale: float) -> float | None:
    return float(value) / scale if isinstance(value, int | float) and math.isfinite(value) else None


def sim_queries(queries: Sequence[StreamingQuery], loads: Mapping[str, DeclaredLoad],
                recorded: Mapping[str, Recorded]) -> list[SimQuery]:
    """The simulation's queries; one sentence for the first one that lacks a rate or costs."""
    keys = {q.key for q in queries}
    for key in loads:
        if key not in keys:
            raise WhatIfError(f"the rates name {key}, which is in no manifest given; pass its manifest with -f or "
                              "remove it.")
    out = []
    for query in queries:
        key, spec = query.key, query.spec
        load, found = loads.get(key), recorded.get(key)
        generated = spec.source.rowsPerSecond if isinstance(spec.source, RateSource) else None
        rate = load.rate if load else found.rate if found else spec.resources.expectedRate or generated
        if rate is None:
            raise WhatIfError(f"query {key} has no input rate: give it in --rates (queries.{key}.rate), record it "
                              "with --costs, or set spec.resources.expectedRate.")
        fixed = load.fixed.seconds if load and load.fixed is not None else found.fixed if found else None
        per_row = load.perRow if load and load.perRow is not None else found.per_row if found else None
        if fixed is None or per_row is None:
            raise WhatIfError(f"query {key} has no batch costs: record them with `sluice run --report FILE` and pass "
                              f"--costs FILE, or declare queries.{key}.fixed and perRow in --rates.")
        commit = (load.commit.seconds if load and load.commit is not None else found.commit if found
                  else intervals.COMMIT_PRIOR)
        window = next((s.window for s in spec.pipeline if s.window is not None), None)
        mark = next((s.watermark for s in spec.pipeline if s.watermark is not None), None)
        trigger = (load.trigger.seconds if load and load.trigger is not None
                   else spec.trigger.interval.seconds if spec.trigger is not None else None)
        declared = load is not None and (load.fixed is not None or load.perRow is not None)
        work = found.work if found is not None and not declared else None
        out.append(SimQuery(
            key, query.tenant, spec.sla.latencyTarget.seconds, rate, fixed, per_row, commit,
            tuple(Burst(b.at.seconds, b.length.seconds, b.factor) for b in (load.bursts if load else [])),
            critical=spec.sla.critical or (load.critical if load else False), trigger=trigger,
            window=window.size.seconds if window else None, delay=mark.delay.seconds if mark else 0.0,
            keys=load.keys if load else 100))
        if found is not None and not declared and found.cold:  # the recorded run's first batches
            out[-1] = replace(out[-1], cold=found.cold)
        if found is not None and found.lag > 0:  # the recorded source's wait for its rows to be readable
            out[-1] = replace(out[-1], lag=found.lag)
        if found is not None and not declared and found.spread > 1:  # the recorded batches' variation
            out[-1] = replace(out[-1], spread=found.spread)
        if work is not None:  # the recorded run's work on the cores: the simulation shares them
            out[-1] = replace(out[-1], driver=work[0], task_fixed=work[1] * work[4], task_per_row=work[2] * work[4],
                              tasks=work[3])
    return out
