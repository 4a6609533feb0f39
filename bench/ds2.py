"""`sluice bench ds2`: how DS2 converges on real executors, beside a threshold policy, in one run.

One Spark application in `local-cluster` mode (a standalone master and `max` one-core workers in
the JVM, executors as separate JVMs, so executor targets are really met) hosts one Kafka query
(filter and projection, 1 s trigger, 4 partitions) through Sluice's runtime. A producer follows
a rate schedule of three phases. Each policy runs the schedule twice: started under-provisioned
(at `minExecutors`, the first phase high) and over-provisioned (at `maxExecutors`, the first
phase low). Every `tick` seconds the policy reads the runtime's statuses and sets a target:

- `ds2`: the operator's own pure decision (`sluice.operator.scaling.plan`) with the pool's
  `spec.autoscaling` (stabilization window, scale-down delay and step, lag-aware target rate);
- `threshold`: what a CPU- and backlog-threshold autoscaler does: one executor more when the
  busy share of the executors' cores is above the utilization target x 1.2 or the lag grows,
  one fewer when it is below x 0.6, never within the stabilization window of a change.

The rate-sufficient size of a phase (the target both are measured against) is not DS2's own
answer: it is the busy cores measured in the settled second half of that phase (useful task
seconds per second: the tasks' CPU time from Spark's task metrics, over every run), divided by
the utilization target and the cores per executor. For each run and phase the benchmark counts
the steps (target changes) until the target first equals that size and the oscillations
(reversals of direction).

This machine has 2 cores, so loads it can carry ask for one executor at the default utilization
(0.7); the benchmark sizes for a lower one (0.35 by default) so that its phases span 1 to 3
executors, and compresses time (stabilization 10 s, scale-down delay 20 s, a decision every 5 s).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from sluice.api.constants import API_VERSION
from sluice.api.manifest import load_query
from sluice.api.pool import StreamingPool
from sluice.api.wire import QueryStatus

POLICIES = ("ds2", "threshold")
STARTS = ("under", "over")
GOAL_STEPS, GOAL_MEDIAN = 2, 1
WORK = 60_000
"""Characters each event's key is padded to and hashed (SHA-256): ~0.2 ms of CPU a row, so the
demand grows with the rate rather than being a micro-batch's fixed cost."""


@dataclass(frozen=True)
class Options:
    rates: tuple[float, float, float] = (300.0, 3000.0, 1500.0)
    """Events per second of the low, high and middle phases."""
    phase: float = 60.0
    """Seconds per phase."""
    tick: float = 5.0
    """Seconds between decisions."""
    utilization: float = 0.35
    stabilization: str = "10s"
    scale_down_delay: str = "20s"
    max_executors: int = 3
    warmup: float = 20.0
    """Seconds at the first phase's rate before the policy starts deciding."""


@dataclass
class Sample:
    t: float
    rate: float
    current: int
    target: int
    lag: int
    throughput: float
    busy: float
    """Cores busy with useful task time (task CPU time) over the last tick."""


@dataclass
class Run:
    policy: str
    start: str
    schedule: list[float]
    samples: list[Sample] = field(default_factory=list)
    changes: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, from, to) of each target change."""


def schedule(start: str, rates: tuple[float, float, float]) -> list[float]:
    low, high, mid = rates
    return [high, low, mid] if start == "under" else [low, high, mid]


def pool_model(options: Options) -> StreamingPool:
    return StreamingPool.model_validate({
        "apiVersion": API_VERSION, "kind": "StreamingPool", "metadata": {"name": "bench"},
        "spec": {"minExecutors": 1, "maxExecutors": options.max_executors, "executor": {"cores": 1},
                 "autoscaling": {"utilization": options.utilization, "stabilizationWindow": options.stabilization,
                                 "scaleDownDelay": options.scale_down_delay}}})


def manifest(bootstrap: str, topic: str) -> dict[str, Any]:
    from sluice.testing.load import EVENT_SCHEMA

    return {"apiVersion": API_VERSION, "kind": "StreamingQuery", "metadata": {"name": "stream", "namespace": "bench"},
            "spec": {"pool": "bench",
                     "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "schema": EVENT_SCHEMA,
                                "startingOffsets": "latest"},
                     "pipeline": [{"filter": "amount >= 0"},
                                  {"select": ["key", "seq", "produced_at", f"sha2(lpad(key, {WORK}, key), 256) AS digest"]}],
                     "sink": {"type": "memory"}, "sla": {"latencyTarget": "5s"}, "trigger": {"interval": "1s"}}}


class Threshold:
    """One executor at a time on CPU and backlog thresholds (the policy DS2 is compared with)."""

    def __init__(self, utilization: float, stabilization: float, low: int, high: int) -> None:
        self.utilization, self.stabilization, self.low, self.high = utilization, stabilization, low, high
        self.last_change: float | None = None
        self.last_lag: int | None = None

    def decide(self, current: int, busy: float, lag: int, now: float) -> int:
        growing = self.last_lag is not None and lag > max(self.last_lag, 0) * 1.2 + 100
        self.last_lag = lag
        if self.last_change is not None and now - self.last_change < self.stabilization:
            return current
        share = busy / max(current, 1)
        target = current
        if (share > self.utilization * 1.2 or growing) and current < self.high:
            target = current + 1
        elif share < self.utilization * 0.6 and current > self.low:
            target = current - 1
        if target != current:
            self.last_change = now
        return target


def _busy(registry: Any, labels: dict[str, str]) -> float:
    """Task CPU seconds so far: DS2's useful time (`BatchTimeline.working_seconds`)."""
    return float(registry.get_sample_value("sluice_runtime_task_cpu_seconds_total", labels) or 0.0)


def run_once(policy: str, start: str, options: Options, spark: Any, broker: Any, folder: Path,
             log: Callable[[str], None]) -> Run:
    from sluice.api.scenario import Burst
    from sluice.operator import scaling
    from sluice.operator.autoscaler import Memory
    from sluice.runtime.executors import ExecutorScaler
    from sluice.runtime.host import QueryHost
    from sluice.testing.load import LoadPlan, generate

    shutil.rmtree(folder, ignore_errors=True)  # a checkpoint of an earlier run would name another topic
    rates = schedule(start, options.rates)
    model = pool_model(options)
    limits = scaling.bounds(model)
    first = options.max_executors if start == "over" else 1
    host = QueryHost(spark, folder / "checkpoints", None)
    scaler = ExecutorScaler(spark, stateful=host.stateful_batches)
    scaler.set_target(first)
    deadline = time.time() + 120
    while scaler.state().current != first:
        if time.time() > deadline:
            raise RuntimeError(f"the application did not reach {first} executors in 120 s")
        time.sleep(1)
    topic = broker.create_topic(f"ds2-{policy}-{start}-{uuid.uuid4().hex[:6]}", partitions=4)
    total = options.warmup + options.phase * len(rates)
    bursts = [Burst(options.warmup + i * options.phase, options.phase, r / rates[0]) for i, r in enumerate(rates) if i > 0]
    plan = LoadPlan(topic, rates[0], duration=total + 5, bursts=bursts)
    stop = threading.Event()
    producer = threading.Thread(target=generate, args=(plan, broker.bootstrap), kwargs={"stop": stop.is_set}, daemon=True)
    query = load_query(manifest(broker.bootstrap, topic))
    labels = {"tenant": "bench", "query": "stream"}
    result = Run(policy, start, rates)
    threshold = Threshold(options.utilization, limits.stabilization, limits.min_executors, limits.max_executors)
    producer.start()
    began = time.time()
    host.add(query)
    try:
        memory, current_target = Memory(), first
        busy_before, at_before = _busy(host.metrics.registry, labels), time.time()
        next_tick = began + options.warmup
        while time.time() - began < total:
            time.sleep(max(0.0, next_tick - time.time()))
            next_tick += options.tick
            now = time.time()
            busy_now = _busy(host.metrics.registry, labels)
            busy = (busy_now - busy_before) / max(now - at_before, 1e-3)
            busy_before, at_before = busy_now, now
            status: QueryStatus = host.status(query.key)
            if status.phase == "Failed":
                raise RuntimeError(f"the benchmark's query failed: {status.message}")
            state = scaler.state()
            elapsed = now - began
            lag = int(status.kafka_lag or 0)
            if policy == "ds2":
                chosen = scaling.plan(model, current_target, {query.key: status}, now, memory)
                target = chosen.target
                memory = chosen.memory or memory
            else:
                target = threshold.decide(current_target, busy, lag, now)
            if target != current_target:
                result.changes.append((elapsed, current_target, target))
                scaler.set_target(target)
                current_target = target
            rate = plan.rate_at(elapsed)
            result.samples.append(Sample(round(elapsed, 1), rate, state.current, current_target, lag,
                                         round(status.input_rate, 1), round(busy, 4)))
            log(f"  {policy}/{start} t={elapsed:5.0f}s rate={rate:6.0f}/s executors={state.current}->{current_target} "
                f"lag={lag} busy={busy:.3f} cores")
    finally:
        stop.set()
        host.stop_all()
        scaler.stop()
        producer.join(timeout=30)
    return result


def reference_sizes(runs: list[Run], options: Options) -> dict[float, tuple[int, float]]:
    """Rate -> (rate-sufficient executors, busy cores measured in the settled half of its phases).

    The busy cores are the mean of the ticks there, not their median: task metrics arrive as
    stages complete, so behind a long batch one tick holds its whole CPU and the next ones none
    (at 3,000 events a second on one executor: 0, 0, 3.0, 0, 0, 3.2 cores, whose median is 0)."""
    busy: dict[float, list[float]] = {}
    for run in runs:
        for i, rate in enumerate(run.schedule):
            lo = options.warmup + i * options.phase + options.phase / 2
            hi = options.warmup + (i + 1) * options.phase
            busy.setdefault(rate, []).extend(s.busy for s in run.samples if lo <= s.t < hi)
    out = {}
    for rate, values in busy.items():
        cores = statistics.fmean(values) if values else 0.0
        size = min(max(math.ceil(cores / options.utilization - 1e-9), 1), options.max_executors)
        out[rate] = (size, round(cores, 4))
    return out


def phase_figures(run: Run, sizes: dict[float, tuple[int, float]], options: Options) -> list[dict[str, Any]]:
    """Per phase: the size to reach, the steps until the target first equals it, oscillations."""
    out = []
    for i, rate in enumerate(run.schedule):
        lo = options.warmup + i * options.phase if i else 0.0
        hi = options.warmup + (i + 1) * options.phase
        want = sizes[rate][0]
        before = [s for s in run.samples if s.t < lo]
        target = before[-1].target if before else (run.changes[0][1] if run.changes else run.samples[0].target)
        steps, reached = 0, target == want
        moves = []
        for t, _, to in run.changes:
            if lo <= t < hi:
                moves.append(to - target)
                target = to
                if not reached:
                    steps += 1
                    reached = target == want
        reversals = sum(1 for a, b in pairwise(moves) if a * b < 0)
        out.append({"phase": i + 1, "rate": rate, "size": want, "steps": steps if reached else None,
                    "reached": reached, "oscillations": reversals, "final": target})
    return out


def summarize(runs: list[Run], options: Options) -> dict[str, Any]:
    sizes = reference_sizes(runs, options)
    table = []
    for run in runs:
        for figure in phase_figures(run, sizes, options):
            table.append({"policy": run.policy, "start": run.start, **figure})
    per_policy = {}
    for policy in {r.policy for r in runs}:
        rows = [t for t in table if t["policy"] == policy]
        steps = [t["steps"] for t in rows if t["steps"] is not None]
        per_policy[policy] = {
            "phases": len(rows), "reached": sum(1 for t in rows if t["reached"]),
            "median_steps": statistics.median(steps) if steps else None, "max_steps": max(steps) if steps else None,
            "oscillations": sum(t["oscillations"] for t in rows),
        }
    return {"sizes": {str(rate): {"executors": s, "busy_cores": c} for rate, (s, c) in sizes.items()},
            "phases": table, "policies": per_policy}


def table_text(summary: dict[str, Any]) -> str:
    lines = ["| policy | start | phase | rate (events/s) | size to reach | steps | oscillations | final |",
             "|---|---|---|---|---|---|---|---|"]
    for t in summary["phases"]:
        steps = "not reached" if t["steps"] is None else str(t["steps"])
        lines.append(f"| {t['policy']} | {t['start']} | {t['phase']} | {t['rate']:.0f} | {t['size']} | {steps} | "
                     f"{t['oscillations']} | {t['final']} |")
    lines.append("")
    lines.append("| policy | phases reached | median steps | most steps | oscillations |")
    lines.append("|---|---|---|---|---|")
    for policy, p in sorted(summary["policies"].items()):
        lines.append(f"| {policy} | {p['reached']} of {p['phases']} | {p['median_steps']} | {p['max_steps']} | "
                     f"{p['oscillations']} |")
    return "\n".join(lines)


def plot(runs: list[Run], summary: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * len(runs)), sharex=True, squeeze=False)
    sizes = {float(k): v["executors"] for k, v in summary["sizes"].items()}
    for ax, run in zip(axes[:, 0], runs, strict=True):
        t = [s.t for s in run.samples]
        ax.step(t, [s.target for s in run.samples], where="post", label="target")
        ax.step(t, [s.current for s in run.samples], where="post", label="running", linestyle="--")
        ax.step(t, [sizes.get(s.rate, math.nan) for s in run.samples], where="post",
                label="rate-sufficient", color="grey", alpha=0.6)
        ax.set_ylabel("executors")
        ax.set_title(f"{run.policy}, started {run.start}-provisioned", fontsize=9)
        lag = ax.twinx()
        lag.plot(t, [s.lag for s in run.samples], color="tab:red", alpha=0.4, label="lag")
        lag.set_ylabel("lag (rows)", color="tab:red")
        ax.legend(loc="upper left", fontsize=7)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(out / "ds2.png", dpi=110)
    plt.close(fig)


def run(options: Options, policies: list[str], out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import SessionConfig, build_session, local_cluster
    from sluice.testing.kafka import KafkaBroker

    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "kafka", ignore_errors=True)
    broker = KafkaBroker(out / "kafka").start()
    log(f"kafka ready at {broker.bootstrap}")
    stop_session()
    spark = build_session(SessionConfig(master=local_cluster(options.max_executors), kafka=True,
                                        workdir=out / "spark", extra={"spark.executor.memory": "512m"}))
    runs: list[Run] = []
    started = time.time()
    try:
        for start in STARTS:
            for policy in policies:
                log(f"{policy}, started {start}-provisioned ({time.time() - started:.0f}s elapsed)")
                runs.append(run_once(policy, start, options, spark, broker, out / "runs" / f"{policy}-{start}", log))
    finally:
        spark.stop()
        broker.stop()
    summary = summarize(runs, options)
    result = {"options": asdict(options), "wall_seconds": round(time.time() - started), **summary,
              "runs": [asdict(r) for r in runs]}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    (out / "summary.txt").write_text(table_text(summary) + "\n")
    plot(runs, summary, out)
    return result


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    """The table and ds2.png again from an earlier run's results.json: the figures computed anew
    from its runs' samples (so they follow `reference_sizes` as it is now), written beside them."""
    document = json.loads(results.read_text())
    runs = [Run(**{**r, "samples": [Sample(**s) for s in r["samples"]], "changes": [tuple(c) for c in r["changes"]]})
            for r in document["runs"]]
    saved = document["options"]
    options = Options(**{**saved, "rates": tuple(saved["rates"])})
    document.update(summarize(runs, options))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    plot(runs, document, out)
    return document, table_text(document)
