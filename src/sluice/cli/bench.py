"""`sluice bench`: every benchmark; each prints a table (`--json` for scripts) and writes results.json and summary.txt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click

from sluice.api.constants import EXECUTOR_JIT
from sluice.api.query import Delivery
from sluice.cli import bench_scaling
from sluice.cli.common import (
    BULK_TASKS_OPTION,
    EXIT_USAGE,
    TARGET_OPTION,
    URGENT_LANE_OPTION,
    DurationParam,
    aliased,
    calibrate_now,
    calibrate_option,
    fail,
    from_results_option,
    json_option,
    print_result,
    rerender,
    seconds_alias,
)


@click.group()
def bench() -> None:
    """Benchmarks (each prints a table; --json for scripts)."""


@bench.command("scheduler")
@click.option("--clients", type=click.IntRange(1, 256), default=8, show_default=True, help="Concurrent client processes.")
@click.option("--duration", "seconds", type=DurationParam(0.5, 3600), default="5s", show_default=True,
              help="Measured duration.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(0.5, 3600), hidden=True,
              callback=seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@json_option
@click.option("--core-queries", type=click.IntRange(1, 1_000_000), default=10_000, show_default=True,
              help="Registered queries for the pure-core decision timing.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/scheduler", show_default=True,
              help="Writes results.json and summary.txt here.")
@click.pass_context
def bench_scheduler(ctx: click.Context, clients: int, seconds: float, old_seconds: float | None, as_json: bool,
                    core_queries: int, out: str) -> None:
    """Grants/s and round-trip latency of the real sidecar on loopback, and one core decision."""
    import json

    seconds = aliased(ctx, "--duration", seconds)

    from sluice.bench import scheduler as scheduler_bench

    click.echo(f"running {clients} client(s) for {seconds:g}s against a real sidecar on loopback ...", err=True)
    try:
        result = scheduler_bench.run(clients, seconds, core_queries)
    except RuntimeError as error:
        fail(f"benchmark failed: {error}")
    summary = scheduler_bench.table([result])
    click.echo(json.dumps(result.json()) if as_json else summary)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(result.json(), indent=2) + "\n")
    (folder / "summary.txt").write_text(summary + "\n")
    click.echo(f"wrote {folder}/results.json, {folder}/summary.txt", err=True)


@bench.command("calibrate")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/calibrate", show_default=True,
              help="Writes results.json (the machine speed) and summary.txt here.")
@click.option("--save-reference", is_flag=True,
              help="Also keep this measurement as the reference every benchmark compares with "
                   "(bench/results/calibrate-reference.json).")
@click.option("--repeat", type=click.IntRange(1, 10), default=1, show_default=True,
              help="Measure this many times; each timing's median, with its min and max under spread.")
@json_option
def bench_calibrate(out: str, save_reference: bool, repeat: int, as_json: bool) -> None:
    """This machine's speed now: a fixed reference of about a minute (a Python loop, Spark
    micro-batches, Kafka round trips) timed and compared with the kept reference; every Spark
    benchmark records it."""
    import json

    from sluice.bench import calibrate as calibration
    from sluice.testing.kafka import KafkaUnavailable

    try:
        result = calibration.speed(log=lambda m: click.echo(m, err=True), times=repeat)
    except (RuntimeError, KafkaUnavailable) as error:
        fail(str(error))
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    if save_reference:
        kept = {k: v for k, v in result.items() if k not in ("reference_at", "vs_reference")}
        calibration.REFERENCE.write_text(json.dumps(kept, indent=2) + "\n")
        click.echo(f"kept as the reference: {calibration.REFERENCE}", err=True)
    summary = calibration.render(result)
    (folder / "summary.txt").write_text(summary + "\n")
    print_result(as_json, result, summary)
    click.echo(f"wrote {folder}/results.json, {folder}/summary.txt", err=True)


@bench.command("overhead")
@click.option("--rounds", type=click.IntRange(3, 50), default=3, show_default=True,
              help="Rounds; each runs every mode once, in fresh processes.")
@click.option("--duration", "seconds", type=DurationParam(10, 3600), default="60s", show_default=True,
              help="Measured time per run.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(10, 3600), hidden=True,
              callback=seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@click.option("--warmup", type=DurationParam(0, 600, legacy=True), default="20s", show_default=True,
              help="Left out at each run's start.")
@click.option("--rate", type=click.FloatRange(1, 1e6), default=1000, show_default=True, help="Kafka events per second.")
@click.option("--trigger", type=DurationParam(0.001, 3600), default="500ms", show_default=True, help="The query's micro-batch interval.")
@click.option("--sink", type=click.Choice(["noop", "kafka"]), default="noop", show_default=True,
              help="kafka: rows written to a topic by Spark's Kafka writer, and by Sluice's sink at least once "
                   "and exactly once (gated), side by side.")
@click.option("--modes", default="", help="Comma-separated modes to run (plain among them); default: every mode "
              "of the sink: plain, ungated, cameo, cameo+urgent (noop) or plain, atLeastOnce, exactlyOnce (kafka).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/overhead", show_default=True,
              help="Writes results.json, summary.txt, overhead.png and each run's files here.")
@json_option
@click.pass_context
@calibrate_option
@from_results_option
def bench_overhead(ctx: click.Context, rounds: int, seconds: float, old_seconds: float | None, warmup: float, rate: float,
                   trigger: float, sink: str, modes: str, out: str, as_json: bool, from_results: str | None) -> None:
    """Sluice's per-batch cost against plain Spark: one Kafka filter query run each way, side by side,
    on the same Spark setup (cameo+urgent, the lane's own setup, reported beside)."""
    from sluice.bench import overhead
    from sluice.testing.kafka import KafkaUnavailable

    if from_results is not None:
        rerender(overhead.rerender, from_results, out, as_json)
        return

    seconds = aliased(ctx, "--duration", seconds)
    only = tuple(m.strip() for m in modes.split(",") if m.strip())
    problem = overhead.check_modes(only, sink)
    if problem:
        click.echo(problem, err=True)
        sys.exit(EXIT_USAGE)
    options = overhead.Options(rounds=rounds, seconds=seconds, warmup=warmup, rate=rate, trigger=f"{trigger * 1000:g}ms", sink=sink,
                               only=only)
    calibrate_now()
    try:
        result = overhead.run(options, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    print_result(as_json, result, result["table"])
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/overhead.png", err=True)


@bench.command("cameo")
@click.option("--scenario", type=click.Path(dir_okay=False), required=True, help="Scenario YAML (see bench/scenarios/).")
@click.option("--policies", default="fifo,fair,cameo", show_default=True,
              help="Policies to compare, in micro-batches; add `auto` for cameo with each query's own execution "
                   "mode (Real-time Mode where its SLA needs it), and `auto-lane` for the same with the Real-time "
                   "queries in an application of their own.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True, help="Repeats (policies interleaved).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/cameo", show_default=True,
              help="Writes results.json, summary.txt, latency.png, cdf.png and each run's files here.")
@click.option("--delivery", type=click.Choice(["atLeastOnce", "exactlyOnce"]),
              help="Every Kafka sink's `spec.sink.delivery` (default: the scenario's own): the exactly-once cost on "
                   "a scenario, one run per delivery. Under `auto` an exactlyOnce query stays in micro-batches.")
@TARGET_OPTION
@click.option("--gate", "gates", default="inprocess", show_default=True,
              help="Local target: where a gated policy's scheduler runs, in the runtime's process or as a pool pod "
                   "runs it, a sidecar process over HTTP on loopback; `inprocess,sidecar` runs each gated policy "
                   "with both (`cameo` and `cameo+sidecar`) and reports each batch's ask time side by side.")
@click.option("--executors", type=click.IntRange(1, 64),
              help="Local target: every run on Spark's local-cluster with this many one-core executor JVMs "
                   "(`sluice run --executors`; the lane's priorities, not its slots and turns), where the default "
                   "is one local[*] JVM.")
@click.option("--executor-jit", "jits", default=EXECUTOR_JIT, show_default=True,
              help="The executor JVMs' JIT compilers (locally with --executors; on the node the pool's "
                   "spec.executor.jit), each variant once per choice side by side (`tiered,c1,low`: HotSpot's "
                   "default, C1 alone, the default compilers at the bulk tasks' nice; `cameo+c1` and so on in the "
                   "table).")
@click.option("--duration", type=DurationParam(10, 3600),
              help="The judged window after the scenario's warm-up, in place of the scenario's own (its load and "
                   "bursts unchanged): a longer one shows the steady state past the JVMs' warm-up.")
@click.option("--executor-warmup", "warmup", type=DurationParam(0, 300),
              help="Node target: every pool's spec.executor.warmup (a joining executor takes no urgent task until "
                   "it is warm or this long has passed; 0s: off); default: the pool's (60s).")
@click.option("--start-warmup", type=DurationParam(0, 300),
              help="Node target: every pool's spec.startWarmup (its runtime runs synthetic queries this long "
                   "before it serves; 0s: off); default: the pool's (45s).")
@click.option("--urgent-reserve", type=click.IntRange(0, 63),
              help="Node target: every pool's spec.executor.urgentReserve (bulk turns an executor holds back while "
                   "urgent tasks run in it, without thread priorities; 0: off); default: the pool's (0).")
@BULK_TASKS_OPTION
@json_option
@calibrate_option
@URGENT_LANE_OPTION
def bench_cameo(scenario: str, policies: str, repeat: int, out: str, delivery: str | None, target: str,
                gates: str, executors: int | None, jits: str, duration: float | None, warmup: float | None,
                start_warmup: float | None, urgent_reserve: int | None, bulk_tasks: int | None, as_json: bool,
                urgent_lane: str) -> None:
    """Cameo vs Spark's FIFO and FAIR on real Spark with Kafka load: latency per query, side by side."""
    from sluice.api.scenario import ScenarioError, load_scenario
    from sluice.bench import cameo as cameo_bench
    from sluice.bench.scenario_runs import VARIANTS
    from sluice.testing.kafka import KafkaUnavailable

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in VARIANTS]
    if unknown or not chosen:
        fail(f"--policies: use some of {', '.join(VARIANTS)} (got {policies!r}).")
    try:
        sink_delivery = cast("Delivery | None", delivery)  # click's Choice holds the literal's values
        cameo_bench.check_delivery(Path(scenario), load_scenario(Path(scenario))[1], sink_delivery)
        gate_list = [g.strip() for g in gates.split(",") if g.strip()]
        jit_list = [j.strip() for j in jits.split(",") if j.strip()]
        warm = None if warmup is None else f"{warmup:g}s"
        start = None if start_warmup is None else f"{start_warmup:g}s"
        cameo_bench.check_target(target, chosen, urgent_lane, gate_list, executors, jit_list, warm, start,
                                 urgent_reserve, bulk_tasks)
        calibrate_now()
        result = cameo_bench.run(Path(scenario), chosen, repeat, Path(out), log=lambda m: click.echo(m, err=True),
                                 urgent_lane=urgent_lane, delivery=sink_delivery, target=target, gates=gate_list,
                                 executors=executors, jits=jit_list, duration=duration, warmup=warm,
                                 start_warmup=start, urgent_reserve=urgent_reserve, bulk_tasks=bulk_tasks)
    except (ScenarioError, KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    summary = "\n".join([result["table"], "", *result["ratios"], *result["throughput"]])
    print_result(as_json, result, summary)
    (Path(out) / "summary.txt").write_text(summary + "\n")
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/latency.png, {out}/cdf.png", err=True)


for _command in bench_scaling.COMMANDS:
    bench.add_command(_command)
