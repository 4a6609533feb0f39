"""`sluice simulate` and `sluice size`: the what-if commands (inputs in `whatif`, output in `whatif_report`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import click

from sluice.api.constants import DEFAULT_POLICY, POLICIES
from sluice.cli.common import (
    EXIT_OK,
    EXIT_SLA_MISSED,
    DurationParam,
    fail,
    json_option,
    load_queries,
)

if TYPE_CHECKING:
    from sluice.cli.whatif import Recorded, Setup
    from sluice.scheduler.simulate import Options as SimOptions
    from sluice.scheduler.simulate import Pool as SimPool
    from sluice.scheduler.simulate import SimQuery

def _whatif_options(command: Callable[..., None]) -> Callable[..., None]:
    """The inputs `sluice simulate` and `sluice size` share."""
    for option in reversed([
        click.option("-f", "--filename", "files", multiple=True, type=click.Path(dir_okay=False),
                     help="StreamingQuery manifests (a StreamingPool in them sets the policy and executor cores)."),
        click.argument("more", nargs=-1),
        click.option("--scenario", type=click.Path(dir_okay=False),
                     help="A benchmark scenario (bench/scenarios/): its manifests and loads, instead of -f and --rates."),
        click.option("--cores-per-executor", "cores", type=click.IntRange(1, 64), help="Task slots per executor (default: the pool's, else 1)."),
        click.option("--costs", type=click.Path(dir_okay=False), help="A `sluice run --report` file: each query's measured batch costs and input rate."),
        click.option("--rates", type=click.Path(dir_okay=False),
                     help="YAML: queries: {namespace/name: {rate, bursts, keys, trigger, fixed, perRow, commit}} (the scenario load syntax, plus declared costs)."),
        click.option("--duration", type=DurationParam(0.001), help="Simulated time (default: a --scenario's warm-up plus duration, else 10m)."),
        click.option("--warmup", type=DurationParam(), help="Simulated time at the start left out of the figures (default: a --scenario's "
                                      "warm-up, else 30s)."),
        click.option("--policy", type=click.Choice(POLICIES), help=f"Scheduling policy (default: the pool's, else {DEFAULT_POLICY})."),
        click.option("--model", type=click.Choice(["cores", "cores-cpu", "cores-wait", "cores-hold", "cores-run", "slots"]),
                     default="cores",
                     show_default=True,
                     help="cores: a recording's driver work and task CPU share the cores of its Spark setup; "
                          "cores-cpu: as cores, the driver's work its CPU time on the shared cores (a recording's "
                          "`driver_cpu_ms`, where it has one) and the rest of its time on the critical path a wait "
                          "that takes no core; "
                          "cores-wait: as cores, and each batch then waits its tasks' time off the CPU (the run "
                          "time to CPU time beyond what sharing its own batch's cores explains) without taking a core; "
                          "cores-hold: as cores-wait, but each task spends that time inside its slot and bulk turn "
                          "(its slot time its CPU and that wait; on the cores it weighs its share of the CPU); "
                          "cores-run: task CPU times the tasks' run time to CPU time (their time off the CPU); "
                          "slots: each batch holds one slot for its recorded wall time (the simplest model)."),
        click.option("--other-cores", type=click.FloatRange(0, 100_000), default=None,
                     help="Cores other processes keep busy on the pool's machine (the batches share the rest); "
                          "default: what a recording measured beside its load (`machine.other_cores`, written by "
                          "`sluice bench cameo`), else 0."),
        click.option("--host-cores", type=click.FloatRange(0.1, 100_000), default=None,
                     help="Cores of one machine every executor runs on (their threads share them, however many "
                          "executors); default: a local-cluster recording's machine's, else none (each executor "
                          "core its own, as executor pods)."),
        click.option("--cold/--no-cold", default=True, show_default=True,
                     help="A recording's first batches with rows take at least the time they took there "
                          "(`cold_ms`: a cold start and the backlog it leaves), and its JVMs' compilers and "
                          "collectors take the cores they took over time (`machine.series`, from `sluice bench cameo`); "
                          "--no-cold: their steady costs."),
        click.option("--spread/--no-spread", default=True, show_default=True,
                     help="Each batch's work varies as a recording's batch times did (their 90th percentile "
                          "over their median, drawn log-normal, seeded); --no-spread: every batch its steady work."),
        click.option("--lag/--no-lag", default=True, show_default=True,
                     help="A recording's rows become readable as late after their production as they did there "
                          "(`lag_ms`: a `rate` source's whole seconds, a producer's batching); --no-lag: at once."),
    ]):
        command = option(command)
    return command


class _WhatIf(NamedTuple):
    queries: list[SimQuery]
    cores: int
    policy: str
    recorded: dict[str, Recorded]
    options: SimOptions
    setup: Setup | None
    """The recording's Spark setup, when it sets the pool (no --cores-per-executor, no pool)."""
    taken: float = 0.0
    """Cores other processes keep busy (`--other-cores`, else the recording's)."""
    host: float | None = None
    """Cores of the one machine the executors share (`--host-cores`, else a local-cluster recording's)."""
    priority: bool = False
    """Urgent bands' threads take the cores first: the recording's urgent lane raised their
    priorities, and the pool is its setup (a recording's own, or on its machine)."""
    gate: int | None = None
    """The recording's gate, where the pool is on its machine (`host`): the runtime sizes its gate
    from the machine's cores, not from the executors."""

    def pool(self, executors: int) -> SimPool:
        """The simulated pool at `executors`: a recording's gate, task slots a core and shared
        driver carried over (scaled by executors), else one slot a core."""
        from sluice.scheduler.simulate import Pool

        setup = self.setup
        if setup is None:
            return Pool(executors, self.cores, self.policy, capacity=self.gate, taken=self.taken,
                        host_cores=self.host, driver_shares=self.host is not None, priority=self.priority)
        return Pool(executors, self.cores, self.policy, capacity=setup.gate,
                    task_slots=None if setup.task_slots is None else setup.task_slots * executors,
                    driver_shares=setup.driver_shares, taken=self.taken, host_cores=self.host, priority=self.priority,
                    bulk_slots=None if setup.bulk_tasks is None else setup.bulk_tasks * executors, lane=setup.lane,
                    busy=setup.busy)


def _whatif_inputs(files: tuple[str, ...], scenario: str | None, costs: str | None, rates: str | None,
                   cores: int | None, policy: str | None, duration: float | None, warmup: float | None,
                   timeline: bool = False, model: str = "cores", other_cores: float | None = None,
                   cold: bool = True, host_cores: float | None = None, lag: bool = True,
                   spread: bool = True) -> _WhatIf:
    """The simulation's queries, cores per executor, policy, the recording's figures and the
    simulated span; exits 1 with one sentence on bad input. Without --cores-per-executor or a
    pool, a recording's cores (one local-mode executor with all of them) set the slots per
    executor; without --duration and --warmup, a scenario's span (as `sluice bench` runs it)."""
    from dataclasses import replace

    from sluice.cli import whatif

    if bool(files) == bool(scenario):
        fail("Give the queries either with -f MANIFEST... or with --scenario FILE (one of the two).")
    try:
        pool, span = None, (600.0, 30.0)
        if scenario:
            queries, loads, span = whatif.read_scenario(Path(scenario))
        else:
            queries, pool = load_queries(files)
            loads = {}
        if rates:  # a query named here takes this load (and costs) instead of the scenario's
            loads = {**loads, **whatif.read_rates(Path(rates))}
        recorded = whatif.read_costs(Path(costs), [q.key for q in queries]) if costs else {}
        setup = whatif.recorded_setup(Path(costs)) if costs else None
        if not cold:
            recorded = {key: replace(found, cold=()) for key, found in recorded.items()}
            setup = None if setup is None else replace(setup, busy=())
        if not lag:
            recorded = {key: replace(found, lag=0.0) for key, found in recorded.items()}
        if not spread:
            recorded = {key: replace(found, spread=1.0) for key, found in recorded.items()}
        if model == "slots":  # each batch one slot for its wall time, on one slot a core
            recorded = {key: replace(found, work=None) for key, found in recorded.items()}
            setup = None if setup is None else whatif.Setup(setup.cores)
        waits: dict[str, float] = {}
        # the tasks' time off the CPU: a wait without a core (cores-wait), or held in the slot (cores-hold)
        if model in ("cores-wait", "cores-hold") and setup is not None:
            waits = {key: whatif.off_cpu(found.work[4], found.work[3], setup)
                     for key, found in recorded.items() if found.work is not None}
        if model in ("cores", "cores-cpu", "cores-wait", "cores-hold"):  # the tasks' CPU alone (cores-run: times their run time to CPU time)
            recorded = {key: found if found.work is None else replace(found, work=(*found.work[:4], 1.0))
                        for key, found in recorded.items()}
        driver_cpu = {key: found.driver_cpu for key, found in recorded.items()
                      if found.work is not None and found.driver_cpu is not None} if model == "cores-cpu" else {}
        sims = [(replace(q, hold=waits[q.key]) if model == "cores-hold" else replace(q, off_cpu=waits[q.key]))
                if q.driver is not None and q.key in waits else q
                for q in whatif.sim_queries(queries, loads, recorded)]
        # cores-cpu: the driver's CPU on the shared cores, the rest of its time (Kafka and checkpoint
        # round trips, and the waits for a core the recording had) a wait that takes none
        sims = [whatif.driver_on_cpu(q, driver_cpu[q.key]) if q.key in driver_cpu else q for q in sims]
    except whatif.WhatIfError as error:
        fail(str(error))
    from_run = None if cores or pool else setup
    chosen_cores = cores or (pool.spec.executor.cores if pool else None) or (from_run.cores if from_run else 1)
    chosen_policy = policy or (pool.spec.policy if pool else None) or DEFAULT_POLICY
    from sluice.scheduler.simulate import Options

    seconds = duration or span[0]
    skipped = warmup
    options = Options(duration=seconds, warmup=span[1] if skipped is None else skipped, timeline=timeline)
    taken = other_cores if other_cores is not None else setup.other_cores if setup is not None else 0.0
    host = host_cores if host_cores is not None else setup.host_cores if setup is not None else None
    # the recording's raised priorities hold where the pool is its setup: its own, or on its machine
    priority = setup is not None and setup.priority and (from_run is not None or host is not None)
    gate = setup.gate if setup is not None and host is not None else None
    return _WhatIf(sims, chosen_cores, chosen_policy, recorded, options, from_run, taken, host, priority, gate)


@click.command()
@_whatif_options
@click.option("--executors", type=click.IntRange(1, 100_000), required=True, help="Executors in the pool.")
@click.option("--out", type=click.Path(file_okay=False), help="Also write simulate.json, summary.txt and simulate.png here.")
@json_option
def simulate(files: tuple[str, ...], more: tuple[str, ...], scenario: str | None, cores: int | None, costs: str | None,
             rates: str | None, duration: float | None, warmup: float | None, policy: str | None, model: str,
             other_cores: float | None, cold: bool, host_cores: float | None, spread: bool, lag: bool, executors: int,
             out: str | None, as_json: bool) -> None:
    """Predict each query's p50, p99 and SLA attainment in one pool before deploying (a simulation)."""
    import json

    from sluice.cli import whatif_report
    from sluice.scheduler.simulate import simulate as run_simulation

    inputs = _whatif_inputs((*files, *more), scenario, costs, rates, cores, policy, duration, warmup,
                            timeline=out is not None, model=model, other_cores=other_cores, cold=cold,
                            host_cores=host_cores, lag=lag, spread=spread)
    queries, recorded, options = inputs.queries, inputs.recorded, inputs.options
    click.echo(f"simulating {len(queries)} queries on {executors} executor(s) for {options.duration:g}s of pool time ...",
               err=True)
    result = run_simulation(queries, inputs.pool(executors), options)
    missed = [k for k, r in result.queries.items() if not r.kept]
    if as_json:
        click.echo(json.dumps(whatif_report.document(result, recorded)))
    else:
        click.echo(whatif_report.table(result, queries, recorded))
        click.echo(f"every SLA kept at {executors} executor(s)." if not missed else
                   f"{len(missed)} of {len(queries)} queries miss their goal at {executors} executor(s): "
                   f"{', '.join(missed)}.")
    if out:
        whatif_report.write_outputs(result, queries, Path(out), recorded)
        click.echo(f"wrote {out}/simulate.json, {out}/summary.txt, {out}/simulate.png", err=True)


@click.command()
@_whatif_options
@click.option("--max-executors", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="The largest pool to try.")
@click.option("--utilization", type=click.FloatRange(0.01, 1), default=0.7, show_default=True,
              help="DS2's utilization target (the pool's autoscaling.utilization).")
@click.option("--out", type=click.Path(file_okay=False),
              help="Also write size.json here: the count the SLAs need (null: not within --max-executors), DS2's, "
                   "and each simulated count's worst query.")
@json_option
def size(files: tuple[str, ...], more: tuple[str, ...], scenario: str | None, cores: int | None, costs: str | None,
         rates: str | None, duration: float | None, warmup: float | None, policy: str | None, model: str,
         other_cores: float | None, cold: bool, host_cores: float | None, spread: bool, lag: bool,
         max_executors: int,
         utilization: float, out: str | None, as_json: bool) -> None:
    """The fewest executors that keep every SLA (simulated), beside DS2's count that sustains the rates."""
    import json

    from sluice.cli import whatif_report
    from sluice.operator.autoscaler import ds2_executors
    from sluice.scheduler.simulate import Result as SimResult
    from sluice.scheduler.simulate import size as search

    inputs = _whatif_inputs((*files, *more), scenario, costs, rates, cores, policy, duration, warmup, model=model,
                            other_cores=other_cores, cold=cold, host_cores=host_cores, lag=lag, spread=spread)
    queries, per_executor, options = inputs.queries, inputs.cores, inputs.options
    ds2, why = ds2_executors(queries, per_executor, utilization)
    def step(n: int, result: SimResult) -> None:  # progress: one line per simulated pool, as it is made
        worst = result.worst()
        detail = "" if worst is None else f"; worst {worst.key} {worst.attainment or 0:.1%} (goal {worst.goal:.0%})"
        click.echo(f"{n:>5} executor(s): {'every SLA kept' if result.kept else 'misses'}{detail}", err=True)

    click.echo(f"simulating {len(queries)} queries for {options.duration:g}s of pool time per executor count ...",
               err=True)
    found, runs = search(queries, inputs.pool(1), options, 1, max_executors, on_step=step)
    steps = []
    for n, result in sorted(runs.items()):
        worst = result.worst()
        steps.append({"executors": n, "kept": result.kept, "worst_query": worst.key if worst else None,
                      "worst_attainment": worst.attainment if worst else None})
    document = {"sla_executors": found, "ds2_executors": ds2, "ds2_why": why, "cores_per_executor": per_executor,
                "max_executors": max_executors, "policy": inputs.policy, "model": model, "steps": steps}
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "size.json").write_text(json.dumps(document, indent=2) + "\n")
        click.echo(f"wrote {out}/size.json", err=True)
    if as_json:
        click.echo(json.dumps(document))
        sys.exit(EXIT_SLA_MISSED if found is None else EXIT_OK)
    click.echo(f"DS2 (sustains the rates): {ds2} executor(s) of {per_executor} core(s): {why}")
    if found is None:
        click.echo(f"SLAs: not kept even at {max_executors} executor(s) (--max-executors); "
                   f"the simulated schedule at {max_executors}:")
        click.echo(whatif_report.table(runs[max_executors], queries))
        sys.exit(EXIT_SLA_MISSED)
    click.echo(f"SLAs (keeps every SLA, simulated under {inputs.policy}): {found} executor(s).")
    if found > ds2:
        click.echo(f"The SLAs decide: {found} executors, {found - ds2} more than DS2's {ds2}, because at {ds2} "
                   "the queued batches' waits put some query below its goal.")
    elif found < ds2:
        click.echo(f"The rates decide: DS2's {ds2} executors (utilization {utilization:.0%}); {found} would keep the "
                   "SLAs in the simulation, with no headroom.")
    else:
        click.echo(f"Both bounds agree: {found} executor(s).")
    click.echo(whatif_report.table(runs[found], queries))
