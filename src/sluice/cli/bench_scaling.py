"""`sluice bench density|batch-cost|capacity|rescale|ds2|simulate`: how far a pool scales, what a batch
costs it, and how it rescales."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sluice.api.constants import CRITICAL_LANE, RUNTIME_CAPACITY
from sluice.cli.common import (
    BULK_TASKS_OPTION,
    EXIT_USAGE,
    TARGET_OPTION,
    URGENT_LANE_OPTION,
    DurationParam,
    calibrate_now,
    calibrate_option,
    fail,
    from_results_option,
    json_option,
    parse_counts,
    print_result,
    rerender,
)

same_shapes_option = click.option(
    "--same-shapes", is_flag=True,
    help="Every query of a kind with the same literals (three pipeline shapes), not its own thresholds, key and window.")


@click.command("density")
@click.option("--counts", default="1,10,50,100,200,400", show_default=True,
              help="Queries in the shared pool at each step (ascending); stops after the first step that breaks an SLA.")
@click.option("--per-app", default="1,5,10", show_default=True,
              help="Applications of one query each, compared; 'none' skips them (a shared-pool-only run).")
@click.option("--warmup", type=DurationParam(5, 3600, legacy=True), default="45s", show_default=True,
              help="Before each step's window.")
@click.option("--window", type=DurationParam(5, 3600, legacy=True), default="60s", show_default=True,
              help="Measured time per step.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/density", show_default=True,
              help="Writes results.json, summary.txt and density.png here.")
@click.option("--conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting for the shared pool's runtime (repeatable): to measure one change against the default.")
@click.option("--capacity", type=click.IntRange(1, 100_000), default=RUNTIME_CAPACITY, show_default=True,
              help="The shared pool's scheduler capacity: batches granted at once.")
@click.option("--critical-lane", type=click.IntRange(0, 100_000), default=CRITICAL_LANE, show_default=True,
              help="Its slots beyond the capacity, per latency-critical query, that only their batches take (0: none).")
@same_shapes_option
@json_option
@calibrate_option
@from_results_option
def bench_density(counts: str, per_app: str, warmup: float, window: float, out: str, conf: tuple[str, ...],
                  capacity: int, critical_lane: int, same_shapes: bool, as_json: bool, from_results: str | None) -> None:
    """How many tenants' queries one pool holds with every SLA kept, and memory per query against one app each."""
    from sluice.bench import density as density_bench

    if from_results is not None:
        rerender(density_bench.rerender, from_results, out, as_json)
        return

    check_spark_settings(conf)
    options = density_bench.Options(counts=parse_counts(counts, "--counts"),
                                    per_app=() if per_app.strip() == "none" else parse_counts(per_app, "--per-app"),
                                    warmup=warmup, window=window, conf=conf, capacity=capacity,
                                    critical_lane=critical_lane, same_shapes=same_shapes)
    run_pool_bench(density_bench.run, density_bench.render, options, out, as_json, "density.png")


def check_spark_settings(conf: tuple[str, ...], flag: str = "--conf") -> None:
    """`--conf`: each a Spark setting as spark.KEY=VALUE, or one sentence."""
    bad = [c for c in conf if "=" not in c or not c.split("=", 1)[0].startswith("spark.")]
    if bad:
        fail(f"{flag}: give a Spark setting as spark.KEY=VALUE (got {bad[0]!r}).")


def run_pool_bench(run: Callable[..., dict[str, Any]], render: Callable[[dict[str, Any]], str], options: object,
                   out: str, as_json: bool, plot: str) -> None:
    """A pool benchmark's run after its input is checked: the machine speed, the run (a broker that
    will not start or a runtime that fails: one sentence), its table or JSON, the files it wrote."""
    from sluice.testing.kafka import KafkaUnavailable

    calibrate_now()
    try:
        result = run(options, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    print_result(as_json, result, render(result))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/{plot}", err=True)


@click.command("batch-cost")
@click.option("--queries", type=click.IntRange(1, 2000), default=100, show_default=True,
              help="Queries of the density mix in the pool, on both sides.")
@click.option("--conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting on Sluice's side (repeatable): to measure one lever against Spark's defaults.")
@click.option("--lever", "levers", multiple=True, metavar="KEY=VALUE[,KEY=VALUE...]",
              help="One more side (repeatable): Sluice's settings plus these, its CPU per batch against Sluice's side "
                   "in the same run (levers alone, one a side, and together, all on one).")
@click.option("--warmup", type=DurationParam(5, 3600), default="60s", show_default=True,
              help="After a side's last query runs, before its window.")
@click.option("--window", type=DurationParam(5, 3600), default="60s", show_default=True, help="Measured time per side.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/batch-cost", show_default=True,
              help="Writes results.json, summary.txt and batch-cost.png here.")
@click.option("--jfr", is_flag=True,
              help="Record a JDK Flight Recorder profile of each side's driver JVM over its window (profile.jfr in the "
                   "side's folder; the recording's own cost falls on every side alike) and put where its Java "
                   "threads spent their samples in results.json.")
@click.option("--without-defaults", is_flag=True,
              help="Leave out the side with Spark's defaults (at 100 queries its start alone takes about 25 minutes): "
                   "the levers against Sluice's side only.")
@same_shapes_option
@json_option
@calibrate_option
@from_results_option
def bench_batch_cost(queries: int, conf: tuple[str, ...], levers: tuple[str, ...], warmup: float, window: float,
                     out: str, jfr: bool, without_defaults: bool, same_shapes: bool, as_json: bool,
                     from_results: str | None) -> None:
    """CPU per micro-batch of one pool's runtime, with Spark's default settings and with Sluice's, side by side."""
    from sluice.bench import batch_cost

    if from_results is not None:
        rerender(batch_cost.rerender, from_results, out, as_json)
        return
    check_spark_settings(conf)
    for lever in levers:
        settings = batch_cost.lever_settings(lever)
        if not settings:
            fail("--lever: give one or more Spark settings as spark.KEY=VALUE, separated by commas (got an empty one).")
        check_spark_settings(settings, "--lever")
    if len(set(levers)) < len(levers):
        fail("--lever: each lever once (a side per lever).")
    if jfr and (shutil.which("jcmd") is None or shutil.which("jfr") is None):
        fail("--jfr: the JDK's jcmd and jfr are not on PATH; install a JDK (not a JRE) or leave out --jfr.")
    options = batch_cost.Options(queries=queries, conf=conf, levers=levers, warmup=warmup, window=window,
                                 same_shapes=same_shapes, jfr=jfr, without_defaults=without_defaults)
    run_pool_bench(batch_cost.run, batch_cost.render, options, out, as_json, "batch-cost.png")


@click.command("capacity")
@click.option("--scenario", type=click.Path(dir_okay=False), help="Scenario YAML (see bench/scenarios/); required but with --from-results.")
@click.option("--policies", default="fifo,fair,cameo", show_default=True, help="Policies whose capacity is searched.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/capacity", show_default=True,
              help="Writes results.json, summary.txt, capacity.png and each probe's files here.")
@click.option("--max-time", "max_time", type=DurationParam(60, 24 * 3600), default="25m", show_default=True,
              help="Stop here and report the bracket reached (no probe starts that would not end in time).")
@click.option("--max-minutes", "old_minutes", type=click.FloatRange(1, 24 * 60), hidden=True,
              help="Old form of --max-time (minutes as a number).")
@click.option("--max-probes", type=click.IntRange(1, 50), default=12, show_default=True,
              help="Probes per policy at most; at least min(4, this) are made.")
@TARGET_OPTION
@BULK_TASKS_OPTION
@json_option
@calibrate_option
@URGENT_LANE_OPTION
@from_results_option
def bench_capacity(scenario: str | None, policies: str, out: str, max_time: float, old_minutes: float | None,
                   max_probes: int, target: str, bulk_tasks: int | None,
                   as_json: bool, urgent_lane: str, from_results: str | None) -> None:
    """The highest load (one multiplier on every rate) each policy carries with every SLA kept."""
    from sluice.api.scenario import ScenarioError, load_scenario
    from sluice.bench import cameo as cameo_bench
    from sluice.bench import capacity as capacity_bench
    from sluice.bench.capacity_search import Search
    from sluice.bench.scenario_runs import VARIANTS
    from sluice.testing.kafka import KafkaUnavailable

    if from_results is not None:
        rerender(capacity_bench.rerender, from_results, out, as_json)
        return
    if scenario is None:
        fail("--scenario: give the scenario YAML to run (see bench/scenarios/).", EXIT_USAGE)
    if old_minutes is not None:
        click.echo(f"--max-minutes {old_minutes:g} is now --max-time {old_minutes:g}m.", err=True)
    max_minutes = old_minutes if old_minutes is not None else max_time / 60

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in VARIANTS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        fail(f"--policies: use some of {', '.join(VARIANTS)}, each once (got {policies!r}).")
    search = Search(min_probes=min(4, max_probes), max_probes=max_probes)
    try:
        load_scenario(Path(scenario))
        cameo_bench.check_target(target, chosen, urgent_lane, bulk_tasks=bulk_tasks)
        calibrate_now()
        result = capacity_bench.run(Path(scenario), chosen, Path(out), max_minutes, search,
                                    log=lambda m: click.echo(m, err=True), urgent_lane=urgent_lane, target=target,
                                    bulk_tasks=bulk_tasks)
    except (ScenarioError, KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    print_result(as_json, result, capacity_bench.render(result))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/capacity.png", err=True)


@click.command("rescale")
@click.option("--strategies", default="all-at-once,executor-paced,partition-paced", show_default=True,
              help="Rescale strategies compared in the same run.")
@click.option("--stores", default="default,rocksdb", show_default=True,
              help="State store providers: default (HDFS-backed) and rocksdb.")
@click.option("--directions", default="grow,shrink", show_default=True,
              help="The changes measured: grow (2 -> 4 executors) and shrink (4 -> 2).")
@click.option("--keys", type=click.IntRange(1000, 100_000_000), default=None,
              help="Distinct keys in the query's state (preloaded before the change).  [default: 1000000; with "
                   "--state-mb, up to 1000000 so each key's value is at least 256 bytes]")
@click.option("--state-mb", "state_mb", type=click.IntRange(1, 65536), default=None,
              help="The state's size in MiB: each key also keeps a value so that keys x value reach it (with --keys, "
                   "the value is the size over the keys), over 64 state partitions.  [default: counts only]")
@click.option("--rate", type=click.FloatRange(1, 1e6), default=1000, show_default=True, help="Events per second after the preload.")
@click.option("--steady", type=DurationParam(10, 3600, legacy=True), default="40s", show_default=True,
              help="Steady batches before the target changes.")
@click.option("--after", type=DurationParam(10, 3600, legacy=True), default="80s", show_default=True,
              help="How long the run goes on after the change.")
@click.option("--sla", type=DurationParam(0.1, 3600), default="5s", show_default=True,
              help="The query's latency SLA: partition-paced moves state within its slack (the SLA less the "
                   "recent p99), so a state-heavy query needs one it keeps when steady.")
@click.option("--grace", type=DurationParam(1, 3600), default="120s", show_default=True,
              help="How long a shrink drains its leaving executors gracefully before the rest are killed by force: "
                   "from the change, or under partition-paced from the last state partition moved.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/rescale", show_default=True,
              help="Writes results.json, summary.txt, rescale.png and each run's files here.")
@click.option("--from-results", "from_results", type=click.Path(dir_okay=False), default=None,
              help="Run nothing: render the table and plot again from an earlier run's results.json.")
@json_option
@calibrate_option
def bench_rescale(strategies: str, stores: str, directions: str, keys: int | None, state_mb: int | None, rate: float, steady: float,
                  after: float, sla: float, grace: float, out: str, from_results: str | None, as_json: bool) -> None:
    """Megaphone's figure: a stateful query's batches while the pool grows 2->4 and shrinks 4->2 (local-cluster)."""
    from sluice.bench import rescale as rescale_bench
    from sluice.testing.kafka import KafkaUnavailable

    if from_results is not None:
        try:
            document = rescale_bench.rerender(Path(from_results), Path(out))
        except (OSError, ValueError, KeyError, TypeError) as error:
            fail(f"--from-results: {from_results} is no results.json of `sluice bench rescale` ({error}).")
        print_result(as_json, document, rescale_bench.table_text(document["stores"]))
        return

    chosen = [p.strip() for p in strategies.split(",") if p.strip()]
    if not chosen or any(p not in rescale_bench.STRATEGIES for p in chosen):
        fail(f"--strategies: use some of {', '.join(rescale_bench.STRATEGIES)} (got {strategies!r}).")
    providers = [p.strip() for p in stores.split(",") if p.strip()]
    if not providers or any(p not in rescale_bench.STORES for p in providers):
        fail(f"--stores: use some of {', '.join(rescale_bench.STORES)} (got {stores!r}).")
    changes = [d.strip() for d in directions.split(",") if d.strip()]
    if not changes or any(d not in rescale_bench.DIRECTIONS for d in changes):
        fail(f"--directions: use some of {', '.join(rescale_bench.DIRECTIONS)} (got {directions!r}).")
    if state_mb is None:
        options = rescale_bench.Options(keys=keys or rescale_bench.Options.keys, rate=rate, steady=steady, after=after,
                                        sla=f"{sla:g}s", grace=grace)
    else:
        try:
            keys, value_bytes = rescale_bench.sized(state_mb, keys)
        except ValueError as error:
            fail(f"{error}.")
        options = rescale_bench.Options(keys=keys, rate=rate, steady=steady, after=after, sla=f"{sla:g}s", state_mb=state_mb,
                                        value_bytes=value_bytes, partitions=rescale_bench.STATE_PARTITIONS, grace=grace)
    calibrate_now()
    try:
        document = rescale_bench.run(options, chosen, providers, Path(out), log=lambda m: click.echo(m, err=True),
                                     directions=[d for d in rescale_bench.DIRECTIONS if d in changes])
    except (KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    print_result(as_json, document, rescale_bench.table_text(document["stores"]))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/rescale.png ({document['wall_seconds']} s)", err=True)


@click.command("ds2")
@click.option("--policies", default="ds2,threshold", show_default=True,
              help="Autoscaling policies compared in the same run: ds2 (the operator's) and threshold.")
@click.option("--rates", default="300,3000,1500", show_default=True,
              help="Events per second of the low, high and middle phases.")
@click.option("--phase", type=DurationParam(20, 3600, legacy=True), default="60s", show_default=True,
              help="Time per phase.")
@click.option("--utilization", type=click.FloatRange(0.001, 1), default=0.35, show_default=True,
              help="The utilization target both policies size for (low, so this machine's loads span 1 to 3 executors).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/ds2", show_default=True,
              help="Writes results.json, summary.txt, ds2.png and each run's files here.")
@json_option
@calibrate_option
@from_results_option
def bench_ds2(policies: str, rates: str, phase: float, utilization: float, out: str, as_json: bool, from_results: str | None) -> None:
    """DS2's convergence on real executors (local-cluster), under- and over-provisioned, against a threshold policy."""
    from sluice.bench import ds2 as ds2_bench
    from sluice.testing.kafka import KafkaUnavailable

    if from_results is not None:
        rerender(ds2_bench.rerender, from_results, out, as_json)
        return

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    if not chosen or any(p not in ds2_bench.POLICIES for p in chosen):
        fail(f"--policies: use some of {', '.join(ds2_bench.POLICIES)} (got {policies!r}).")
    try:
        low, high, mid = (float(r) for r in rates.split(","))
    except ValueError:
        fail(f"--rates: give three events-per-second figures, low,high,middle, such as 300,3000,1500 (got {rates!r}).")
    if min(low, high, mid) <= 0:
        fail(f"--rates: every rate must be above zero (got {rates!r}).")
    options = ds2_bench.Options(rates=(low, high, mid), phase=phase, utilization=utilization)
    calibrate_now()
    try:
        result = ds2_bench.run(options, chosen, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        fail(str(error))
    print_result(as_json, result, ds2_bench.table_text(result))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/ds2.png ({result['wall_seconds']} s)", err=True)


@click.command("simulate")
@click.option("--counts", default="100,1000,10000", show_default=True, help="Queries simulated at each step (ascending).")
@click.option("--per-tenant", type=click.IntRange(1, 10_000), default=10, show_default=True, help="Queries per tenant.")
@click.option("--duration", type=DurationParam(1, 24 * 3600), default="10m", show_default=True,
              help="Simulated time per step.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/simulate", show_default=True,
              help="Writes results.json, summary.txt and simulate.png here.")
@click.option("--sizing", type=click.IntRange(0, 100_000), default=200, show_default=True,
              help="Also time the operator's SLA-aware sizing (every pool sync) of a pool of this many queries; 0: not.")
@json_option
@from_results_option
def bench_simulate(counts: str, per_tenant: int, duration: float, out: str, sizing: int, as_json: bool, from_results: str | None) -> None:
    """How fast `sluice simulate` runs a large pool (10,000 queries of 1,000 tenants), and each scheduling decision."""
    from sluice.bench import simulate as simulate_bench

    if from_results is not None:
        rerender(simulate_bench.rerender, from_results, out, as_json)
        return

    options = simulate_bench.Options(counts=parse_counts(counts, "--counts"), per_tenant=per_tenant,
                                     duration=duration, sizing=sizing)
    result = simulate_bench.run(options, Path(out), log=lambda m: click.echo(m, err=True))
    print_result(as_json, result, simulate_bench.render(result["steps"], result["sizing"], result["compiled"]))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/simulate.png", err=True)


COMMANDS = (bench_density, bench_batch_cost, bench_capacity, bench_rescale, bench_ds2, bench_simulate)
