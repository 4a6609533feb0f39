"""`sluice bench density`: how many tenants' queries one pool holds with every SLA kept, and what a
query costs there against one Spark application per query (the spark-operator model).

Shared: one pool runtime (`python -m sluice.runtime --master local[*]`: local Spark with the
urgent lane's spare slots and bulk turns, cameo, its control API) receives
queries through the control API in steps (N = 1, 10, 50, ...); the queries of earlier steps keep
running, as a pool fills up. Each query reads its own Kafka topic at a low rate. After each step's
warm-up, two readings of the queries' statuses, a window apart (at least `--window`, and at least
two of the slowest query's intervals), give each query's attainment over the rows it output in
between (its cumulative measured and within-SLA rows), the p99 over the runtime's 60 s latency
window, and the runtime's process group (Python and its JVM) its RSS and CPU. The steps stop
after the first one at which an SLA breaks (critical < 99% or bulk < 95% of rows within SLA).

Per application: for N = 1, 5, 10, N runtimes each host one query (fifo: a lone query needs no
scheduler) and their process groups' RSS and CPU are divided by N.

The mix, by query index i: every tenth query is a critical filter (SLA 2 s, `sla.critical`); the others are bulk,
half of them windowed aggregations (SLA 1-5 min), half filters (SLA 30 s); rates 10-50 events/s. Each
query has literals of its own (thresholds, a key it leaves out, its window and watermark delay:
`literals`), as tenants' queries do, so each compiles classes of its own; `--same-shapes` gives every
query of a kind the same ones.
No query sets `spec.trigger`: the runtime chooses each interval from its SLA.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sluice.api.constants import API_VERSION, CRITICAL_LANE, RUNTIME_CAPACITY
from sluice.operator.runtime_client import RuntimeClient, RuntimeRefused, RuntimeUnreachable
from sluice.runtime.session import exit_text

from .capacity import BULK_ATTAINMENT, CRITICAL_ATTAINMENT
from .jvmstat import collections, pauses
from .procfs import cpu_seconds, machine_busy_seconds, rss_mb, vitals

TENANTS = 20
PER_APP = (1, 5, 10)


@dataclass(frozen=True)
class Options:
    counts: tuple[int, ...] = (1, 10, 50, 100, 200, 400)
    per_app: tuple[int, ...] = PER_APP
    warmup: float = 45.0
    """Seconds after a step's last query runs before its window starts."""
    window: float = 60.0
    """Measured seconds per step, at least (two of the slowest query's intervals if longer)."""
    conf: tuple[str, ...] = ()
    """Spark settings (KEY=VALUE) for the shared pool's runtime."""
    capacity: int = RUNTIME_CAPACITY
    """The shared pool's scheduler capacity: batches granted at once."""
    critical_lane: int = CRITICAL_LANE
    """Its slots beyond the capacity that only critical queries' batches take."""
    same_shapes: bool = False
    """Every query of a kind with the same literals (three pipeline shapes), not its own (`literals`)."""


def is_critical(i: int) -> bool:
    return i % 10 == 0


LITERALS_SEED = 7
"""Seeds each query's own literals (`literals`): the same mix in every run."""
KEYS = 50
"""The load's keys: k0 to k49."""


@dataclass(frozen=True)
class Literals:
    """Query i's own constants: what makes its generated code a class of its own, as real tenants'
    filters differ in their thresholds and keys (`--same-shapes`: today's mix, three shapes)."""

    critical_threshold: int = 900
    bulk_threshold: int = 500
    excluded_key: str | None = None
    window_s: int = 30
    delay_s: int = 5


def literals(i: int, same_shapes: bool = False) -> Literals:
    """Query i's literals, drawn from a seed per query: thresholds within 5% and 10% of the shared
    mix's (so each query's selectivity stays close to it), a key it leaves out, a window of 20-40 s
    and a watermark delay of 3-7 s."""
    if same_shapes:
        return Literals()
    import random

    rng = random.Random(LITERALS_SEED * 1_000_003 + i)
    return Literals(critical_threshold=880 + rng.randrange(41), bulk_threshold=450 + rng.randrange(101),
                    excluded_key=f"k{rng.randrange(KEYS)}", window_s=20 + rng.randrange(21), delay_s=3 + rng.randrange(5))


def manifest(i: int, bootstrap: str, topic: str, same_shapes: bool = False) -> dict[str, Any]:
    """Query i of the mix (see the module's docstring)."""
    tenant = f"tenant-{i % TENANTS:02d}"
    own = literals(i, same_shapes)
    spec: dict[str, Any] = {
        "pool": "density",
        "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "startingOffsets": "latest",
                   "schema": "key STRING, seq BIGINT, produced_at TIMESTAMP, amount DOUBLE"},
        "sink": {"type": "noop"},
    }
    but_key = "" if own.excluded_key is None else f" AND key <> '{own.excluded_key}'"
    if is_critical(i):
        spec["pipeline"] = [{"filter": f"amount > {own.critical_threshold}{but_key}"}, {"select": ["key", "seq", "amount"]}]
        spec["sla"] = {"latencyTarget": "2s", "critical": True}
    elif i % 2 == 0:
        spec["pipeline"] = [
            *([] if own.excluded_key is None else [{"filter": f"key <> '{own.excluded_key}'"}]),
            {"watermark": {"column": "produced_at", "delay": f"{own.delay_s}s"}},
            {"window": {"column": "produced_at", "size": f"{own.window_s}s"}},
            {"groupBy": ["window", "key"]},
            {"aggregate": [{"fn": "count", "name": "n"}, {"fn": "sum", "column": "amount"}]}]
        spec["sla"] = {"latencyTarget": f"{60 * (1 + i % 5)}s"}
        spec["resources"] = {"shufflePartitions": 2}
    else:
        spec["pipeline"] = [{"filter": f"amount > {own.bulk_threshold}{but_key}"}, {"select": ["key", "amount"]}]
        spec["sla"] = {"latencyTarget": "30s"}
    return {"apiVersion": API_VERSION, "kind": "StreamingQuery",
            "metadata": {"name": f"q{i:04d}", "namespace": tenant}, "spec": spec}


def compiles(url: str) -> float | None:
    """Janino's compilations in the runtime's JVM so far (its /metrics), or None if it does not say."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    return next((sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                 if sample.name == "sluice_runtime_codegen_compiles_total"), None)


def rate(i: int) -> float:
    """Events per second for query i: 10 to 50."""
    return float(10 + (i * 7) % 41)


# ---------------------------------------------------------------- load for many topics

TICK = 0.2
"""Seconds between the load's sends: each topic's due events go out together (stamped as sent).
The broker and the producer share the pool's two cores here (in production they would not): at
200 topics, sending 20 times a second cost the broker 0.53 cores and the producer 0.41 with no
query reading, 5 times a second 0.19 and 0.15 (the same events and rates; 2026-12-06, one run
each). A row's latency counts from its send, so the coarser sends make no row look faster."""


@dataclass
class Load:
    """One producer paces every topic at its own rate (a thread per topic would not scale to 400)."""

    bootstrap: str
    rates: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    sent: int = 0

    def add(self, topic: str, per_second: float) -> None:
        self.rates = {**self.rates, topic: per_second}

    def run(self) -> None:
        import random

        from confluent_kafka import Producer

        from sluice.testing.load import iso_ms

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "acks": "1"})
        started: dict[str, tuple[float, int]] = {}
        rng = random.Random(7)
        while not self.stop.is_set():
            now = time.time()
            for topic, per_second in self.rates.items():
                begun, done = started.setdefault(topic, (now, 0))
                due = int((now - begun) * per_second)
                if due > done:
                    sent = time.time()
                    stamp, millis = iso_ms(sent), int(sent * 1000)
                for seq in range(done, due):
                    event = {"key": f"k{seq % 50}", "seq": seq, "produced_at": stamp, "amount": round(rng.random() * 1000, 2)}
                    producer.produce(topic, json.dumps(event).encode(), timestamp=millis)
                self.sent += max(due - done, 0)
                started[topic] = (begun, max(due, done))
            producer.poll(0)
            self.stop.wait(TICK)
        producer.flush(10)


# ---------------------------------------------------------------- the steps

def _scrape_series(url: str) -> int:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def step_attainment(before: Any, after: Any) -> float | None:
    """Share of the rows a query output between two readings of its status that kept the SLA
    (pure). None when it output no measured rows but did run batches (a filter that passed
    nothing, a window not yet closed: nothing to judge); 0.0 when it ran no batch at all (stuck)."""
    rows = after.measured_rows - (before.measured_rows if before else 0.0)
    if rows > 0:
        return float((after.rows_within - (before.rows_within if before else 0.0)) / rows)
    return None if after.batches > (before.batches if before else 0) else 0.0


def summarize_step(before: dict[str, Any], after: dict[str, Any], critical: set[str]) -> dict[str, Any]:
    """Worst attainment over the step (between the readings `before` and `after`) and p99 per
    class (pure). A query with nothing to judge in the step does not count toward its class; a
    class with queries but none judged fails the step (nothing shows that it kept its SLA)."""
    attained = {k: step_attainment(before.get(k), s) for k, s in after.items()}

    def figures(keys: list[str]) -> tuple[float | None, float | None]:
        judged = [a for k in keys if (a := attained[k]) is not None]
        p99s = [after[k].p99_ms for k in keys if after[k].p99_ms is not None]
        return (min(judged) if judged else None), (max(p99s) if p99s else None)

    crit = [k for k in after if k in critical]
    bulk = [k for k in after if k not in critical]
    worst_critical, p99_critical = figures(crit)
    worst_bulk, p99_bulk = figures(bulk)
    unjudged_classes = [name for name, keys, worst in (("critical", crit, worst_critical), ("bulk", bulk, worst_bulk))
                        if keys and worst is None]
    held = (worst_critical is None or worst_critical >= CRITICAL_ATTAINMENT) and \
        (worst_bulk is None or worst_bulk >= BULK_ATTAINMENT) and \
        all(s.phase == "Running" for s in after.values()) and not unjudged_classes
    return {"worst_critical_attainment": worst_critical, "worst_bulk_attainment": worst_bulk,
            "critical_p99_ms": p99_critical, "bulk_p99_ms": p99_bulk, "held": held,
            "unjudged": sorted(k for k, a in attained.items() if a is None), "unjudged_classes": unjudged_classes}


async def _critical_batches(client: RuntimeClient, keys: set[str], start: float,
                            window: float) -> dict[str, list[list[float]]]:
    """Sleeps out the step's `window` while polling the critical queries' measured batches (the
    runtime keeps a minute): [commit time from `start` (s), output rows, newest and oldest row's
    latency (ms)] each, so a step's late rows can be placed in time and across queries."""
    seen: dict[str, list[list[float]]] = {key: [] for key in keys}
    last = dict.fromkeys(keys, start)
    end = start + window
    while (now := time.time()) < end:
        await asyncio.sleep(min(20.0, end - now))
        for key in sorted(keys):
            try:
                listed = await client.batches(key, last[key])
            except (RuntimeUnreachable, RuntimeRefused):
                continue  # a figure lost, not the step: the statuses judge it
            for batch in listed.batches:
                if batch.latencies_ms:
                    seen[key].append([round(batch.committed - start, 2), batch.rows,
                                      round(batch.latencies_ms[-1], 1), round(batch.latencies_ms[0], 1)])
                last[key] = max(last[key], batch.committed)
    return seen


def class_path(paths: list[dict[str, float]]) -> dict[str, float]:
    """The mean share of each activity over the queries' critical paths (pure; queries with no
    path measured left out), largest first."""
    measured = [p for p in paths if p]
    totals: dict[str, float] = {}
    for path in measured:
        for label, share in path.items():
            totals[label] = totals.get(label, 0.0) + share
    return {label: round(total / len(measured), 4) for label, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def leading(row: dict[str, Any]) -> str:
    """One line: what leads the critical queries' critical path at a step ('' if none measured)."""
    path = row.get("critical_path_critical") or {}
    if not path:
        return ""
    top = list(path.items())[:3]
    return (f"N={row['queries']}: the critical queries' path led by " +
            ", ".join(f"{label} {share:.0%}" for label, share in top))


def _fate(runtime: Any) -> str:
    """One clause: whether the runtime's process lives, its exit (code or signal) if not, and its
    log's last word on the Spark driver (`runtime.spark_calls.DriverWatch`)."""
    code = runtime.proc.poll()
    said = ""
    try:
        logs = sorted(Path(runtime.workdir).glob("runtime-*.log"))
        lines = logs[-1].read_text(errors="replace").splitlines() if logs else []
        said = next((ln.strip() for ln in reversed(lines) if "the Spark driver" in ln), "")
    except OSError:
        pass
    fate = "the runtime is still running" if code is None else f"the runtime exited ({exit_text(code)})"
    return fate + (f"; its log: {said[-300:]}" if said else "")


def shared(options: Options, broker: Any, out: Path, log: Any) -> list[dict[str, Any]]:
    from sluice.bench.scheduler import core_decision_seconds
    from sluice.testing.runtime_process import RuntimeProcess

    runtime = RuntimeProcess(out / "shared", master="local[*]", conf=options.conf, capacity=options.capacity,
                             critical_lane=options.critical_lane)
    (out / "shared").mkdir(parents=True, exist_ok=True)
    runtime.start()
    load = Load(broker.bootstrap)
    producer = threading.Thread(target=load.run, daemon=True)
    producer.start()
    rows: list[dict[str, Any]] = []
    critical: set[str] = set()
    try:
        added = 0
        for n in options.counts:
            last_add = 0.0
            for i in range(added, n):
                topic = broker.create_topic(f"density-{i:04d}", partitions=1)
                body = manifest(i, broker.bootstrap, topic, options.same_shapes)
                key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
                if is_critical(i):
                    critical.add(key)
                began = time.monotonic()
                try:
                    runtime.register(body)
                    namespace, name = key.split("/")
                    while (status := runtime.status(namespace, name)) is None or status.phase == "Pending":
                        if time.monotonic() - began > 300:
                            raise RuntimeUnreachable(f"query {key} was still not started after 300 s")
                        time.sleep(0.1)
                except RuntimeUnreachable as error:  # a finding, not a crash: the steps end here
                    stopped = (f"query {i + 1} ({key}) could not be added: the runtime did not answer in time "
                               f"({error}) with {i} queries running; {_fate(runtime)}")
                    log(f"N={n}: {stopped}; no larger N is tried")
                    rows.append({"queries": n, "added": i, "stopped": stopped, "held": False})
                    return rows
                last_add = time.monotonic() - began
                load.add(topic, rate(i))
            added = n
            log(f"N={n}: added (the last in {last_add:.1f} s); warming up {options.warmup:.0f} s")
            time.sleep(options.warmup)
            try:
                before = asyncio.run(runtime.client.queries())
                # at least two of the slowest query's intervals: a query batching every 60 s has
                # nothing to judge in a 60 s window half the time
                window = max(options.window, 2 * max((s.interval_ms or 0.0) / 1000 for s in before.values()))
                gc0 = collections(runtime.proc.pid)  # before the window: jstat is a JVM of its own
                cpu0, wall0, batches0 = cpu_seconds(runtime.proc.pid), time.monotonic(), sum(s.batches for s in before.values())
                busy0, broker0, harness0 = machine_busy_seconds(), cpu_seconds(broker.proc.pid), time.process_time()
                compiles0 = compiles(runtime.url)
                log(f"N={n}: measuring {window:.0f} s")
                seen = asyncio.run(_critical_batches(runtime.client, critical & set(before), time.time(), window))
                cpu1, wall1, busy1 = cpu_seconds(runtime.proc.pid), time.monotonic(), machine_busy_seconds()
                broker1, harness1 = cpu_seconds(broker.proc.pid), time.process_time()  # this process alone
                gc1 = collections(runtime.proc.pid)
                compiles1 = compiles(runtime.url)
                statuses = asyncio.run(runtime.client.queries())
            except RuntimeUnreachable as error:  # the runtime died while measuring: a finding, the steps end here
                stopped = f"the runtime stopped answering at N={n} ({error}); {_fate(runtime)}"
                log(f"N={n}: {stopped}; no larger N is tried")
                rows.append({"queries": n, "added": n, "stopped": stopped, "held": False})
                return rows
            batches1 = sum(s.batches for s in statuses.values())
            row = {
                "queries": n, **summarize_step(before, statuses, critical), "window_s": round(window, 1),
                "driver_rss_mb": round(rss_mb(runtime.proc.pid), 1),
                "vitals": vitals(runtime.proc.pid),
                "driver_cores": round((cpu1 - cpu0) / (wall1 - wall0), 3),
                "machine_busy_cores": round((busy1 - busy0) / (wall1 - wall0), 3),
                "broker_cores": round((broker1 - broker0) / (wall1 - wall0), 3),
                "harness_cores": round((harness1 - harness0) / (wall1 - wall0), 3),  # the load's producer and the polls
                "driver_gc": pauses(gc0, gc1, wall1 - wall0),
                "interval_restarts": sum(s.interval_restarts for s in statuses.values()),
                "batches_per_s": round((batches1 - batches0) / (wall1 - wall0), 2),
                "codegen_compiles_per_min_per_query": (
                    None if compiles0 is None or compiles1 is None
                    else round(60 * (compiles1 - compiles0) / (wall1 - wall0) / n, 2)),
                "decision_us": round(core_decision_seconds(n, rounds=2000) * 1e6, 2),
                "metric_series": _scrape_series(runtime.url),
                "add_last_query_s": round(last_add, 2),
                "critical_path_critical": class_path([s.criticalPath for k, s in statuses.items() if k in critical]),
                "per_query": {k: {"phase": s.phase, "attainment": s.attainment, "p99_ms": s.p99_ms,
                                  "step_attainment": step_attainment(before.get(k), s),
                                  "batches": s.batches, "rows": s.rows, "output_rows": s.output_rows, "interval_ms": s.interval_ms,
                                  "interval_restarts": s.interval_restarts, "interval_reason": s.interval_reason,
                                  "late_share": None if s.costs is None else s.costs.late_share,
                                  "bottleneck": s.bottleneck, "critical_path": s.criticalPath,
                                  "message": s.message,
                                  # a critical query's cost figures: its driver's and its tasks' work
                                  # a batch, and its tasks' time off the CPU
                                  **({"costs": s.costs.model_dump()} if k in critical and s.costs is not None else {}),
                                  **({"latency_batches": seen[k]} if k in seen else {})} for k, s in sorted(statuses.items())},
            }
            rows.append(row)
            held = row["vitals"]
            log(f"N={n}: threads " + ", ".join(f"{k} {v}" for k, v in held["threads"].items()) + "; open files "
                + ", ".join(f"{k} {v}" for k, v in held["fds"].items())
                + f" (limits: {held['max_user_processes'] or 'no'} processes, {held['max_open_files'] or 'no'} files)")
            log(f"N={n}: worst critical {_pct(row['worst_critical_attainment'])}, worst bulk "
                f"{_pct(row['worst_bulk_attainment'])}, RSS {row['driver_rss_mb']:.0f} MB, "
                f"{row['driver_cores']:.2f} cores (the machine: {row['machine_busy_cores']:.2f} of "
                f"{os.cpu_count()} busy; the broker {row['broker_cores']:.2f}, this harness and its load "
                f"{row['harness_cores']:.2f}), {row['batches_per_s']:.1f} batches/s" + _gc_text(row["driver_gc"]))
            if not row["held"]:
                if leading(row):
                    log(leading(row))
                unjudged = row.get("unjudged_classes") or []
                why = (f"no {' or '.join(unjudged)} query output a row to judge" if unjudged
                       else "an SLA broke")
                log(f"N={n}: {why}; no larger N is tried")
                break
    finally:
        load.stop.set()
        producer.join(30)
        runtime.stop()
    return rows


def _gc_text(gc: dict[str, float] | None) -> str:
    return "" if gc is None else (f", the driver's JVM paused {gc['pause_share']:.1%} of it "
                                  f"({gc['collections']:.0f} collections, {gc['full']:.0f} full)")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def per_app(options: Options, broker: Any, out: Path, log: Any) -> list[dict[str, Any]]:
    """N applications of one query each: memory and CPU per query."""
    from sluice.testing.runtime_process import RuntimeProcess

    rows = []
    for n in options.per_app:
        load = Load(broker.bootstrap)
        producer = threading.Thread(target=load.run, daemon=True)
        producer.start()
        runtimes = []
        try:
            for i in range(n):
                folder = out / f"app-{n}-{i}"
                folder.mkdir(parents=True, exist_ok=True)
                runtime = RuntimeProcess(folder)
                runtime.start()
                runtimes.append(runtime)
                topic = broker.create_topic(f"per-app-{n}-{i}", partitions=1)
                body = manifest(i, broker.bootstrap, topic, options.same_shapes)
                body["spec"]["pool"] = f"app-{i}"
                runtime.register(body)
                load.add(topic, rate(i))
            time.sleep(options.warmup)
            pids = [r.proc.pid for r in runtimes]
            cpu0, wall0 = sum(cpu_seconds(p) for p in pids), time.monotonic()
            time.sleep(options.window)
            cpu1, wall1 = sum(cpu_seconds(p) for p in pids), time.monotonic()
            rss = sum(rss_mb(p) for p in pids)
            row = {"queries": n, "rss_mb_per_query": round(rss / n, 1),
                   "cores_per_query": round((cpu1 - cpu0) / (wall1 - wall0) / n, 3)}
            rows.append(row)
            log(f"per app, N={n}: {row['rss_mb_per_query']:.0f} MB and {row['cores_per_query']:.3f} cores per query")
        finally:
            load.stop.set()
            producer.join(30)
            for runtime in runtimes:
                runtime.stop()
    return rows


def _compiles(row: dict[str, Any]) -> str:
    value = row.get("codegen_compiles_per_min_per_query")
    return "-" if value is None else f"{value:.2f}"


def render(result: dict[str, Any]) -> str:
    lines = [f"{'N':>5} {'worst crit':>10} {'worst bulk':>10} {'crit p99':>9} {'bulk p99':>9} {'RSS MB':>7} "
             f"{'cores':>6} {'machine':>7} {'batch/s':>7} {'GC':>5} {'decide µs':>9} {'series':>7} {'add N-th':>8} "
             f"{'compiles':>8}"]
    for r in result["shared"]:
        if "stopped" in r:
            lines.append(f"{r['queries']:>5} not reached: {r['stopped']}")
            continue
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v / 1000:.1f}s"

        machine = "-" if r.get("machine_busy_cores") is None else f"{r['machine_busy_cores']:.2f}"
        gc = "-" if not r.get("driver_gc") else f"{r['driver_gc']['pause_share']:.1%}"

        lines.append(f"{r['queries']:>5} {_pct(r['worst_critical_attainment']):>10} {_pct(r['worst_bulk_attainment']):>10} "
                     f"{ms(r['critical_p99_ms']):>9} {ms(r['bulk_p99_ms']):>9} {r['driver_rss_mb']:>7.0f} "
                     f"{r['driver_cores']:>6.2f} {machine:>7} {r['batches_per_s']:>7.1f} {gc:>5} {r['decision_us']:>9.1f} "
                     f"{r['metric_series']:>7} {r['add_last_query_s']:>7.1f}s {_compiles(r):>8}")
    lines.append("")
    for r in result["per_app"]:
        lines.append(f"one application per query, N={r['queries']}: {r['rss_mb_per_query']:.0f} MB, "
                     f"{r['cores_per_query']:.3f} cores per query")
    shared_rows = [r for r in result["shared"] if r["queries"] == result["capacity_queries"]]
    if shared_rows and result["per_app"] and result["capacity_queries"] > 0:
        per_query = shared_rows[0]["driver_rss_mb"] / shared_rows[0]["queries"]
        app = max(r["rss_mb_per_query"] for r in result["per_app"])
        lines.append(f"shared pool at N={result['capacity_queries']}: {per_query:.1f} MB per query "
                     f"({app / per_query:.1f}x below one application per query)")
    lines.append("compiles: generated classes Janino compiled per minute per query in the step's window")
    if (result.get("options") or {}).get("same_shapes"):
        lines.append("--same-shapes: every query of a kind with the same literals (three pipeline shapes)")
    lines.append(f"capacity: {result['capacity_queries']} queries with every SLA kept")
    broke = [r for r in result["shared"] if "held" in r and not r["held"]]
    if broke and leading(broke[0]):
        lines.append(f"first step that broke, {leading(broke[0])}")
    if (result.get("options") or {}).get("capacity", RUNTIME_CAPACITY) != RUNTIME_CAPACITY:
        lines.append(f"shared runtime's scheduler capacity: {result['options']['capacity']} batches at once "
                     f"(default {RUNTIME_CAPACITY})")
    if (result.get("options") or {}).get("critical_lane", CRITICAL_LANE) != CRITICAL_LANE:
        lines.append(f"shared runtime's critical lane: {result['options']['critical_lane']} slots "
                     f"(default {CRITICAL_LANE})")
    if (result.get("options") or {}).get("conf"):
        lines.append(f"shared runtime's Spark settings besides the defaults: {', '.join(result['options']['conf'])}")
    return "\n".join(lines)


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["shared"] if "stopped" not in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    ns = [r["queries"] for r in rows]
    for key, marker, label in (("worst_critical_attainment", "o", "worst critical"), ("worst_bulk_attainment", "s", "worst bulk")):
        measured = [(r["queries"], 100 * r[key]) for r in rows if r[key] is not None]  # N=1 has no bulk query
        left.plot([n for n, _ in measured], [a for _, a in measured], marker=marker, label=label)
    left.axhline(100 * CRITICAL_ATTAINMENT, color="grey", linestyle=":")
    left.axhline(100 * BULK_ATTAINMENT, color="grey", linestyle="--")
    if ns:  # no step measured (the first one broke while filling): an empty plot, not a log scale of nothing
        left.set_xscale("log")
    left.set_xlabel("queries in the pool")
    left.set_ylabel("rows within SLA (%)")
    left.legend()
    right.plot(ns, [r["driver_rss_mb"] / r["queries"] for r in rows], marker="o", label="shared pool")
    for r in result["per_app"]:
        right.scatter([r["queries"]], [r["rss_mb_per_query"]], color="red", marker="x")
    right.scatter([], [], color="red", marker="x", label="one application per query")
    if ns or result["per_app"]:
        right.set_xscale("log")
        right.set_yscale("log")
    right.set_xlabel("queries")
    right.set_ylabel("RSS per query (MB)")
    right.legend()
    fig.suptitle(f"Density: {result['capacity_queries']} queries held with every SLA kept")
    fig.tight_layout()
    fig.savefig(out / "density.png", dpi=110)
    plt.close(fig)


def run(options: Options, out: Path, log: Any = print) -> dict[str, Any]:
    from sluice.testing.kafka import KafkaBroker

    out.mkdir(parents=True, exist_ok=True)
    for scratch in ("kafka", "shared", *(p.name for p in out.glob("app-*"))):
        shutil.rmtree(out / scratch, ignore_errors=True)
    broker = KafkaBroker(out / "kafka").start()
    started = time.monotonic()
    try:
        shared_rows = shared(options, broker, out, log)
        app_rows = per_app(options, broker, out, log)
    finally:
        broker.stop()
    held = [r["queries"] for r in shared_rows if r["held"]]
    result = {"shared": shared_rows, "per_app": app_rows, "capacity_queries": max(held) if held else 0,
              "options": asdict(options), "elapsed_s": round(time.monotonic() - started, 1)}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "summary.txt").write_text(render(result) + "\n")
    plot(result, out)
    return result


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    """The table and density.png again from an earlier run's results.json."""
    document = json.loads(results.read_text())
    out.mkdir(parents=True, exist_ok=True)
    plot(document, out)
    return document, render(document)
