"""`sluice bench cameo`: Cameo against Spark's FIFO and FAIR on real Spark, driven by manifests.

A scenario is YAML: StreamingQuery manifests (as users apply them; pool and policy are set per
run, a Kafka source's servers and topic are replaced by the benchmark's) plus a load profile per
query. One local Kafka broker serves the whole benchmark; every run gets fresh topics, filled by
the load generator while `sluice run` (a fresh process: a fresh JVM and runtime) consumes them.
Policies are interleaved across repeats so that drift of the machine hits all of them alike.

Every row sent is judged. The load stops after the scenario's warm-up and duration; the run goes
on (`sluice run --drain`) until every query has read the rows it was sent, or for at most the
longest SLA plus `DRAIN_MARGIN_S`, so each row left unread has passed its SLA by the end. A row
never read (`backlog_end` = `sent` - `processed`) counts as outside its SLA; a query that was
sent rows of which none could be judged keeps 0%, not "no figure".

One measuring point (`latency_end` per query in results.json): a query writing Kafka whose output
keeps the event's `seq` is measured where a reader sees its rows, by a read_committed consumer of
its sink topic (`testing/sink_reads.py`: arrival less production time, one entry per output
record), in micro-batch and Real-time Mode alike; any other query at its batch's commit, as the
runtime measures it (`"commit"`). Its unread rows then count in output records at the query's
own ratio of records written to rows read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from sluice.api.constants import (
    EXECUTOR_JIT,
    EXECUTOR_JITS,
    EXECUTOR_WARMUP,
    GATED_POLICIES,
    GATES,
    MASSES,
    POLICIES,
    START_WARMUP,
    URGENT_RESERVE,
)
from sluice.api.query import Delivery, KafkaSink, StreamingQuery
from sluice.api.scenario import Scenario, ScenarioError, load_scenario
from sluice.api.units import Duration
from sluice.runtime.latency import weighted_quantile as quantile
from sluice.runtime.session import EXECUTOR_JIT_ENV, local_cluster
from sluice.scheduler.execution import mode_of
from sluice.testing.sink_reads import SinkReader, latencies, production_times

from .placement import Placement, placed
from .procfs import SERIES_EVERY_S, ThreadSeries, tree
from .scenario_runs import (
    AUTO,
    LANE,
    drain_seconds,
    for_run,
    machine_sample,
    machine_use,
    start_load,
    warm_broker,
)


def check_delivery(path: Path, queries: list[StreamingQuery], delivery: Delivery | None) -> None:
    """`--delivery` needs a Kafka sink to act on: otherwise one sentence (a ScenarioError)."""
    if delivery is not None and not any(isinstance(q.spec.sink, KafkaSink) for q in queries):
        raise ScenarioError(f"--delivery: {path} has no Kafka sink to write {delivery}; use a scenario whose "
                            "queries write to Kafka (bench/scenarios/realtime.yaml) or leave --delivery out.")


READY_SECONDS = 300.0
"""How long a run may take to start Spark and add its queries before the benchmark gives up."""


def await_ready(runs: list[tuple[Path, Any, Path]], timeout: float = READY_SECONDS) -> None:
    """Wait until each (ready file, process, log) run has written its ready file; a run that exits
    first, or does not get there within `timeout` seconds, fails the benchmark with its log's tail."""
    deadline = time.monotonic() + timeout
    for ready, proc, log in runs:
        while not ready.exists():
            why = None
            if proc.poll() is not None:
                why = f"exited ({proc.returncode})"
            elif time.monotonic() > deadline:
                proc.kill()
                why = f"was not ready within {timeout:.0f} s"
            if why is not None:
                for _, other, _ in runs:  # a lane's run too: nothing is left running
                    if other.poll() is None:
                        other.kill()
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                raise RuntimeError(f"the run {why} before its queries were running: {' / '.join(tail)}")
            time.sleep(0.1)


def run_once(scenario: Scenario, queries: list[StreamingQuery], policy: str, broker: Any, folder: Path,
             log: Any = print, urgent_lane: str = "gated", delivery: Delivery | None = None,
             gate: str = "inprocess", executors: int | None = None, placement: Placement | None = None,
             jit: str = EXECUTOR_JIT) -> dict[str, Any]:
    """One variant (a policy, or AUTO), one fresh runtime: returns `sluice run`'s report (with
    timelines). `urgent_lane` is `sluice run --urgent-lane`: gated policies, all or none; `gate`
    is `sluice run --gate`; `executors`, `sluice run --executors` (local-cluster, one core each);
    `placement`: the groups Spark's runs and the load go to (`bench.placement`); `jit`: the
    executor JVMs' compilers (`session.EXECUTOR_JIT_OPTIONS`)."""
    placement = placement or Placement("local", reason="not asked")
    # a fresh runtime: a previous benchmark's checkpoints here would name other topics' offsets
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    tag = uuid.uuid4().hex[:8]
    topics = [broker.create_topic(f"{scenario.name}-{i}-{tag}", partitions=2) for i in range(len(queries))]
    sinks = [broker.create_topic(f"{scenario.name}-{i}-{tag}-out", partitions=2) if isinstance(q.spec.sink, KafkaSink)
             else None for i, q in enumerate(queries)]
    manifests = [for_run(q, s.load, broker.bootstrap, t, policy, sink, s.critical, delivery)
                 for q, s, t, sink in zip(queries, scenario.queries, topics, sinks, strict=True)]
    seconds = scenario.duration.seconds + scenario.warmup.seconds  # the load's; the run adds its drain
    groups = {"": manifests}
    if policy == LANE:  # the Real-time queries in an application of their own
        realtime = [m for m, q in zip(manifests, queries, strict=True) if mode_of(q).mode == "realTime"]
        groups = {"": [m for m in manifests if m not in realtime], "lane-": realtime}
    procs = []
    for prefix, group in groups.items():
        if not group:
            continue
        (folder / f"{prefix}manifests.yaml").write_text(yaml.safe_dump_all(group, sort_keys=False))
        procs.append((prefix, subprocess.Popen(
            [sys.executable, "-m", "sluice", "run", "-f", str(folder / f"{prefix}manifests.yaml"),
             "--policy", policy if policy in POLICIES else "cameo",
             "--duration", f"{seconds}s", "--drain", f"{drain_seconds(queries):g}s",
             "--sent-file", str(folder / "sent.json"), "--warmup", scenario.warmup.text, "--report", str(folder / f"{prefix}report.json"),
             "--timeline", "--workdir", str(folder / f"{prefix}work"), "--ready-file", str(folder / f"{prefix}ready"),
             "--urgent-lane", urgent_lane, "--gate", gate,
             *(["--executors", str(executors)] if executors else [])],
            stdout=subprocess.DEVNULL, stderr=(folder / f"{prefix}run.log").open("wb"), preexec_fn=placement.spark_here,
            env={**os.environ, EXECUTOR_JIT_ENV: jit},
        )))
    # The load starts once every query runs, and the runs' warm-up and duration count from then: a
    # load started at a guess of Spark's start time (8 s before 2026-11-26) left slower starts a
    # backlog (9-13 s of load before the first batch, twice) that spilled into the measured window.
    await_ready([(folder / f"{prefix}ready", proc, folder / f"{prefix}run.log") for prefix, proc in procs])
    readers = {q.key: SinkReader(broker.bootstrap, sink).start() for q, sink in zip(queries, sinks, strict=True) if sink}
    began, sides = machine_sample([proc.pid for _, proc in procs]), placement.cpu_seconds()
    threads, sampled = ThreadSeries(), threading.Event()

    def sample_threads() -> None:  # the runs' threads by kind while the load runs (JIT, GC, tasks, ...)
        threads.sample(pid for _, proc in procs for pid in tree(proc.pid))
        while not sampled.wait(SERIES_EVERY_S):
            threads.sample(pid for _, proc in procs for pid in tree(proc.pid))

    sampler = threading.Thread(target=sample_threads, name="thread-series", daemon=True)
    sampler.start()
    producers, stop, sent = start_load(scenario, queries, topics, broker.bootstrap, seconds, placement.load_thread)
    for p in producers:  # each load ends with its plan
        p.join(seconds + 60)
    machine: dict[str, Any] = machine_use(began, machine_sample([proc.pid for _, proc in procs]))
    machine["placement"] = placement.record(sides, placement.cpu_seconds(), machine["seconds"])
    sampled.set()
    sampler.join()
    machine["series"] = threads.series
    stop.set()
    for p in producers:
        p.join(60)
    # the runs go on (their drain) until every query has read what it was sent, or its SLA has passed
    counts = folder / "sent.json.tmp"
    counts.write_text(json.dumps({k: v.get("sent", 0) for k, v in sent.items()}))
    counts.replace(folder / "sent.json")
    codes = {prefix: proc.wait(timeout=drain_seconds(queries) + 300) for prefix, proc in procs}
    for reader in readers.values():
        reader.stop()
    result: dict[str, Any] = {}
    for prefix, code in codes.items():
        report = folder / f"{prefix}report.json"
        if code != 0 or not report.exists():
            tail = (folder / f"{prefix}run.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"the {policy} run failed (exit {code}): {' / '.join(tail)}")
        part = json.loads(report.read_text())
        result = {**part, "queries": {**result.get("queries", {}), **part["queries"]}}
    result["sent"] = sent
    result["machine"] = machine
    result["sink_reads"] = {key: sink_read(reader, topics[[q.key for q in queries].index(key)], broker.bootstrap,
                                           sent.get(key, {}).get("started_at"), scenario.warmup.seconds, result["started_at"])
                            for key, reader in readers.items()}
    log(f"  {policy}{'' if gate == 'inprocess' else ' (' + gate + ')'}{'' if jit == EXECUTOR_JIT else ' (executors ' + jit + ')'}: "
        + ", ".join(f"{k} p99 {v['p99_ms']} ms" for k, v in result["queries"].items()))
    return result


def sink_read(reader: SinkReader, source: str, bootstrap: str, load_started: float | None, warmup: float,
              report_started: float) -> dict[str, Any]:
    """One query's sink-read latencies: `latencies` as [seconds on the report's clock, ms] for the
    records whose input was produced in the measured window (from the load's start plus the
    warm-up), with the reader's counts."""
    produced = production_times(bootstrap, source) if reader.arrivals else {}
    since = (load_started or 0.0) + warmup
    return {"latencies": [[round(at - report_started, 3), round(ms, 2)]
                          for at, ms in latencies(reader.arrivals, produced, since)],
            "records": reader.records, "unmatched": reader.unmatched, "error": reader.error}


SIDECAR = "+sidecar"
"""A variant's suffix when its gate asks a sidecar process (`cameo+sidecar`)."""


def variants(policies: list[str], gates: list[str]) -> list[tuple[str, str, str]]:
    """(name, policy, gate) of each run: a gated policy once per gate; fifo and fair have no gate."""
    out = []
    for policy in policies:
        gated = policy in GATED_POLICIES or policy in (AUTO, LANE)
        for gate in (gates if gated else ["inprocess"]):
            out.append((f"{policy}{SIDECAR}" if gated and gate == "sidecar" else policy, policy, gate))
    return out


def with_jits(chosen: list[tuple[str, str, str]], jits: list[str]) -> list[tuple[str, str, str, str]]:
    """(name, policy, gate, jit) of each run: every variant once per executor JIT choice, named
    `cameo+c1` and so on (a pool's default, `api.constants.EXECUTOR_JIT`, keeps the plain name)."""
    return [(name if jit == EXECUTOR_JIT else f"{name}+{jit}", policy, gate, jit) for name, policy, gate in chosen
            for jit in jits]


def jit_lines(runs: dict[str, list[dict[str, Any]]], jits: dict[str, str]) -> list[str]:
    """Per variant, what its processes' compilers and tasks took while the load ran (the thread
    series' last point: driver and executors together; only the executors' JIT choice differs)."""
    lines = []
    for name, reports in runs.items():
        for r in reports:
            series = (r.get("machine") or {}).get("series") or {}
            last = {kind: points[-1] for kind, points in series.items() if points}
            if "jit" in last and last["jit"][0] > 0:
                seconds = last["jit"][0]
                lines.append(f"{name} (executors' JIT {jits[name]}): compilers {last['jit'][1]:.1f} s of CPU, tasks "
                             f"{last.get('task', [0, 0.0])[1]:.1f} s over the {seconds:.0f} s of load")
    return lines


def gate_ask(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each gated variant's ask time per batch besides queueing (p50 and p90 ms, per query, first
    repeat): the round trip to the scheduler, in-process or over HTTP to its sidecar."""
    asks = {name: {k: v["phases_ms"]["gateAsk"] for k, v in reports[0]["queries"].items()
                   if "gateAsk" in (v.get("phases_ms") or {})}
            for name, reports in runs.items() if reports and reports[0].get("gate", "none") != "none"}
    return {name: per for name, per in asks.items() if per}  # a pod's report has no phases


def _weighted(timeline: list[list[Any]], start: float, end: float) -> list[tuple[float, float]]:
    return sorted(
        (lat, rows * m) for t, rows, lats in timeline if start <= t < end and rows > 0 for lat, m in zip(lats, MASSES, strict=False)
    )


def _read_at_sink(report: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The query's sink-read latencies if it was measured there (see the module's docstring)."""
    read = (report.get("sink_reads") or {}).get(key)
    return read if read and read["latencies"] else None


def _sample(report: dict[str, Any], key: str, start: float, end: float) -> list[tuple[float, float]]:
    """(latency ms, rows) between `start` and `end` on the report's clock: each output record read
    at the sink (weight 1), else each committed batch's rows at its quantiles."""
    read = _read_at_sink(report, key)
    if read is not None:
        return sorted((float(ms), 1.0) for t, ms in read["latencies"] if start <= t < end)
    return _weighted(report["queries"].get(key, {}).get("timeline", []), start, end)


def judge_rows(report: dict[str, Any], key: str) -> dict[str, int]:
    """A run's rows of one query: `sent` by the load, `processed` (read by committed batches) and
    `backlog_end`, the rows sent that no batch read by the run's end."""
    sent = int((report.get("sent", {}).get(key) or {}).get("sent", 0))
    processed = int((report["queries"].get(key) or {}).get("rows", 0))
    return {"sent": sent, "processed": processed, "backlog_end": max(sent - processed, 0)}


def summarize(runs: dict[str, list[dict[str, Any]]], scenario: Scenario, queries: list[StreamingQuery]) -> dict[str, Any]:
    """Merge repeats per policy: p50/p99/max over every measured batch of every repeat; attainment
    over every row of the measured window, a row sent but never read counting as outside its SLA
    (`attainment_batches`: over the measured batches' rows alone, the figure before 2026-11-27)."""
    out: dict[str, Any] = {"policies": {}, "burst": {}}
    bursts = [(b.at.seconds, b.length.seconds) for s in scenario.queries for b in s.load.bursts]

    def burst_sample(report: dict[str, Any], key: str) -> list[tuple[float, float]]:
        """Batches committed during a burst and the 10 s after it (the backlog drains then)."""
        loads = [v["started_at"] for v in report.get("sent", {}).values() if "started_at" in v]
        if not loads:
            return []
        offset = min(loads) - report["started_at"]  # load time 0 on the report's clock
        return [x for at, length in bursts for x in _sample(report, key, offset + at, offset + at + length + 10)]

    for policy, reports in runs.items():
        table: dict[str, Any] = {}
        for query in queries:
            key = query.key
            table[key] = query_figures(reports, query)
            if len(reports) > 1:  # each repeat alone: the spread of the headline figures
                alone = [query_figures([r], query) for r in reports]
                table[key]["spread"] = {name: spread([f[name] for f in alone]) for name in ("p99_ms", "attainment")}
                table[key]["repeats"] = {name: [f[name] for f in alone] for name in ("p99_ms", "attainment", "rows")}
            if bursts:
                burst = sorted(x for r in reports for x in burst_sample(r, key))
                out["burst"].setdefault(policy, {})[key] = quantile(burst, 0.99)
        out["policies"][policy] = table
    return out


def query_figures(reports: list[dict[str, Any]], query: StreamingQuery) -> dict[str, Any]:
    """One query's figures over `reports` (a policy's repeats): p50/p99/max over every measured
    batch, attainment over every row of the measured window (unread rows outside the SLA)."""
    key = query.key
    ran = [r for r in reports if key in r["queries"]]
    reads = [read for r in ran if (read := _read_at_sink(r, key)) is not None]
    at_sink = bool(ran) and len(reads) == len(ran)
    sample = sorted(x for r in ran for x in (_sample(r, key, -1e12, 1e12) if at_sink else
                                             _weighted(r["queries"][key].get("timeline", []), 0, 1e12)))
    target = query.spec.sla.latencyTarget.ms
    total = sum(w for _, w in sample)
    within = sum(w for v, w in sample if v <= target)
    judged = [judge_rows(r, key) for r in reports]
    sent = sum(j["sent"] for j in judged)
    backlog = sum(j["backlog_end"] for j in judged)
    unread = float(backlog)
    if at_sink:  # unread input rows in output records, at the query's own ratio of the two
        records = sum(int(read["records"]) for read in reads)
        processed = sum(j["processed"] for j in judged)
        unread = backlog * (records / processed if processed else 1.0)
    outside_all = total + unread  # every row of the measured window, read or not
    n = max(len(reports), 1)
    return {
        "p50_ms": quantile(sample, 0.5), "p99_ms": quantile(sample, 0.99),
        "max_ms": sample[-1][0] if sample else None, "sla_ms": target,
        "attainment": within / outside_all if outside_all else (0.0 if sent else None),
        "attainment_batches": within / total if total else None,
        "rows": sum(r["queries"][key]["rows"] for r in reports if key in r["queries"]) // n,
        "sent": sent // n, "processed": sum(j["processed"] for j in judged) // n, "backlog_end": backlog // n,
        "latency_end": "sink read" if at_sink else "commit",
    }


def spread(values: list[float | None]) -> dict[str, float | None]:
    """min, median and max of the repeats' values (None where a repeat had no figure)."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"min": None, "median": None, "max": None}
    return {"min": known[0], "median": statistics.median(known), "max": known[-1]}


def ratios(summary: dict[str, Any], scenario: Scenario, queries: list[StreamingQuery]) -> list[str]:
    lines: list[str] = []
    policies = summary["policies"]
    if "cameo" not in policies:
        return lines
    for query, item in zip(queries, scenario.queries, strict=True):
        if not item.critical:
            continue
        cameo = policies["cameo"][query.key]["p99_ms"]
        for other in (p for p in policies if p != "cameo"):
            if other in policies and cameo:
                base = policies[other][query.key]["p99_ms"]
                if base:
                    lines.append(f"{query.key}: p99 {other}/cameo = {base / cameo:.2f}x ({base:.0f} ms vs {cameo:.0f} ms)")
            burst = summary["burst"]
            if other in burst and burst.get("cameo", {}).get(query.key) and burst[other].get(query.key):
                lines.append(f"{query.key}: p99 during bursts {other}/cameo = {burst[other][query.key] / burst['cameo'][query.key]:.2f}x")
        auto = policies.get(AUTO, {}).get(query.key, {}).get("p99_ms")
        for other in (p for p in (*POLICIES, LANE) if p in policies and auto):
            base = policies[other][query.key]["p99_ms"]
            if base:
                lines.append(f"{query.key}: p99 {other}/auto = {base / auto:.2f}x ({base:.0f} ms vs {auto:.0f} ms)")
    return lines


def met_p99(figures: dict[str, Any]) -> bool:
    """The p99 within the SLA, counting unread rows: more than 1% of the rows sent still unread at
    the end puts the p99 among them, past the run's end."""
    p99 = figures["p99_ms"]
    unread, sent = figures.get("backlog_end", 0), figures.get("sent", 0)
    return p99 is not None and p99 <= figures["sla_ms"] and not (sent and unread > 0.01 * sent)


def render_table(summary: dict[str, Any], queries: list[StreamingQuery]) -> str:
    lines = [f"{'policy':7} {'query':32} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'SLA ms':>8} {'attain':>7} "
             f"{'rows':>9} {'unread':>7} met"]
    for policy, table in summary["policies"].items():
        for query in queries:
            q = table[query.key]

            def f(v: Any) -> str:
                return "-" if v is None else f"{v:.0f}"

            att = "-" if q["attainment"] is None else f"{q['attainment']:.1%}"
            unread = q.get("backlog_end", 0)
            lines.append(f"{policy:7} {query.key:32} {f(q['p50_ms']):>8} {f(q['p99_ms']):>8} {f(q['max_ms']):>8} "
                         f"{f(q['sla_ms']):>8} {att:>7} {q['rows']:>9} {unread:>7} {'yes' if met_p99(q) else 'NO'}")
    at_sink = sorted({q.key for table in summary["policies"].values() for q in queries
                      if table[q.key].get("latency_end") == "sink read"})
    if at_sink:
        lines.append(f"latency read at the sink (read_committed consumer, one entry per output record): {', '.join(at_sink)}; "
                     "the others at their batch's commit")
    return "\n".join(lines)


def throughput_check(summary: dict[str, Any], queries: list[StreamingQuery]) -> list[str]:
    lines: list[str] = []
    for query in queries:
        rows = [t[query.key]["rows"] for t in summary["policies"].values()]
        if rows and max(rows) > 0:
            spread = (max(rows) - min(rows)) / max(rows)
            lines.append(f"{query.key}: rows per policy {rows} (spread {spread:.1%})")
    return lines


def plot(runs: dict[str, list[dict[str, Any]]], summary: dict[str, Any], queries: list[StreamingQuery], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(runs)
    fig, axes = plt.subplots(1, len(policies), figsize=(5 * len(policies), 4), sharey=True, squeeze=False)
    for ax, policy in zip(axes[0], policies, strict=True):
        report = runs[policy][0]
        for query in queries:
            timeline = report["queries"].get(query.key, {}).get("timeline", [])
            ax.plot([t for t, _, _ in timeline], [lats[0] for _, _, lats in timeline], label=query.key, linewidth=1)
        ax.set_title(f"{policy} (first repeat)")
        ax.set_xlabel("seconds")
        ax.set_yscale("log")
    axes[0][0].set_ylabel("max latency per batch (ms)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"fifo": ":", "fair": "--", "cameo": "-", AUTO: "-.", LANE: (0, (1, 3))}
    for policy in policies:
        for query in queries:
            timelines = [r["queries"].get(query.key, {}).get("timeline", []) for r in runs[policy]]
            sample = sorted(x for tl in timelines for x in _weighted(tl, 0, 1e12))
            total = sum(w for _, w in sample)
            if not total:
                continue
            xs, ys, seen = [], [], 0.0
            for value, weight in sample:
                seen += weight
                xs.append(value)
                ys.append(seen / total)
            ax.plot(xs, ys, linestyle=styles.get(policy, "-"), label=f"{policy} {query.key}", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("share of rows")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "cdf.png", dpi=110)
    plt.close(fig)


TARGETS = ("local", "node")
"""Where a scenario runs: `sluice run` on this machine, or a pool on the one-node Kubernetes."""
NODE_VARIANTS = (*POLICIES, AUTO)
"""What a pool's spec can ask for (`auto-lane`, a second application, has no pool equivalent)."""


def check_target(target: str, policies: list[str], urgent_lane: str, gates: list[str] | None = None,
                 executors: int | None = None, jits: list[str] | None = None, warmup: str | None = None,
                 start_warmup: str | None = None, urgent_reserve: int | None = None,
                 bulk_tasks: int | None = None) -> None:
    """One sentence (a ScenarioError) for what the node target cannot run, or a gate unknown."""
    if target not in TARGETS:
        raise ScenarioError(f"--target: use local or node (got {target!r}).")
    if warmup is not None and target != "node":
        raise ScenarioError("--executor-warmup: only a pool's executors warm up before urgent work; add --target node.")
    if start_warmup is not None and target != "node":
        raise ScenarioError("--start-warmup: only a pool's runtime warms up before it serves; add --target node.")
    if urgent_reserve is not None and target != "node":
        raise ScenarioError("--urgent-reserve: only a pool's executor pods hold bulk turns back; add --target node.")
    if bulk_tasks is not None and target != "node":
        raise ScenarioError("--bulk-tasks: it sets a pool's spec.executor.bulkTasks; add --target node.")
    if jits is not None and jits != [EXECUTOR_JIT]:
        if not jits or any(j not in EXECUTOR_JITS for j in jits) or len(set(jits)) != len(jits):
            raise ScenarioError(f"--executor-jit: use some of {', '.join(EXECUTOR_JITS)}, each once "
                                f"(got {','.join(jits)!r}).")
        if executors is None and target == "local":
            raise ScenarioError("--executor-jit: locally executors have JVMs of their own only on local-cluster; "
                                "add --executors N.")
    if executors is not None and target == "node":
        raise ScenarioError("--executors: the node target's pool sizes itself (DS2); leave --executors out with "
                            "--target node.")
    if executors is not None and LANE in policies:
        raise ScenarioError(f"--executors: {LANE} runs its Real-time queries in an application of their own on "
                            "local[*]; leave it out of --policies with --executors.")
    if gates is not None and (not gates or any(g not in GATES for g in gates) or len(set(gates)) != len(gates)):
        raise ScenarioError(f"--gate: use inprocess, sidecar or inprocess,sidecar (got {','.join(gates)!r}).")
    if target != "node":
        return
    if gates is not None and gates != ["inprocess"]:
        raise ScenarioError("--gate: on the node target the gate always asks the pool's sidecar; leave --gate out.")
    if any(p not in NODE_VARIANTS for p in policies):
        raise ScenarioError(f"--policies: the node target runs {', '.join(NODE_VARIANTS)} (a pool's spec.policy, or "
                            "auto for cameo with each query's own execution mode); leave auto-lane out.")
    if urgent_lane != "gated":
        raise ScenarioError(f"--urgent-lane {urgent_lane}: a pool gives its urgent lane to gated policies only "
                            "(bulk turns in each executor, no raised priorities in pods); leave --urgent-lane out "
                            "with --target node.")


def run(scenario_path: Path, policies: list[str], repeat: int, out: Path, log: Any = print,
        urgent_lane: str = "gated", delivery: Delivery | None = None, target: str = "local",
        node: Any = None, gates: list[str] | None = None, executors: int | None = None,
        jits: list[str] | None = None, duration: float | None = None, warmup: str | None = None,
        start_warmup: str | None = None, urgent_reserve: int | None = None,
        bulk_tasks: int | None = None) -> dict[str, Any]:
    """`node`: a `bench.node.NodeTarget` to run on (tests pass their cluster's); with `target`
    node and none given, the benchmark opens one (`bench.node.open_target`). `gates` (local):
    each gated policy runs once per gate, `cameo` in-process and `cameo+sidecar` over HTTP.
    `executors` (local): every run on Spark's local-cluster with that many one-core executors;
    `jits` (with `executors`, or on the node): every variant once per executor JIT choice
    (`cameo+c1`, ...); `duration`: the judged window in place of the scenario's (seconds);
    `warmup` (node): every pool's `spec.executor.warmup`; `start_warmup` (node): its `spec.startWarmup`;
    `urgent_reserve` (node): its `spec.executor.urgentReserve`; `bulk_tasks` (node): its
    `spec.executor.bulkTasks`."""
    from sluice.testing.kafka import KafkaBroker

    from . import node as on_node

    scenario, queries = load_scenario(scenario_path)
    if duration is not None:
        scenario = scenario.model_copy(update={"duration": Duration.parse(f"{duration:g}s")})
    check_delivery(scenario_path, queries, delivery)
    gates = gates or ["inprocess"]
    jits = jits or [EXECUTOR_JIT]
    check_target(target, policies, urgent_lane, gates, executors, jits, warmup, start_warmup, urgent_reserve,
                 bulk_tasks)
    if target == "node" and delivery is not None:
        raise ScenarioError("--delivery: the node target runs the scenario's own sinks; leave --delivery out.")
    out.mkdir(parents=True, exist_ok=True)
    chosen = with_jits(variants(policies, gates), jits)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _, _ in chosen}

    def each(one: Any) -> None:
        for r in range(repeat):
            order = chosen[r % len(chosen):] + chosen[: r % len(chosen)]  # interleave
            log(f"repeat {r + 1}/{repeat}: {', '.join(name for name, _, _, _ in order)}")
            for name, policy, gate, jit in order:
                runs[name].append(one(policy, gate, jit, out / "runs" / f"{name}-{r}"))

    placement = Placement(target, reason="not yet made")
    broker_warmup: dict[str, Any] = {}
    try:
        if target == "node":
            with contextlib.ExitStack() as stack:
                if node is None:
                    node = stack.enter_context(on_node.open_target(None, log))
                proc = node.broker.proc
                node.placement = placement = placed(target, proc.pid if proc is not None else None, log)
                broker_warmup = warm_broker(node.broker, scenario, log)
                each(lambda policy, gate, jit, folder: on_node.run_once(scenario, queries, policy, node, folder, log,
                                                                        jit, warmup, start_warmup, urgent_reserve,
                                                                        bulk_tasks))
        else:
            shutil.rmtree(out / "kafka", ignore_errors=True)  # the last benchmark's broker data: scratch
            broker = KafkaBroker(out / "kafka").start()
            placement = placed(target, broker.proc.pid if broker.proc is not None else None, log)
            log(f"kafka ready at {broker.bootstrap}")
            try:
                broker_warmup = warm_broker(broker, scenario, log)
                each(lambda policy, gate, jit, folder: run_once(scenario, queries, policy, broker, folder, log,
                                                                urgent_lane, delivery, gate, executors, placement, jit))
            finally:
                broker.stop()
    finally:
        placement.close()
    summary = summarize(runs, scenario, queries)
    document = {"policies": summary["policies"], "burst_p99_ms": summary["burst"], "scenario": scenario.name,
                "repeat": repeat, "duration_s": scenario.duration.seconds, "target": target, "urgent_lane": urgent_lane,
                "delivery": delivery or "scenario", "broker_warmup": broker_warmup,
                "gate": "sidecar" if target == "node" else ",".join(gates), "gate_ask_ms": gate_ask(runs),
                "drain_s": drain_seconds(queries),
                "latency_end": {"sink read": "a read_committed consumer of the sink topic stamps each output record's "
                                             "arrival (Kafka sinks whose output keeps seq)",
                                "commit": "the batch's commit (every other query)"}}
    extra = [f"{name} {key}: gate ask (besides queueing) p50 {ms['p50']} ms, p90 {ms['p90']} ms"
             for name, per in document["gate_ask_ms"].items() for key, ms in per.items() if ms]
    if executors is not None:  # every run's Spark master (each report's `spark.master` too)
        document["local_cluster"] = local_cluster(executors)
    if target == "node":
        document["executor_warmup"] = warmup or f"the pool's default ({EXECUTOR_WARMUP})"
        document["start_warmup"] = start_warmup or f"the pool's default ({START_WARMUP})"
        document["urgent_reserve"] = (f"the pool's default ({URGENT_RESERVE})" if urgent_reserve is None
                                      else urgent_reserve)
        document["bulk_tasks"] = "the pool's default (its cores)" if bulk_tasks is None else bulk_tasks
    if executors is not None or target == "node":
        document["executor_jit"] = {name: jit for name, _, _, jit in chosen}
        extra += jit_lines(runs, document["executor_jit"])
    # the cores the runs had (node: the pool's pods), and what the rest of the machine took
    document["machine"] = {p: [r.get("machine") for r in reports] for p, reports in runs.items()}
    document["placement"] = {p: [(r.get("machine") or {}).get("placement") for r in reports] for p, reports in runs.items()}
    if target == "node":
        document["executors"] = {p: [r.get("executors", []) for r in reports] for p, reports in runs.items()}
        document["status_vs_harness"] = {p: [{k: {"status": v.get("status_at_load_end"),
                                                  "harness": v.get("harness_at_load_end")}
                                              for k, v in r["queries"].items()} for r in reports]
                                         for p, reports in runs.items()}
        document["urgent_lane_status"] = {p: [r.get("urgent_lane", "") for r in reports] for p, reports in runs.items()}
        document["joins"] = {p: [r.get("joins", []) for r in reports] for p, reports in runs.items()}
        document["scalings"] = {p: [r.get("scalings", []) for r in reports] for p, reports in runs.items()}
        document["warm_after_join_s"] = {p: [r.get("warm_after_join_s", []) for r in reports] for p, reports in runs.items()}
        document["after_joins"] = {p: [{q.key: on_node.join_figures(r["queries"][q.key]["timeline"], r.get("joins", []),
                                                                   q.spec.sla.latencyTarget.ms)
                                        for q in queries if q.key in r["queries"]} for r in reports]
                                   for p, reports in runs.items()}
        extra += on_node.status_lines(runs, queries)
        extra += on_node.join_lines(runs, queries, [s.critical for s in scenario.queries])
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    plot(runs, summary, queries, out)
    return {"summary": summary, "table": render_table(summary, queries), "ratios": ratios(summary, scenario, queries),
            "throughput": [*throughput_check(summary, queries), *extra], "scenario": scenario, "queries": queries}

