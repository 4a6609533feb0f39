"""`sluice bench batch-cost`: what one micro-batch costs the pool's runtime in CPU, with Spark's
default settings and with Sluice's, side by side in one run.

The same pool twice, one after the other: the same master (`local[2]`), the same Kafka broker and
load, the same N queries of the density mix (`bench/density.py`: 10% critical 2 s filters, the rest
bulk filters and windowed counts, each with literals of its own unless `--same-shapes`). Each side is
a fresh runtime process (`sluice.runtime`, in-process cameo scheduler); after its queries run and a
warm-up, the window's CPU of the runtime's whole process tree (the JVM, the runtime's Python, the
processes they start) is divided by the micro-batches its queries completed in that window. The
JVM's threads are also read by kind (`procfs.THREAD_KINDS`: stream execution, task, JIT, GC, the
rest), per batch: each thread's own CPU over the window, under the kind its name says at the end
(Spark renames task threads as they take tasks; a stream thread restarted for a new interval is a
new thread); a thread that ended inside the window is left out. Each side's figure and ratio is also
given less its JIT compilers' threads (`WITHOUT_JIT`), which a JVM spends more on the younger it is.

Sides:
  spark-defaults  Sluice's settings that only make batches cheaper reverted to Spark's defaults
                  (`SPARK_DEFAULTS`); what Sluice needs to run at all (its sink, the FAIR pools,
                  the urgent lane) stays on both sides.
  sluice          the runtime as a pool runs it, plus `--conf` settings (to measure one lever).
  sluice+LEVER    one more side for each `--lever` (KEY=VALUE[,KEY=VALUE...]): Sluice's side with
                  those settings as well, so several levers are measured alone (one a side) and
                  together (one side with all of them) in the same run; `ratio_to_sluice` per side.

The machine speed is measured first and recorded in results.json; run it alone: the CPU a side reads
is its own process tree's, but a busy machine stretches the batches it is divided by.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import jfr
from .density import Load, compiles, is_critical, manifest, rate
from .procfs import THREAD_KINDS, ThreadSeries, cpu_seconds, tree

SPARK_DEFAULTS: dict[str, str] = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
    "spark.ui.retainedStages": "1000",
    "spark.ui.retainedJobs": "1000",
    "spark.sql.codegen.cache.maxEntries": "100",
    "spark.sql.streaming.ui.enabled": "true",
    "spark.sluice.driver.gc": "g1",
}
"""Spark 4.2's own values of the settings `runtime/session.py` changes to make a batch cheaper:
adaptive execution (Sluice: off), the checkpoint writer and Hadoop's local filesystem (Sluice:
FileSystem-based on the raw local filesystem, `RAW_LOCAL_FILES`; with Sluice's jar its subclass that
starts no process), the UI's retained stages and jobs (Sluice: 300), the generated-code cache (Sluice:
`CODEGEN_CACHE_ENTRIES`), the streaming UI (Sluice: off) and the driver's collector (the JVM's G1;
Sluice: `DRIVER_GC`)."""
SIDES = ("spark-defaults", "sluice")


REGISTER_TIMEOUT = 600.0
"""Seconds one registration may take to answer (it answers once its query has started)."""
START_LIMIT = 1800.0
"""Seconds a side may take to start all its queries before it is reported stopped."""


@dataclass(frozen=True)
class Options:
    queries: int = 100
    conf: tuple[str, ...] = ()
    """Spark settings (KEY=VALUE) on the `sluice` side."""
    levers: tuple[str, ...] = ()
    """Each one more side: the `sluice` side's settings plus these (KEY=VALUE[,KEY=VALUE...])."""
    warmup: float = 60.0
    """Seconds after the last query runs before the window."""
    same_shapes: bool = False
    """The density mix's queries of a kind with the same literals (`density.literals`)."""
    window: float = 60.0
    master: str = "local[2]"
    jfr: bool = False
    """A Flight Recorder profile of each side's driver JVM over its window (`bench/jfr.py`)."""
    without_defaults: bool = False
    """Leave out the spark-defaults side (its start alone takes 25 minutes at 100 queries): the
    levers against Sluice's side only."""


def lever_settings(lever: str) -> tuple[str, ...]:
    """A `--lever`'s settings: KEY=VALUE pairs separated by commas."""
    return tuple(part.strip() for part in lever.split(",") if part.strip())


def sides(options: Options) -> tuple[str, ...]:
    return (*SIDES, *(f"sluice+{lever}" for lever in options.levers))


def labels(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Each side's short name, in table, plot and folder: its own for the first two, `lever N` after."""
    return {side: side if i < len(SIDES) else f"lever {i - len(SIDES) + 1}" for i, side in enumerate(names)}


def side_conf(side: str, options: Options) -> tuple[str, ...]:
    if side == "spark-defaults":
        return tuple(f"{key}={value}" for key, value in SPARK_DEFAULTS.items())
    if side.startswith("sluice+"):
        return (*options.conf, *lever_settings(side.removeprefix("sluice+")))
    return options.conf


def measure(side: str, options: Options, broker: Any, topics: list[str], out: Path, log: Any) -> dict[str, Any]:
    """One side's figures, or `stopped` (a finding, not a crash) when its runtime could not take or
    run all the queries."""
    from sluice.operator.runtime_client import RuntimeUnreachable

    try:
        return _measure(side, options, broker, topics, out, log)
    except RuntimeUnreachable as error:
        stopped = f"the runtime stopped answering ({error}) while it took or ran {len(topics)} queries"
        log(f"{side}: {stopped}")
        return {"conf": list(side_conf(side, options)), "queries": len(topics), "stopped": stopped}


def profile(recording: Path) -> dict[str, Any]:
    """A side's JFR summary (`jfr.hottest`), or what kept it from being read (the side's figures stand)."""
    try:
        return jfr.hottest(jfr.samples(recording))
    except (jfr.ProfileError, OSError, ValueError, KeyError) as error:
        return {"samples": 0, "error": str(error)}


def _measure(side: str, options: Options, broker: Any, topics: list[str], out: Path, log: Any) -> dict[str, Any]:
    from sluice.testing.runtime_process import RuntimeProcess

    workdir = out / labels(sides(options))[side].replace(" ", "-")  # a lever's own name may be any length
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    conf = side_conf(side, options)
    # a registration returns once its query started; on a saturated side that took over 60 s at ~60
    # queries (Spark's defaults): patience, so each side's cost is measured, and its start time said
    runtime = RuntimeProcess(workdir, master=options.master, conf=conf, timeout=REGISTER_TIMEOUT)
    runtime.start()
    try:
        began = time.monotonic()
        bodies = [manifest(i, broker.bootstrap, topic, options.same_shapes) for i, topic in enumerate(topics)]
        for body in bodies:
            runtime.register(body)
        keys = [f"{body['metadata']['namespace']}/{body['metadata']['name']}" for body in bodies]
        while True:
            statuses = asyncio.run(runtime.client.queries())
            pending = [k for k in keys if k not in statuses or statuses[k].phase == "Pending"]
            if not pending:
                break
            if time.monotonic() - began > START_LIMIT:
                raise RuntimeError(f"{side}: {len(pending)} of {len(keys)} queries still not started after {START_LIMIT:.0f} s")
            time.sleep(1)
        failed = {k: s.message for k, s in statuses.items() if s.phase not in ("Running",)}
        if failed:
            key, message = next(iter(failed.items()))
            raise RuntimeError(f"{side}: {len(failed)} queries did not run ({key}: {message})")
        started = time.monotonic() - began
        log(f"{side}: {len(keys)} queries running after {started:.0f} s; warming up {options.warmup:.0f} s")
        time.sleep(options.warmup)
        before = asyncio.run(runtime.client.queries())
        compiles0 = compiles(runtime.url)
        recording, jvm = None, 0
        if options.jfr:
            try:
                jvm = jfr.jvm_of(runtime.proc.pid)
                jfr.start(jvm, workdir / "profile.jfr")
                recording = workdir / "profile.jfr"
            except jfr.ProfileError as error:
                log(f"{side}: no profile ({error})")
        threads = ThreadSeries()  # each thread's own CPU since the first sample, by its kind at the last
        threads.sample(tree(runtime.proc.pid))
        cpu0, wall0 = cpu_seconds(runtime.proc.pid), time.monotonic()
        log(f"{side}: measuring {options.window:.0f} s")
        time.sleep(options.window)
        cpu1, wall1 = cpu_seconds(runtime.proc.pid), time.monotonic()
        threads.sample(tree(runtime.proc.pid))
        if recording is not None:
            jfr.stop(jvm)
        after = asyncio.run(runtime.client.queries())
        compiles1 = compiles(runtime.url)
    finally:
        runtime.stop()
    batches = sum(s.batches for s in after.values()) - sum(s.batches for s in before.values())
    critical = [k for i, k in enumerate(keys) if is_critical(i)]
    per = max(batches, 1)
    seconds = wall1 - wall0
    return {
        "conf": list(conf), "queries": len(keys), "start_s": round(started), "window_s": round(seconds, 1), "batches": batches,
        "batches_per_s": round(batches / seconds, 2),
        "cores": round((cpu1 - cpu0) / seconds, 3),
        "cpu_ms_per_batch": round(1000 * (cpu1 - cpu0) / per, 1),
        "cpu_ms_per_batch_without_jit": round(1000 * (cpu1 - cpu0 - threads.totals["jit"]) / per, 1),
        "threads_ms_per_batch": {kind: round(1000 * threads.totals[kind] / per, 1) for kind in THREAD_KINDS},
        "codegen_compiles_per_min_per_query": (None if compiles0 is None or compiles1 is None else
                                               round(60 * (compiles1 - compiles0) / seconds / len(keys), 2)),
        "critical_attainment_min": min((a for k in critical if (a := after[k].attainment) is not None), default=None),
        **({"profile": profile(recording)} if recording is not None else {}),
    }


WITHOUT_JIT = "cpu_ms_per_batch_without_jit"
"""A side's CPU per batch less its JIT compilers' threads. How much the compilers still take in
the window depends on the JVM's age there, and a side whose queries took longer to start is
older (100 queries, 2026-12-07: a side started in 324 s spent 6.6 ms a batch compiling, one
started in 166 s 12.1): the ratios are also given without them, like with like."""


def ratio(side: dict[str, Any], against: dict[str, Any], key: str) -> float | None:
    """`side`'s figure over `against`'s, None where either side has none."""
    cost, base = side.get(key), against.get(key)
    return round(cost / base, 3) if cost is not None and base else None


def run(options: Options, out: Path, log: Any = print) -> dict[str, Any]:
    from sluice.testing.kafka import KafkaBroker

    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "kafka", ignore_errors=True)
    broker = KafkaBroker(out / "kafka").start()
    started = time.monotonic()
    load = Load(broker.bootstrap)
    producer = threading.Thread(target=load.run, daemon=True)
    try:
        topics = [broker.create_topic(f"batch-cost-{i:04d}", partitions=1) for i in range(options.queries)]
        for i, topic in enumerate(topics):
            load.add(topic, rate(i))
        producer.start()
        measured: dict[str, dict[str, Any]] = {
            side: {"conf": list(side_conf(side, options)), "left_out": "--without-defaults"}
            if side == "spark-defaults" and options.without_defaults
            else measure(side, options, broker, topics, out, log) for side in sides(options)}
    finally:
        load.stop.set()
        if producer.is_alive():
            producer.join(30)
        broker.stop()
    for side in sides(options)[len(SIDES):]:
        measured[side]["ratio_to_sluice"] = ratio(measured[side], measured["sluice"], "cpu_ms_per_batch")
        measured[side]["ratio_to_sluice_without_jit"] = ratio(measured[side], measured["sluice"], WITHOUT_JIT)
    result = {"sides": measured, "ratio": ratio(measured["sluice"], measured["spark-defaults"], "cpu_ms_per_batch"),
              "ratio_without_jit": ratio(measured["sluice"], measured["spark-defaults"], WITHOUT_JIT),
              "options": asdict(options), "elapsed_s": round(time.monotonic() - started, 1)}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "summary.txt").write_text(render(result) + "\n")
    plot(result, out)
    return result


def plot(result: dict[str, Any], out: Path) -> None:
    """batch-cost.png: each side's CPU per batch, stacked by thread kind (live threads' share) and
    the rest of its process tree (threads that ended within the window, its Python, its children)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = labels(list(result["sides"]))
    shown = [s for s, row in result["sides"].items() if "stopped" not in row and "left_out" not in row]
    ticks = [names[s] for s in shown]
    fig, axis = plt.subplots(figsize=(max(7.0, 1.2 * len(shown) + 3), 4.5))
    bottoms = [0.0] * len(shown)
    for kind in THREAD_KINDS:
        heights = [result["sides"][s]["threads_ms_per_batch"][kind] for s in shown]
        axis.bar(ticks, heights, bottom=bottoms, label=kind)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    other = [max(result["sides"][s]["cpu_ms_per_batch"] - b, 0.0) for s, b in zip(shown, bottoms, strict=True)]
    axis.bar(ticks, other, bottom=bottoms, label="other (ended threads, children)", color="lightgrey")
    axis.set_ylabel("CPU ms per micro-batch")
    ratio = result.get("ratio")
    axis.set_title(f"{result['options']['queries']} queries: Sluice {ratio:.2f}x Spark's defaults" if ratio
                   else f"{result['options']['queries']} queries")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "batch-cost.png", dpi=110)
    plt.close(fig)


def render(result: dict[str, Any]) -> str:
    options = result["options"]
    lines = [f"CPU per micro-batch of the pool's runtime, {options['queries']} queries of the density mix, "
             f"{options['master']}, {options['window']:.0f} s windows",
             f"{'side':<16}{'batches/s':>10}{'cores':>7}{'ms/batch':>10}{'/sluice':>8}{'less jit':>10}{'/sluice':>8}"
             f"{'compiles':>9}   by thread kind (ms/batch)"]
    names = labels(list(result["sides"]))
    levers = [f"{names[side]}: {side.removeprefix('sluice+')}" for side in list(result["sides"])[len(SIDES):]]
    for side, row in result["sides"].items():
        name = names[side]
        if "stopped" in row:
            lines.append(f"{name:<16}stopped: {row['stopped']}")
            continue
        if "left_out" in row:
            lines.append(f"{name:<16}left out ({row['left_out']})")
            continue
        kinds = ", ".join(f"{k} {v}" for k, v in row["threads_ms_per_batch"].items())
        relative = "" if row.get("ratio_to_sluice") is None else f"{row['ratio_to_sluice']:.2f}x"
        less = "-" if row.get(WITHOUT_JIT) is None else f"{row[WITHOUT_JIT]:.1f}"  # results from before it
        less_relative = "" if row.get("ratio_to_sluice_without_jit") is None else f"{row['ratio_to_sluice_without_jit']:.2f}x"
        compiled = "-" if row.get("codegen_compiles_per_min_per_query") is None else f"{row['codegen_compiles_per_min_per_query']:.2f}"
        lines.append(f"{name:<16}{row['batches_per_s']:>10.2f}{row['cores']:>7.2f}{row['cpu_ms_per_batch']:>10.1f}"
                     f"{relative:>8}{less:>10}{less_relative:>8}{compiled:>9}   {kinds}")
    if result["ratio"] is not None:
        without = "" if result.get("ratio_without_jit") is None else f" ({result['ratio_without_jit']:.2f}x less the JIT compilers)"
        lines.append(f"sluice / spark-defaults: {result['ratio']:.2f}x CPU per batch{without}")
    conf = result["sides"]["sluice"]["conf"]
    if conf:
        lines.append("sluice side with: " + ", ".join(conf))
    lines.append("less jit: ms/batch less the JIT compilers' threads (how much they take depends on the JVM's age)")
    lines.append("compiles: Janino's generated classes compiled per minute per query in the window")
    for side, row in result["sides"].items():
        summary = row.get("profile")
        if summary and summary["samples"]:
            areas = ", ".join(f"{area} {share:.0%}" for area, share in summary["areas"].items())
            hot = ", ".join(f"{name.rsplit('.', 2)[-2]}.{name.rsplit('.', 1)[-1]} {share:.0%}"
                            for name, share in summary["top_methods"][:4])
            lines.append(f"{names[side]} JFR, {summary['samples']} samples: on the stack {areas}; on top {hot}")
    if options.get("same_shapes"):
        lines.append("--same-shapes: every query of a kind with the same literals (three pipeline shapes)")
    lines.extend(levers)
    return "\n".join(lines)


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    result = json.loads(results.read_text())
    out.mkdir(parents=True, exist_ok=True)
    text = render(result)
    (out / "summary.txt").write_text(text + "\n")
    plot(result, out)
    return result, text
