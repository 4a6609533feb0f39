"""`sluice bench overhead`: what Sluice adds to every micro-batch, against plain Spark, side by side.

One Kafka filter query (the same manifest each time) runs four ways, every one on the same Spark
setup (`local[<cores>]`, the same slots, parallelism and JVM flags; see `spark_setup`):
- `plain`: Spark alone. The query's DataFrame (Sluice's builder, so the same plan, without
  Sluice's latency observation) written with `writeStream.format("noop")`, FIFO scheduling;
- `ungated`: through Sluice's runtime (`QueryHost`) with no scheduler (the `fifo` policy):
  Sluice's JVM sink around Spark's noop sink (`runtime/jvm_sink.py`; with `SLUICE_JVM_SINK=0`,
  foreachBatch), the latency measured inside the write, status and metrics;
- `cameo`: the same, gated by the in-process Cameo scheduler with FAIR bands (one py4j call a
  batch, from the sink to the gate);
- `cameo+urgent`: cameo with the urgent lane as `sluice run` gives it (more slots than cores,
  bulk turns, raised thread priorities): a different Spark setup, so its ratio is reported beside
  the others and never as Sluice's per-batch cost.

Each run is a fresh process (a fresh JVM) reading a fresh topic that the load generator fills at a
fixed rate; the modes take turns within a round and the order rotates between rounds, so drift of
the machine hits all of them alike. Spark's own progress reports give each batch's
`triggerExecution` (the whole batch) and `addBatch` (the sink's part); batches of the warm-up are
left out. The figure to quote is the median over rounds of each round's median ratio to plain.

`--sink kafka` measures the Kafka deliveries instead, writing each row to a topic: `plain` is
Spark's own Kafka writer; `atLeastOnce` and `exactlyOnce` run through Sluice's runtime gated by
Cameo (as `cameo` above), with the sink's `delivery` set: Spark's Kafka writer inside Sluice's
sink, or Sluice's transactional writer. The figure to quote there is exactlyOnce/atLeastOnce.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from sluice.api.constants import API_VERSION
from sluice.api.manifest import load_query
from sluice.api.units import Duration

MODES = ("plain", "ungated", "cameo", "cameo+urgent")
GATED = ("cameo", "cameo+urgent", "atLeastOnce", "exactlyOnce")
"""The modes whose batches ask the in-process Cameo scheduler."""
KAFKA_MODES = ("plain", "atLeastOnce", "exactlyOnce")
"""The modes of `--sink kafka`: Spark's Kafka writer, then Sluice's sink (gated) with each delivery."""
SINKS = ("noop", "kafka")
PHASES = ("triggerExecution", "addBatch")
GOAL = 1.10
"""The median cameo/plain ratio of triggerExecution Sluice must stay within."""


@dataclass(frozen=True)
class Options:
    rounds: int = 3
    seconds: float = 60.0
    """Measured seconds per run (after the warm-up)."""
    warmup: float = 20.0
    """Seconds of each run left out (JIT, the first backlog)."""
    rate: float = 1000.0
    """Events per second produced."""
    trigger: str = "500ms"
    sink: str = "noop"
    """noop (the modes of MODES) or kafka (KAFKA_MODES)."""
    only: tuple[str, ...] = ()
    """Run only these of the sink's modes (plain always among them); empty: all of them."""

    @property
    def modes(self) -> tuple[str, ...]:
        every = KAFKA_MODES if self.sink == "kafka" else MODES
        return tuple(m for m in every if m in self.only) if self.only else every


def check_modes(chosen: tuple[str, ...], sink: str) -> str | None:
    """One sentence naming what is wrong with `--modes` for `sink`, or None."""
    every = KAFKA_MODES if sink == "kafka" else MODES
    unknown = [m for m in chosen if m not in every]
    if unknown:
        return f"--modes: {', '.join(unknown)} is not a mode of --sink {sink}; use some of {', '.join(every)}."
    if chosen and "plain" not in chosen:
        return "--modes: include plain, the baseline every ratio divides by."
    return None


@dataclass(frozen=True)
class SparkSetup:
    """How a run's Spark session is built: what must be equal across the modes of a ratio."""

    master: str
    scheduling: str
    urgent_lane: bool
    bulk_tasks: int


def spark_setup(mode: str, cores: int) -> SparkSetup:
    """Every mode on `local[cores]` with Spark's default parallelism and no lane, except
    `cameo+urgent`, which takes the lane as `sluice run` gives a gated pool. Gated modes schedule
    FAIR (their bands are fair pools); with one query, FAIR and FIFO run its tasks alike."""
    from sluice.runtime.session import lane_for

    gated = mode in GATED
    lane = lane_for(gated, True, cores) if mode == "cameo+urgent" else lane_for(False, True, cores)
    return SparkSetup(master=f"local[{lane.slots}]", scheduling="FAIR" if gated else "FIFO",
                      urgent_lane=lane.on, bulk_tasks=lane.bulk_tasks)


def manifest(bootstrap: str, topic: str, trigger: str, mode: str = "plain", sink: str = "noop") -> dict[str, Any]:
    """The measured query: a Kafka filter with a noop sink, or with a Kafka sink (`<topic>-out`)
    whose delivery is the mode's (`--sink kafka`)."""
    written: dict[str, Any] = {"type": "noop"}
    if sink == "kafka":
        written = {"type": "kafka", "bootstrapServers": bootstrap, "topic": f"{topic}-out"}
        if mode in KAFKA_MODES[1:]:
            written["delivery"] = mode
    return {
        "apiVersion": API_VERSION, "kind": "StreamingQuery",
        "metadata": {"name": "filter", "namespace": "overhead"},
        "spec": {
            "pool": "bench",
            "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "startingOffsets": "earliest",
                       "schema": "key STRING, seq BIGINT, produced_at TIMESTAMP, amount DOUBLE"},
            "pipeline": [{"filter": "amount > 500"}, {"select": ["key", "seq", "amount"]}],
            "sink": written, "sla": {"latencyTarget": "2s"}, "trigger": {"interval": trigger},
        },
    }


# ---------------------------------------------------------------- one run (a fresh process)

def run_child(mode: str, manifest_path: Path, seconds: float, warmup: float, report: Path, trigger: str) -> None:
    """Run the query one way for warm-up + seconds and write its batches' phase times to `report`."""
    from sluice.api.query import KafkaSink
    from sluice.runtime.host import QueryHost
    from sluice.runtime.pipeline import build, kafka_options, kafka_records, spark_name
    from sluice.runtime.session import SessionConfig, build_session
    from sluice.scheduler.core import Scheduler
    from sluice.scheduler.local import LocalScheduler

    query = load_query(yaml.safe_load(manifest_path.read_text()))
    workdir = Path(tempfile.mkdtemp(prefix=f"sluice-overhead-{mode}-"))
    gated = mode in GATED
    setup = spark_setup(mode, os.cpu_count() or 2)
    spark = build_session(SessionConfig(
        master=setup.master, scheduling=setup.scheduling, kafka=True, workdir=workdir,
        urgent_lane=setup.urgent_lane, bulk_tasks=setup.bulk_tasks,
        extra={"spark.sql.streaming.numRecentProgressUpdates": "10000"}))
    host = None
    if mode == "plain":
        plan = build(spark, query, measured=False)
        sink = query.spec.sink
        frame, options = ((kafka_records(plan.frame), kafka_options(sink)) if isinstance(sink, KafkaSink)
                          else (plan.frame, {}))
        handle = (frame.writeStream.queryName(spark_name(query.key)).outputMode(plan.output_mode)
                  .option("checkpointLocation", str(workdir / "checkpoint"))
                  .format("kafka" if isinstance(sink, KafkaSink) else "noop").options(**options)
                  .trigger(processingTime=f"{int(Duration.parse(trigger).ms)} milliseconds").start())
    else:
        gate = LocalScheduler(Scheduler("cameo", capacity=4)) if gated else None
        host = QueryHost(spark, workdir / "checkpoints", gate, measure_from=math.inf)
        hosted = host.add(query)
        if hosted.phase != "Running":
            raise SystemExit(f"the query did not start: {hosted.message}")
        handle = hosted.handle
    # the warm-up counts from the first batch that read rows, not from the session's start: a
    # slow JVM start or a producer still waiting for its broker must not eat the measured window
    measured_from = first_rows(handle, timeout=FIRST_ROWS_TIMEOUT) + warmup
    if host is not None:
        host.measure_from = measured_from
    time.sleep(max(0.0, measured_from + seconds - time.time()))
    batches = [  # every phase Spark reports (PHASES first: the summary reads those)
        {"batchId": int(p.batchId), "rows": int(p.numInputRows),
         **{phase: float((p.durationMs or {}).get(phase, 0.0)) for phase in PHASES},
         **{phase: float(ms) for phase, ms in (p.durationMs or {}).items() if phase not in PHASES}}
        for p in handle.recentProgress
        if _epoch(p.timestamp) >= measured_from and int(p.numInputRows) > 0
    ]
    path = "plain" if host is None else ("jvm-sink" if host.direct else "foreachBatch")
    latency = None
    if host is not None:
        status = host.status(query.key)
        latency = {"p50_ms": status.p50_ms, "p99_ms": status.p99_ms, "attainment": status.attainment}
        host.stop_all()
    else:
        handle.stop()
    report.write_text(json.dumps({"mode": mode, "path": path, "setup": asdict(setup), "batches": batches,
                                   "latency": latency}) + "\n")
    spark.stop()


FIRST_ROWS_TIMEOUT = 180.0
"""Seconds a run waits for its query's first batch with rows before it fails."""


def first_rows(handle: Any, timeout: float) -> float:
    """When the query's first batch that read rows ended (epoch seconds); waits up to `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for p in handle.recentProgress:
            if int(p.numInputRows) > 0:
                return _epoch(p.timestamp) + float((p.durationMs or {}).get("triggerExecution", 0.0)) / 1000
        time.sleep(0.2)
    raise SystemExit(f"the query read no row in {timeout:.0f} s: is the producer reaching the broker?")


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# ---------------------------------------------------------------- the benchmark

def summarize(runs: list[dict[str, Any]], all_modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """Per mode: median and p90 of each phase over every measured batch; per round: ratios to plain
    (and, with the Kafka modes, exactlyOnce to atLeastOnce)."""
    modes: dict[str, Any] = {}
    for mode in all_modes:
        batches = [b for r in runs if r["mode"] == mode for b in r["batches"]]
        if not batches:
            continue
        modes[mode] = {"batches": len(batches)}
        for phase in PHASES:
            values = sorted(b[phase] for b in batches)
            modes[mode][phase] = {"median_ms": statistics.median(values), "p90_ms": values[int(0.9 * (len(values) - 1))]}
    rounds: list[dict[str, Any]] = []
    for number in sorted({r["round"] for r in runs}):
        medians = {r["mode"]: {phase: statistics.median([b[phase] for b in r["batches"]]) for phase in PHASES}
                   for r in runs if r["round"] == number and r["batches"]}
        plain = medians.get("plain")
        ratios = {f"{mode}/plain": {phase: round(m[phase] / plain[phase], 3) for phase in PHASES if plain[phase] > 0}
                  for mode, m in medians.items() if mode != "plain" and plain}
        once, least = medians.get("exactlyOnce"), medians.get("atLeastOnce")
        if once and least:
            ratios["exactlyOnce/atLeastOnce"] = {phase: round(once[phase] / least[phase], 3) for phase in PHASES
                                                 if least[phase] > 0}
        rounds.append({"round": number, "median_ms": medians, "ratios": ratios})
    overall = {}
    names = [f"{mode}/plain" for mode in all_modes[1:]]
    if all_modes == KAFKA_MODES:
        names.append("exactlyOnce/atLeastOnce")
    for name in names:
        per_round = [r["ratios"][name]["triggerExecution"] for r in rounds
                     if name in r["ratios"] and "triggerExecution" in r["ratios"][name]]
        if per_round:
            overall[name] = {"median": round(statistics.median(per_round), 3), "min": min(per_round), "max": max(per_round)}
    latency = {mode: [r["latency"] for r in runs if r["mode"] == mode and r["latency"]] for mode in all_modes[1:]}
    setups = {r["mode"]: r["setup"] for r in runs if "setup" in r}  # what each ratio's sides ran on
    return {"modes": modes, "rounds": rounds, "triggerExecution_ratio": overall, "latency": latency, "setups": setups}


def render(summary: dict[str, Any]) -> str:
    lines = [f"{'mode':12} {'batches':>7} {'trigger p50':>11} {'trigger p90':>11} {'addBatch p50':>12} {'addBatch p90':>12}"]
    for mode, row in summary["modes"].items():
        t, a = row["triggerExecution"], row["addBatch"]
        lines.append(f"{mode:12} {row['batches']:>7} {t['median_ms']:>9.0f}ms {t['p90_ms']:>9.0f}ms "
                     f"{a['median_ms']:>10.0f}ms {a['p90_ms']:>10.0f}ms")
    lines.append("")
    for r in summary["rounds"]:
        ratios = ", ".join(f"{k} {v.get('triggerExecution', float('nan')):.2f}x (addBatch {v.get('addBatch', float('nan')):.2f}x)"
                           for k, v in r["ratios"].items())
        lines.append(f"round {r['round'] + 1}: {ratios}")
    for name, ratio in summary["triggerExecution_ratio"].items():
        met = "met" if ratio["median"] <= GOAL else "missed"
        verdict = f" (goal <= {GOAL:.2f}: {met})" if name in ("cameo/plain", "exactlyOnce/atLeastOnce") else ""
        lines.append(f"median {name} triggerExecution: {ratio['median']:.2f}x over rounds "
                     f"(spread {ratio['min']:.2f}-{ratio['max']:.2f}){verdict}")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], summary: dict[str, Any], out: Path, all_modes: tuple[str, ...] = MODES) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, phase in zip(axes, PHASES, strict=True):
        data = [[b[phase] for r in runs if r["mode"] == mode for b in r["batches"]] for mode in all_modes]
        present = [(mode, d) for mode, d in zip(all_modes, data, strict=True) if d]
        ax.boxplot([d for _, d in present], showfliers=False)
        ax.set_xticks(range(1, len(present) + 1), [m for m, _ in present])
        ax.set_title(f"{phase} per batch (ms)")
        ax.set_ylabel("ms")
        ax.grid(axis="y", alpha=0.3)
    name = "exactlyOnce/atLeastOnce" if all_modes == KAFKA_MODES else "cameo/plain"
    ratio = summary["triggerExecution_ratio"].get(name, {}).get("median")
    fig.suptitle("Sluice's per-batch cost against plain Spark" + (f": {name} {ratio:.2f}x" if ratio else ""))
    fig.tight_layout()
    fig.savefig(out / "overhead.png", dpi=110)
    plt.close(fig)


def run(options: Options, out: Path, log: Any = print) -> dict[str, Any]:
    """Every round runs each mode once, in a fresh process; writes results.json and overhead.png."""
    from sluice.testing.kafka import KafkaBroker
    from sluice.testing.load import LoadPlan, generate

    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "kafka", ignore_errors=True)
    shutil.rmtree(out / "runs", ignore_errors=True)
    broker = KafkaBroker(out / "kafka").start()
    log(f"kafka ready at {broker.bootstrap}")
    runs: list[dict[str, Any]] = []
    try:
        for number in range(options.rounds):
            modes = options.modes
            order = modes[number % len(modes):] + modes[: number % len(modes)]
            log(f"round {number + 1}/{options.rounds}: {', '.join(order)}")
            for mode in order:
                folder = out / "runs" / f"{mode}-{number}"
                folder.mkdir(parents=True)
                topic = broker.create_topic(f"overhead-{uuid.uuid4().hex[:8]}", partitions=2)
                if options.sink == "kafka":
                    broker.create_topic(f"{topic}-out", partitions=2)
                (folder / "query.yaml").write_text(yaml.safe_dump(
                    manifest(broker.bootstrap, topic, options.trigger, mode, options.sink)))
                stop = threading.Event()
                sent: dict[str, Any] = {}

                def produce(plan: LoadPlan, into: dict[str, Any], stop: threading.Event = stop) -> None:
                    into.update(generate(plan, broker.bootstrap, stop.is_set))

                producer = threading.Thread(target=produce, args=(LoadPlan(topic, options.rate), sent), daemon=True)
                producer.start()
                child = subprocess.run(
                    [sys.executable, "-m", "sluice.bench.overhead", mode, str(folder / "query.yaml"),
                     str(options.seconds), str(options.warmup), str(folder / "report.json"), options.trigger],
                    stdout=subprocess.DEVNULL, stderr=(folder / "run.log").open("wb"),
                    timeout=options.seconds + options.warmup + 300, check=False)
                stop.set()
                producer.join(60)
                if child.returncode != 0 or not (folder / "report.json").exists():
                    tail = (folder / "run.log").read_text(errors="replace").strip().splitlines()[-3:]
                    raise RuntimeError(f"the {mode} run failed (exit {child.returncode}): {' / '.join(tail)}")
                result = json.loads((folder / "report.json").read_text())
                result.update(round=number, sent=sent.get("sent", 0))
                runs.append(result)
                times = sorted(b["triggerExecution"] for b in result["batches"])
                log(f"  {mode}: {len(times)} batches, triggerExecution median "
                    f"{statistics.median(times) if times else float('nan'):.0f} ms")
    finally:
        broker.stop()
    summary = summarize(runs, options.modes)
    (out / "results.json").write_text(json.dumps({"options": asdict(options), **summary, "runs": runs}, indent=2) + "\n")
    plot(runs, summary, out, options.modes)
    table = render(summary)
    (out / "summary.txt").write_text(table + "\n")
    return {"summary": summary, "table": table}


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    """The table and overhead.png again from an earlier run's results.json (its runs' batches)."""
    document = json.loads(results.read_text())
    modes = tuple(document["options"].get("modes") or MODES)
    out.mkdir(parents=True, exist_ok=True)
    plot(document["runs"], document, out, modes)
    return document, render(document)


if __name__ == "__main__":  # a child run: MODE MANIFEST SECONDS WARMUP REPORT TRIGGER
    mode_, manifest_, seconds_, warmup_, report_, trigger_ = sys.argv[1:7]
    run_child(mode_, Path(manifest_), float(seconds_), float(warmup_), Path(report_), trigger_)
