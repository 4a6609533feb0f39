"""The `sluice` command line: validate manifests, print CRDs; later run, demo, bench, simulate."""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

import click

from sluice.api.constants import (
    CRITICAL_LANE,
    DEFAULT_POLICY,
    GATES,
    POLICIES,
    RUNTIME_CAPACITY,
    URGENT_LANE_CHOICES,
)
from sluice.api.manifest import ManifestError, parse_text
from sluice.api.pool import StreamingPool
from sluice.api.query import Delivery, StreamingQuery
from sluice.api.wire import QueryStatus

if TYPE_CHECKING:
    from sluice.cli.whatif import Recorded, Setup
    from sluice.scheduler.simulate import Options as SimOptions
    from sluice.scheduler.simulate import Pool as SimPool
    from sluice.scheduler.simulate import SimQuery


EXIT_ERROR = 1
"""Bad input (one sentence names the field and the fix) or a failed run."""
EXIT_USAGE = 2
"""A command line click could not parse (an unknown option, a missing argument)."""
EXIT_SLA_MISSED = 3
"""`sluice size`: no pool up to --max-executors keeps every SLA."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 done; 1 bad input or a failed run (one sentence says which); 2 a command line "
                    "that cannot be parsed; 3 SLAs missed (sluice size).")
@click.version_option(package_name="sluice-streaming")
def main() -> None:
    """Sluice: many tenants' Spark streaming queries on Kubernetes, with latency SLAs."""


@main.command()
@click.option(
    "-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False, allow_dash=True),
    help="Manifest file (multi-document YAML allowed; '-' reads stdin). Repeat for more.",
)
@click.argument("more", nargs=-1)
def validate(files: tuple[str, ...], more: tuple[str, ...]) -> None:
    """Check StreamingQuery and StreamingPool manifests without a cluster.

    Prints one line per valid manifest; exits 1 with one sentence per error otherwise.
    `sluice validate -f examples/*.yaml` works: the shell's extra files are taken too.
    """
    errors: list[ManifestError] = []
    for name in (*files, *more):
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as error:
            errors.append(ManifestError(name, "", f"cannot be read ({error.strerror or error}); check the path."))
            continue
        except UnicodeDecodeError:
            errors.append(ManifestError(name, "", "is not UTF-8 text; save the manifest as UTF-8."))
            continue
        source = "<stdin>" if name == "-" else name
        rates = _rates_file(text, source)
        if rates is not None:  # `sluice simulate --rates` input, kept beside the manifests it describes
            if isinstance(rates, ManifestError):
                errors.append(rates)
            else:
                click.echo(f"{source}: a what-if rates file (sluice simulate --rates) is valid; not a manifest")
            continue
        parsed, problems = parse_text(text, source)
        for item in parsed:
            meta = item.resource.metadata
            where = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
            click.echo(f"{item.source}: {item.resource.kind} {where} is valid")
        errors.extend(problems)
    for problem in errors:
        click.echo(str(problem), err=True)
    if errors:
        sys.exit(1)


def _rates_file(text: str, source: str) -> ManifestError | bool | None:
    """A what-if rates file (one YAML mapping with `queries` and no `kind`): True if it is valid, its
    first problem if not; None when the text is no rates file (a manifest, or not YAML at all)."""
    import yaml
    from pydantic import ValidationError

    from sluice.cli.whatif import RatesFile

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None
    if len(documents) != 1 or not isinstance(documents[0], dict) or "kind" in documents[0] \
            or "queries" not in documents[0]:
        return None
    try:
        RatesFile.model_validate(documents[0])
    except ValidationError as error:
        first = error.errors()[0]
        return ManifestError(source, ".".join(str(p) for p in first["loc"]), f"{first['msg']}.")
    return True


@main.command()
def crds() -> None:
    """Print the CustomResourceDefinitions generated from the models (what crds/ holds)."""
    from sluice.api.crd import crds_yaml

    click.echo(crds_yaml(), nl=False)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (commands, options and file paths).

    bash: `eval "$(sluice completion bash)"` in ~/.bashrc; zsh: the same in ~/.zshrc;
    fish: `sluice completion fish > ~/.config/fish/completions/sluice.fish`.
    """
    from click.shell_completion import get_completion_class

    found = get_completion_class(shell)
    assert found is not None  # click ships all three
    click.echo(found(main, {}, "sluice", "_SLUICE_COMPLETE").source())


@main.command()
def reference() -> None:
    """Print the reference page (docs/reference.md): every field, condition and reason."""
    from sluice.api.reference import reference_markdown

    click.echo(reference_markdown(), nl=False)


@main.command("values-schema")
def values_schema() -> None:
    """Print the chart's values.schema.json, generated from its values model."""
    from sluice.api.chart_values import values_schema_json

    click.echo(values_schema_json(), nl=False)


def _load_queries(files: tuple[str, ...]) -> tuple[list[StreamingQuery], StreamingPool | None]:
    """Read manifests; exits 1 with one sentence per error. Returns queries and the pool, if any."""
    queries: list[StreamingQuery] = []
    pool: StreamingPool | None = None
    errors: list[ManifestError] = []
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except OSError as error:
            errors.append(ManifestError(name, "", f"cannot be read ({error.strerror or error}); check the path."))
            continue
        parsed, problems = parse_text(text, name)
        errors.extend(problems)
        for item in parsed:
            if isinstance(item.resource, StreamingQuery):
                queries.append(item.resource)
            elif isinstance(item.resource, StreamingPool):
                pool = item.resource
    for problem in errors:
        click.echo(str(problem), err=True)
    if errors:
        sys.exit(1)
    if not queries:
        click.echo("No StreamingQuery in the given files; pass at least one query manifest with -f.", err=True)
        sys.exit(1)
    return queries, pool


def _duration(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    from sluice.api.units import Duration

    try:
        return Duration.parse(value).seconds
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint=option) from None


class DurationParam(click.ParamType):  # type: ignore[type-arg]
    """A duration flag: `60s`, `500ms`, `2m`, `1h` in seconds (a float). A bare number is refused in
    one sentence, except on the flags that took bare seconds before (`legacy`): there it is still
    read as seconds, with one line naming the new form."""

    name = "duration"

    def __init__(self, low: float = 0.0, high: float = float("inf"), legacy: bool = False) -> None:
        self.low, self.high, self.legacy = low, high, legacy

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from sluice.api.units import Duration

        if isinstance(value, float):  # already converted (a default given in seconds)
            return value
        text = str(value).strip()
        flag = param.opts[-1] if param is not None and param.opts else "the duration"
        if self.legacy and re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
            click.echo(f"{flag} {text}: write {text}s; a bare number is still read as seconds.", err=True)
            seconds = float(text)
        else:
            try:
                seconds = Duration.parse(text).seconds
            except ValueError as error:
                self.fail(str(error), param, ctx)
        if not self.low <= seconds <= self.high:
            self.fail(f"{text} is outside {_seconds_text(self.low)} to {_seconds_text(self.high)}.", param, ctx)
        return seconds


def _seconds_text(seconds: float) -> str:
    return "no limit" if seconds == float("inf") else f"{seconds:g}s"


def _seconds_alias(new: str) -> Callable[[click.Context, click.Parameter, float | None], float | None]:
    """The callback of an old bare-seconds flag kept as an alias of `new` (a duration flag)."""

    def callback(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is not None:
            click.echo(f"{param.opts[-1]} {value:g} is now {new} {value:g}s.", err=True)
            ctx.meta[f"alias:{new}"] = value
        return value

    return callback


def _aliased(ctx: click.Context, new: str, value: float) -> float:
    """The value of duration flag `new`, or of its old alias when that was given."""
    return float(ctx.meta.get(f"alias:{new}", value))


def _json_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result document (as written to results.json) instead of the table.")(f)


def _calibrate_now() -> None:
    """Measure the sitting for the benchmark about to run (its input already checked), unless
    `--no-calibrate`; a calibration that fails is said and recorded, and the benchmark runs on."""
    ctx = click.get_current_context()
    if not ctx.meta.get("calibrate", False):
        ctx.meta["sitting"] = {"skipped": "--no-calibrate"}
        return
    from sluice.bench import calibrate as calibration
    from sluice.testing.kafka import KafkaUnavailable

    try:
        ctx.meta["sitting"] = calibration.sitting(log=lambda m: click.echo(m, err=True))
    except (RuntimeError, KafkaUnavailable) as error:
        ctx.meta["sitting"] = {"error": str(error)}
        click.echo(f"the sitting was not measured ({error}); the benchmark runs on.", err=True)


def _print_result(as_json: bool, result: dict[str, object], table: str) -> None:
    import json

    sitting = click.get_current_context().meta.get("sitting")
    if sitting is not None:
        result = {**result, "sitting": sitting}
    click.echo(json.dumps(result, default=str) if as_json else table)


def _sitting_option(f: Callable[..., None]) -> Callable[..., None]:
    """`--calibrate/--no-calibrate` on a benchmark: the sitting measured once its input is checked
    (`_calibrate_now`, `sluice bench calibrate`), one line when it is off the reference, and
    `"sitting"` in the results.json the benchmark writes into its `--out` (and in its `--json`)."""

    @functools.wraps(f)
    def wrapper(*args: object, calibrate: bool, **kwargs: object) -> None:
        import json

        ctx = click.get_current_context()
        started = time.time()
        ctx.meta["calibrate"] = calibrate
        f(*args, **kwargs)
        results = Path(str(kwargs["out"])) / "results.json"
        if "sitting" in ctx.meta and results.exists() and results.stat().st_mtime >= started:
            document = json.loads(results.read_text())
            document["sitting"] = ctx.meta["sitting"]
            results.write_text(json.dumps(document, indent=2, default=str) + "\n")

    return click.option("--calibrate/--no-calibrate", default=True, show_default=True,
                        help="Measure the sitting first (`sluice bench calibrate`, about a minute) and record it "
                             "in results.json.")(wrapper)


@main.command()
@click.option("-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False),
              help="Manifest file(s); a StreamingPool in them sets the policy and the tenants' quota weights.")
@click.argument("more", nargs=-1)
@click.option("--duration", help="Stop cleanly this long after every query has started, e.g. 60s (default: until Ctrl-C).")
@click.option("--report", type=click.Path(dir_okay=False), help="Write a JSON report here when the run ends.")
@click.option("--policy", type=click.Choice(POLICIES), help=f"Override the pool's policy (default {DEFAULT_POLICY}).")
@click.option("--workdir", type=click.Path(file_okay=False), help="Checkpoints and Spark files (default: a new temp dir). Reuse it to resume.")
@click.option("--warmup", help="Leave batches of the first this-long (after every query has started) out of the latency figures, e.g. 15s.")
@click.option("--timeline", is_flag=True, help="Put every batch's latencies in the report (for plots).")
@click.option("--ready-file", type=click.Path(dir_okay=False), help="Write this file once every query has started (a load generator can wait for it).")
@click.option("--urgent-lane", type=click.Choice(URGENT_LANE_CHOICES), default="gated", show_default=True,
              help="Who gets the urgent lane (more slots than cores, bulk turns, raised priorities): gated "
                   "policies, every policy (fifo and fair too, for like-for-like comparisons), or none.")
@click.option("--drain", help="With --duration and --sent-file: go on up to this long after the duration until "
              "every query has read the rows the file names, e.g. 32s (a benchmark judging every row sent).")
@click.option("--sent-file", type=click.Path(dir_okay=False),
              help="JSON {\"namespace/name\": rows sent}, written by the load generator once its load stopped.")
@click.option("--gate", type=click.Choice(GATES), default="inprocess", show_default=True,
              help="Where a gated policy's scheduler runs: in this process, or as a pool pod runs it, a scheduler "
                   "sidecar process asked over HTTP on loopback.")
@click.option("--executors", type=click.IntRange(1, 64),
              help="Run on Spark's local-cluster: this many executor JVMs beside the driver, each of "
                   "--executor-cores task slots; of the urgent lane only the urgent bands' raised thread "
                   "priorities, as on executor pods, not its extra slots and bulk turns (default: local[*], one JVM).")
@click.option("--executor-cores", type=click.IntRange(1, 64), default=1, show_default=True,
              help="With --executors: task slots per executor.")
def run(files: tuple[str, ...], more: tuple[str, ...], duration: str | None, report: str | None,
        policy: str | None, workdir: str | None, warmup: str | None, timeline: bool, ready_file: str | None,
        urgent_lane: str, drain: str | None, sent_file: str | None, gate: str, executors: int | None,
        executor_cores: int) -> None:
    """Run StreamingQuery manifests locally on the embedded default (Spark local[*])."""
    import threading

    from rich.live import Live

    from sluice.runtime import runner
    from sluice.runtime.session import local_cluster

    queries, pool = _load_queries((*files, *more))
    seconds = _duration(duration, "--duration")
    if executor_cores != 1 and not executors:
        click.echo("--executor-cores: it sets the slots of --executors' executor JVMs; give --executors N too, or "
                   "leave it out.", err=True)
        sys.exit(1)
    stop = threading.Event()
    runner.install_interrupt(stop)
    chosen = policy or (pool.spec.policy if pool else None) or DEFAULT_POLICY
    master = local_cluster(executors, executor_cores) if executors else "local[*]"
    click.echo(f"starting Spark ({master}) with {len(queries)} quer{'y' if len(queries) == 1 else 'ies'} under {chosen} ...", err=True)
    with Live(auto_refresh=False, redirect_stderr=False) as live:
        def tick(statuses: dict[str, QueryStatus]) -> None:
            live.update(runner.live_table(statuses), refresh=True)

        options = runner.RunOptions(policy=chosen, duration=seconds, stop=stop, on_tick=tick,
                                    workdir=Path(workdir) if workdir else None,
                                    warmup=_duration(warmup, "--warmup") or 0.0, timeline=timeline,
                                    ready_file=Path(ready_file) if ready_file else None, urgent_lane=urgent_lane,
                                    drain=_duration(drain, "--drain") or 0.0,
                                    sent_file=Path(sent_file) if sent_file else None, gate=gate, master=master,
                                    weights={ns: q.weight for ns, q in pool.spec.quotas.items()} if pool else {})
        try:
            result = runner.run(queries, options)
        except RuntimeError as error:  # the driver JVM died under the run
            click.echo(str(error), err=True)
            sys.exit(1)
    if report:
        runner.write_report(result, Path(report))
        click.echo(f"wrote {report}", err=True)
    failed = [k for k, q in result["queries"].items() if q["phase"] == "Failed"]
    for key in failed:
        click.echo(f"{key} failed: {result['queries'][key]['message']}", err=True)


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
        click.option("--duration", help="Simulated time (default: a --scenario's warm-up plus duration, else 10m)."),
        click.option("--warmup", help="Simulated time at the start left out of the figures (default: a --scenario's "
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
                          "slots: each batch holds one slot for its recorded wall time (the model before 2026-11-29)."),
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
                   cores: int | None, policy: str | None, duration: str | None, warmup: str | None,
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
        click.echo("Give the queries either with -f MANIFEST... or with --scenario FILE (one of the two).", err=True)
        sys.exit(1)
    try:
        pool, span = None, (600.0, 30.0)
        if scenario:
            queries, loads, span = whatif.read_scenario(Path(scenario))
        else:
            queries, pool = _load_queries(files)
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
        click.echo(str(error), err=True)
        sys.exit(1)
    from_run = None if cores or pool else setup
    chosen_cores = cores or (pool.spec.executor.cores if pool else None) or (from_run.cores if from_run else 1)
    chosen_policy = policy or (pool.spec.policy if pool else None) or DEFAULT_POLICY
    from sluice.scheduler.simulate import Options

    seconds = _duration(duration, "--duration") or span[0]
    skipped = _duration(warmup, "--warmup")
    options = Options(duration=seconds, warmup=span[1] if skipped is None else skipped, timeline=timeline)
    taken = other_cores if other_cores is not None else setup.other_cores if setup is not None else 0.0
    host = host_cores if host_cores is not None else setup.host_cores if setup is not None else None
    # the recording's raised priorities hold where the pool is its setup: its own, or on its machine
    priority = setup is not None and setup.priority and (from_run is not None or host is not None)
    gate = setup.gate if setup is not None and host is not None else None
    return _WhatIf(sims, chosen_cores, chosen_policy, recorded, options, from_run, taken, host, priority, gate)


@main.command()
@_whatif_options
@click.option("--executors", type=click.IntRange(1, 100_000), required=True, help="Executors in the pool.")
@click.option("--out", type=click.Path(file_okay=False), help="Also write simulate.json, summary.txt and simulate.png here.")
def simulate(files: tuple[str, ...], more: tuple[str, ...], scenario: str | None, cores: int | None, costs: str | None,
             rates: str | None, duration: str | None, warmup: str | None, policy: str | None, model: str,
             other_cores: float | None, cold: bool, host_cores: float | None, spread: bool, lag: bool, executors: int,
             out: str | None) -> None:
    """Predict each query's p50, p99 and SLA attainment in one pool before deploying (a simulation)."""
    from sluice.cli import whatif
    from sluice.scheduler.simulate import simulate as run_simulation

    inputs = _whatif_inputs((*files, *more), scenario, costs, rates, cores, policy, duration, warmup,
                            timeline=out is not None, model=model, other_cores=other_cores, cold=cold,
                            host_cores=host_cores, lag=lag, spread=spread)
    queries, recorded, options = inputs.queries, inputs.recorded, inputs.options
    click.echo(f"simulating {len(queries)} queries on {executors} executor(s) for {options.duration:g}s of pool time ...",
               err=True)
    result = run_simulation(queries, inputs.pool(executors), options)
    click.echo(whatif.table(result, queries, recorded))
    missed = [k for k, r in result.queries.items() if not r.kept]
    click.echo(f"every SLA kept at {executors} executor(s)." if not missed
               else f"{len(missed)} of {len(queries)} queries miss their goal at {executors} executor(s): {', '.join(missed)}.")
    if out:
        whatif.write_outputs(result, queries, Path(out), recorded)
        click.echo(f"wrote {out}/simulate.json, {out}/summary.txt, {out}/simulate.png", err=True)


@main.command()
@_whatif_options
@click.option("--max-executors", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="The largest pool to try.")
@click.option("--utilization", type=click.FloatRange(0.01, 1), default=0.7, show_default=True,
              help="DS2's utilization target (the pool's autoscaling.utilization).")
@click.option("--out", type=click.Path(file_okay=False),
              help="Also write size.json here: the count the SLAs need (null: not within --max-executors), DS2's, "
                   "and each simulated count's worst query.")
def size(files: tuple[str, ...], more: tuple[str, ...], scenario: str | None, cores: int | None, costs: str | None,
         rates: str | None, duration: str | None, warmup: str | None, policy: str | None, model: str,
         other_cores: float | None, cold: bool, host_cores: float | None, spread: bool, lag: bool,
         max_executors: int,
         utilization: float, out: str | None) -> None:
    """The fewest executors that keep every SLA (simulated), beside DS2's count that sustains the rates."""
    import json

    from sluice.cli import whatif
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
    click.echo(f"DS2 (sustains the rates): {ds2} executor(s) of {per_executor} core(s): {why}")
    if out:
        steps = []
        for n, result in sorted(runs.items()):
            worst = result.worst()
            steps.append({"executors": n, "kept": result.kept, "worst_query": worst.key if worst else None,
                          "worst_attainment": worst.attainment if worst else None})
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "size.json").write_text(json.dumps(
            {"sla_executors": found, "ds2_executors": ds2, "cores_per_executor": per_executor,
             "max_executors": max_executors, "policy": inputs.policy, "model": model, "steps": steps}, indent=2) + "\n")
        click.echo(f"wrote {out}/size.json", err=True)
    if found is None:
        click.echo(f"SLAs: not kept even at {max_executors} executor(s) (--max-executors); "
                   f"the simulated schedule at {max_executors}:")
        click.echo(whatif.table(runs[max_executors], queries))
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
    click.echo(whatif.table(runs[found], queries))


@main.command()
@click.option("--duration", "seconds", type=DurationParam(10, 3600), default="45s", show_default=True,
              help="Run time per policy.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(10, 3600), hidden=True,
              callback=_seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@click.option("--examples", "folder", help="Folder of the demo's manifests (default: the ones installed with Sluice).")
@click.option("--policies", default="fifo,cameo", show_default=True, help="Policies to compare, in order.")
@click.option("--report", type=click.Path(dir_okay=False), help="Write both runs' reports as JSON here.")
@click.option("--warmup", type=DurationParam(0, 600, legacy=True), default="10s", show_default=True,
              help="Left out of the figures at each run's start (Spark's first batches compile and load).")
@click.pass_context
def demo(ctx: click.Context, seconds: float, old_seconds: float | None, folder: str | None, policies: str,
         report: str | None, warmup: float) -> None:
    """Two tenants on one Spark: a tight-SLA filter beside a heavy windowed aggregation, fifo then cameo."""
    seconds = _aliased(ctx, "--duration", seconds)
    import json

    files = tuple(str(p) for p in demo_manifests(folder))
    if not files:
        click.echo(f"No manifests in '{folder}'; pass --examples with a folder of YAML files.", err=True)
        sys.exit(1)
    queries, _ = _load_queries(files)
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        click.echo(f"--policies: unknown {', '.join(unknown)}; use {', '.join(POLICIES)}.", err=True)
        sys.exit(1)
    import subprocess
    import tempfile

    results = {}
    for policy in chosen:  # each policy in a process of its own: a fresh JVM started with its own options
        click.echo(f"[{policy}] running {len(queries)} queries for {seconds:g}s on Spark local[*] "
                   f"(the first {warmup:g}s left out) ...", err=True)
        with tempfile.TemporaryDirectory(prefix="sluice-demo-") as work:
            out = Path(work) / "report.json"
            child = subprocess.run([sys.executable, "-m", "sluice", "demo-policy", *(a for f in files for a in ("-f", f)),
                                    "--policy", policy, "--duration", f"{seconds:g}s", "--warmup", f"{warmup:g}s",
                                    "--report", str(out)], check=False)
            if child.returncode != 0 or not out.exists():
                click.echo(f"[{policy}] the run stopped (exit {child.returncode}); no figures for it.", err=True)
                break
            results[policy] = json.loads(out.read_text())
    if not results:
        sys.exit(1)
    click.echo(demo_table(results, queries))
    if report:
        Path(report).write_text(json.dumps(results, indent=2) + "\n")


@main.command("demo-policy", hidden=True)
@click.option("-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False))
@click.option("--policy", type=click.Choice(POLICIES), required=True)
@click.option("--duration", "seconds", type=DurationParam(1, 3600), required=True)
@click.option("--warmup", type=DurationParam(0, 600), required=True)
@click.option("--report", type=click.Path(dir_okay=False), required=True)
def demo_policy(files: tuple[str, ...], policy: str, seconds: float, warmup: float, report: str) -> None:
    """One policy of `sluice demo`, in the process the demo started for it."""
    import threading

    from sluice.runtime import runner

    queries, _ = _load_queries(files)
    stop = threading.Event()
    runner.install_interrupt(stop)
    try:
        result = runner.run(queries, runner.RunOptions(policy=policy, duration=seconds, stop=stop, warmup=warmup,
                                                       on_tick=demo_progress(policy, seconds)))
    except RuntimeError as error:  # the driver JVM died under the run
        click.echo(str(error), err=True)
        sys.exit(1)
    runner.write_report(result, Path(report))


def demo_progress(policy: str, seconds: float, every: float = 10.0) -> Callable[[dict[str, QueryStatus]], None]:
    """A line every `every` seconds: time since every query started (never past `seconds`, when the
    run stops) and each query's p99 and attainment so far."""
    import time

    started: list[float] = []
    shown = [0.0]

    def tick(statuses: dict[str, QueryStatus]) -> None:
        if not started:
            started.append(time.monotonic())
        elapsed = min(time.monotonic() - started[0], seconds)
        if elapsed - shown[0] < every:
            return
        shown[0] = elapsed
        parts = []
        for key, status in sorted(statuses.items()):
            if status.p99_ms is None or status.attainment is None:
                parts.append(f"{key.split('/')[-1]} warming up")
            else:
                parts.append(f"{key.split('/')[-1]} p99 {status.p99_ms:,.0f} ms, {status.attainment:.1%} within SLA")
        click.echo(f"[{policy}] {elapsed:.0f}/{seconds:g}s: " + "; ".join(parts), err=True)

    return tick


DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
"""The demo's manifests, installed with the package (src/sluice/examples is the repository's examples/)."""


def demo_manifests(folder: str | None) -> list[Path]:
    """The YAML files of `folder`, or of the installed demo: `sluice demo` works from any folder."""
    return sorted((Path(folder) if folder else DEMO).glob("*.yaml"))


def demo_table(results: dict[str, dict[str, object]], queries: list[StreamingQuery]) -> str:
    """Side by side: p50/p99/attainment per query per policy, and each policy's p99 over the last's."""
    policies = list(results)
    lines = []
    head = f"{'query':34} {'SLA ms':>7}" + "".join(f" | {p + ' p50':>10} {'p99':>8} {'att':>6} {'rows':>8}" for p in policies)
    lines.append(head)
    lines.append("-" * len(head))
    last = policies[-1] if policies else ""
    for query in queries:
        key = query.key
        row = f"{key:34} {query.spec.sla.latencyTarget.ms:>7.0f}"
        for p in policies:
            q = results[p]["queries"].get(key, {})  # type: ignore[attr-defined]
            p50, p99, att = q.get("p50_ms"), q.get("p99_ms"), q.get("attainment")
            row += (f" | {'-' if p50 is None else f'{p50:.0f}':>10} {'-' if p99 is None else f'{p99:.0f}':>8}"
                    f" {'-' if att is None else f'{att:.0%}':>6} {q.get('rows', 0):>8}")
        lines.append(row)
    if len(policies) > 1:
        lines.append("")
        for query in queries:
            base = results[last]["queries"].get(query.key, {}).get("p99_ms")  # type: ignore[attr-defined]
            for p in policies[:-1]:
                other = results[p]["queries"].get(query.key, {}).get("p99_ms")  # type: ignore[attr-defined]
                if base and other:
                    lines.append(f"{query.key}: p99 {p}/{last} = {other / base:.2f}x")
    return "\n".join(lines)


@main.command()
@click.option("--topic", required=True, help="Kafka topic to write.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), required=True, help="Events per second.")
@click.option("--duration", help="Stop after this long, e.g. 60s (default: until Ctrl-C).")
@click.option("--burst", "bursts", multiple=True, help="AT,FOR,FACTOR, e.g. 30s,10s,10: multiply the rate for a while.")
@click.option("--keys", type=click.IntRange(1, 10_000_000), default=100, show_default=True, help="Distinct keys.")
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True, help="Kafka bootstrap servers.")
def load(topic: str, rate: float, duration: str | None, bursts: tuple[str, ...], keys: int, bootstrap: str) -> None:
    """Write JSON events carrying their production time to a Kafka topic at a steady rate."""
    import json
    import threading

    from sluice.api.scenario import Burst
    from sluice.runtime.runner import install_interrupt
    from sluice.testing.load import LoadPlan, generate, main_progress

    try:
        plan = LoadPlan(topic, rate, _duration(duration, "--duration"), [Burst.parse(b) for b in bursts], keys)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--burst") from None
    stop = threading.Event()
    install_interrupt(stop)
    try:
        result = generate(plan, bootstrap, stop.is_set, main_progress)
    except RuntimeError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    click.echo(json.dumps(result))
    if result["failed"]:
        click.echo(f"{result['failed']} events were not delivered to {bootstrap}; is the broker up and the topic there?", err=True)
        sys.exit(1)


@main.command("kafka")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Broker data (default: a temp dir).")
@click.option("--topic", "topics", multiple=True, help="Create this topic once the broker is up.")
@click.option("--partitions", type=click.IntRange(1, 256), default=1, show_default=True)
def kafka_broker(workdir: str | None, topics: tuple[str, ...], partitions: int) -> None:
    """Start a single-node Kafka broker (KRaft) on loopback from Maven Central jars; Ctrl-C stops it."""
    import tempfile
    import threading

    from sluice.runtime.runner import install_interrupt
    from sluice.testing.kafka import KafkaBroker, KafkaUnavailable

    folder = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sluice-kafka-"))
    folder.mkdir(parents=True, exist_ok=True)
    click.echo("starting Kafka (the first run resolves its jars from Maven Central) ...", err=True)
    try:
        broker = KafkaBroker(folder).start()
    except KafkaUnavailable as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    try:
        for topic in topics:
            broker.create_topic(topic, partitions)
        click.echo(f"kafka ready at {broker.bootstrap} in {broker.started_in:.1f}s", err=True)
        click.echo(broker.bootstrap, nl=True)
        stop = threading.Event()
        install_interrupt(stop)
        stop.wait()
    finally:
        broker.stop()


@main.group()
def dev() -> None:
    """Development helpers that run real parts on this machine."""


@dev.group("cluster")
def dev_cluster() -> None:
    """A real single-node Kubernetes (kubelet, containerd) with Sluice's images imported; needs root."""


@dev_cluster.command("up")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="State of the cluster (default: ~/.cache/sluice/dev-cluster).")
def dev_cluster_up(workdir: str | None) -> None:
    """Build (or reuse) the binaries and images, start the node, print its kubeconfig."""
    from sluice.testing.node import NodeError, dev_record, dev_up

    if dev_record() is not None:
        click.echo("A dev cluster is already running ('sluice dev cluster status' shows it).", err=True)
        sys.exit(1)
    folder = Path(workdir) if workdir else Path.home() / ".cache" / "sluice" / "dev-cluster"
    click.echo("starting a one-node Kubernetes (a cold machine builds its binaries and images first: ~10 min) ...", err=True)
    try:
        cluster = dev_up(folder, say=lambda message: click.echo(message, err=True))
    except NodeError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    click.echo(f"node Ready in {cluster.timings['up_s']:.0f} s (images {cluster.timings['images_s']:.0f} s); "
               f"images: {', '.join(tag for _, tag in cluster.images.values())}", err=True)
    click.echo(f"export KUBECONFIG={cluster.kubeconfig}")
    if cluster.plane is not None:  # its kubectl and helm, the versions the tests use
        click.echo(f"export PATH={cluster.plane.kube_bin}:{cluster.plane.helm_bin}:$PATH")


@dev_cluster.command("down")
def dev_cluster_down() -> None:
    """Delete its pods, stop every process and undo its host changes (bridge, iptables, mounts)."""
    from sluice.testing.node import dev_down

    click.echo("dev cluster stopped." if dev_down() else "No dev cluster is running.", err=True)


@dev_cluster.command("status")
def dev_cluster_status() -> None:
    """Whether a dev cluster runs, where its kubeconfig is, and its node's state."""
    import subprocess

    from sluice.testing.node import NODE_NAME, dev_record

    record = dev_record()
    if record is None:
        click.echo("No dev cluster is running.")
        sys.exit(1)
    proc = subprocess.run([record["kubectl"], "--kubeconfig", record["kubeconfig"], "get", "node", NODE_NAME, "-o",
                           "jsonpath={.status.conditions[?(@.type=='Ready')].status}"],
                          capture_output=True, text=True, timeout=30)
    ready = proc.stdout.strip() == "True"
    click.echo(f"node {NODE_NAME}: {'Ready' if ready else 'not Ready (' + (proc.stderr.strip() or 'unknown') + ')'}")
    click.echo(f"export KUBECONFIG={record['kubeconfig']}")
    sys.exit(0 if ready else 1)


@main.group()
def bench() -> None:
    """Benchmarks (each prints a table; --json for scripts)."""


@bench.command("scheduler")
@click.option("--clients", type=click.IntRange(1, 256), default=8, show_default=True, help="Concurrent client processes.")
@click.option("--duration", "seconds", type=DurationParam(0.5, 3600), default="5s", show_default=True,
              help="Measured duration.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(0.5, 3600), hidden=True,
              callback=_seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of a table.")
@click.option("--core-queries", type=click.IntRange(1, 1_000_000), default=10_000, show_default=True,
              help="Registered queries for the pure-core decision timing.")
@click.option("--out", type=click.Path(file_okay=False), help="Also write scheduler.json and scheduler.png here.")
@click.pass_context
def bench_scheduler(ctx: click.Context, clients: int, seconds: float, old_seconds: float | None, as_json: bool,
                    core_queries: int, out: str | None) -> None:
    """Grants/s and round-trip latency of the real sidecar on loopback, and one core decision."""
    import json

    seconds = _aliased(ctx, "--duration", seconds)

    from sluice.bench import scheduler as scheduler_bench

    click.echo(f"running {clients} client(s) for {seconds:g}s against a real sidecar on loopback ...", err=True)
    try:
        result = scheduler_bench.run(clients, seconds, core_queries)
    except RuntimeError as error:
        click.echo(f"benchmark failed: {error}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(result.json()))
    else:
        click.echo(scheduler_bench.table([result]))
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scheduler.json").write_text(json.dumps(result.json(), indent=2) + "\n")
        click.echo(f"wrote {folder / 'scheduler.json'}", err=True)


@bench.command("calibrate")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/calibrate", show_default=True,
              help="Writes results.json (the sitting) here.")
@click.option("--save-reference", is_flag=True,
              help="Also keep this sitting as the reference every benchmark compares with (bench/results/sitting.json).")
@click.option("--repeat", type=click.IntRange(1, 10), default=1, show_default=True,
              help="Measure this many times; each timing's median, with its min and max under spread.")
@_json_option
def bench_calibrate(out: str, save_reference: bool, repeat: int, as_json: bool) -> None:
    """The sitting: a fixed reference of about a minute (a Python loop, Spark micro-batches, Kafka
    round trips), compared with the kept reference; every Spark benchmark records it."""
    import json

    from sluice.bench import calibrate as calibration
    from sluice.testing.kafka import KafkaUnavailable

    try:
        result = calibration.sitting(log=lambda m: click.echo(m, err=True), times=repeat)
    except (RuntimeError, KafkaUnavailable) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    if save_reference:
        kept = {k: v for k, v in result.items() if k not in ("reference_at", "vs_reference")}
        calibration.REFERENCE.write_text(json.dumps(kept, indent=2) + "\n")
        click.echo(f"kept as the reference: {calibration.REFERENCE}", err=True)
    _print_result(as_json, result, calibration.render(result))
    click.echo(f"wrote {folder / 'results.json'}", err=True)


@bench.command("overhead")
@click.option("--rounds", type=click.IntRange(3, 50), default=3, show_default=True,
              help="Rounds; each runs every mode once, in fresh processes.")
@click.option("--duration", "seconds", type=DurationParam(10, 3600), default="60s", show_default=True,
              help="Measured time per run.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(10, 3600), hidden=True,
              callback=_seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@click.option("--warmup", type=DurationParam(0, 600, legacy=True), default="20s", show_default=True,
              help="Left out at each run's start.")
@click.option("--rate", type=click.FloatRange(1, 1e6), default=1000, show_default=True, help="Kafka events per second.")
@click.option("--trigger", default="500ms", show_default=True, help="The query's micro-batch interval.")
@click.option("--sink", type=click.Choice(["noop", "kafka"]), default="noop", show_default=True,
              help="kafka: rows written to a topic by Spark's Kafka writer, and by Sluice's sink at least once "
                   "and exactly once (gated), side by side.")
@click.option("--modes", default="", help="Comma-separated modes to run (plain among them); default: every mode "
              "of the sink: plain, ungated, cameo, cameo+urgent (noop) or plain, atLeastOnce, exactlyOnce (kafka).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/overhead", show_default=True,
              help="Writes results.json, summary.txt, overhead.png and each run's files here.")
@_json_option
@click.pass_context
@_sitting_option
def bench_overhead(ctx: click.Context, rounds: int, seconds: float, old_seconds: float | None, warmup: float, rate: float,
                   trigger: str, sink: str, modes: str, out: str, as_json: bool) -> None:
    """Sluice's per-batch cost against plain Spark: one Kafka filter query run each way, side by side,
    on the same Spark setup (cameo+urgent, the lane's own setup, reported beside)."""
    from sluice.bench import overhead
    from sluice.testing.kafka import KafkaUnavailable

    seconds = _aliased(ctx, "--duration", seconds)
    _duration(trigger, "--trigger")
    only = tuple(m.strip() for m in modes.split(",") if m.strip())
    problem = overhead.check_modes(only, sink)
    if problem:
        click.echo(problem, err=True)
        sys.exit(2)
    options = overhead.Options(rounds=rounds, seconds=seconds, warmup=warmup, rate=rate, trigger=trigger, sink=sink,
                               only=only)
    _calibrate_now()
    try:
        result = overhead.run(options, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    _print_result(as_json, result, result["table"])
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/overhead.png", err=True)


_URGENT_LANE_OPTION = click.option(
    "--urgent-lane", type=click.Choice(URGENT_LANE_CHOICES), default="gated", show_default=True,
    help="Who gets the urgent lane (`sluice run --urgent-lane`): gated policies only, every policy (fifo and "
         "fair on the same slots, turns and priorities: ordering and lane then measured apart), or none.")


_TARGET_OPTION = click.option(
    "--target", type=click.Choice(["local", "node"]), default="local", show_default=True,
    help="local: `sluice run` on this machine. node: a fresh StreamingPool per run on the one-node Kubernetes (the "
         "running dev cluster, else one brought up for the benchmark; needs root): the helm-installed operator, the "
         "driver pod and its scheduler sidecar, executor pods; the policy is the pool's spec.policy.")


@bench.command("cameo")
@click.option("--scenario", type=click.Path(dir_okay=False), required=True, help="Scenario YAML (see bench/scenarios/).")
@click.option("--policies", default="fifo,fair,cameo", show_default=True,
              help="Policies to compare, in micro-batches; add `auto` for cameo with each query's own execution "
                   "mode (Real-time Mode where its SLA needs it), and `auto-lane` for the same with the Real-time "
                   "queries in an application of their own.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True, help="Repeats (policies interleaved).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out", show_default=True,
              help="Writes results.json, latency.png, cdf.png and each run's files here.")
@click.option("--delivery", type=click.Choice(["atLeastOnce", "exactlyOnce"]),
              help="Every Kafka sink's `spec.sink.delivery` (default: the scenario's own): the exactly-once cost on "
                   "a scenario, one run per delivery. Under `auto` an exactlyOnce query stays in micro-batches.")
@_TARGET_OPTION
@click.option("--gate", "gates", default="inprocess", show_default=True,
              help="Local target: where a gated policy's scheduler runs, in the runtime's process or as a pool pod "
                   "runs it, a sidecar process over HTTP on loopback; `inprocess,sidecar` runs each gated policy "
                   "with both (`cameo` and `cameo+sidecar`) and reports each batch's ask time side by side.")
@click.option("--executors", type=click.IntRange(1, 64),
              help="Local target: every run on Spark's local-cluster with this many one-core executor JVMs "
                   "(`sluice run --executors`; the lane's priorities, not its slots and turns), where the default "
                   "is one local[*] JVM.")
@_json_option
@_sitting_option
@_URGENT_LANE_OPTION
def bench_cameo(scenario: str, policies: str, repeat: int, out: str, delivery: str | None, target: str,
                gates: str, executors: int | None, as_json: bool, urgent_lane: str) -> None:
    """Cameo vs Spark's FIFO and FAIR on real Spark with Kafka load: latency per query, side by side."""
    from sluice.api.scenario import ScenarioError, load_scenario
    from sluice.bench import cameo as cameo_bench
    from sluice.testing.kafka import KafkaUnavailable

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in cameo_bench.VARIANTS]
    if unknown or not chosen:
        click.echo(f"--policies: use some of {', '.join(cameo_bench.VARIANTS)} (got {policies!r}).", err=True)
        sys.exit(1)
    try:
        sink_delivery = cast("Delivery | None", delivery)  # click's Choice holds the literal's values
        cameo_bench.check_delivery(Path(scenario), load_scenario(Path(scenario))[1], sink_delivery)
        gate_list = [g.strip() for g in gates.split(",") if g.strip()]
        cameo_bench.check_target(target, chosen, urgent_lane, gate_list, executors)
        _calibrate_now()
        result = cameo_bench.run(Path(scenario), chosen, repeat, Path(out), log=lambda m: click.echo(m, err=True),
                                 urgent_lane=urgent_lane, delivery=sink_delivery, target=target, gates=gate_list,
                                 executors=executors)
    except (ScenarioError, KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    summary = "\n".join([result["table"], "", *result["ratios"], *result["throughput"]])
    _print_result(as_json, result, summary)
    (Path(out) / "summary.txt").write_text(summary + "\n")
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/latency.png, {out}/cdf.png", err=True)


def _counts(value: str, option: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        counts = ()
    if not counts or any(c < 1 for c in counts) or list(counts) != sorted(set(counts)):
        click.echo(f"{option}: give ascending whole numbers of queries, e.g. 1,10,50 (got {value!r}).", err=True)
        sys.exit(1)
    return counts


@bench.command("density")
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
@_json_option
@_sitting_option
def bench_density(counts: str, per_app: str, warmup: float, window: float, out: str, conf: tuple[str, ...],
                  capacity: int, critical_lane: int, as_json: bool) -> None:
    """How many tenants' queries one pool holds with every SLA kept, and memory per query against one app each."""
    from sluice.bench import density as density_bench
    from sluice.testing.kafka import KafkaUnavailable

    bad = [c for c in conf if "=" not in c or not c.split("=", 1)[0].startswith("spark.")]
    if bad:
        click.echo(f"--conf: give a Spark setting as spark.KEY=VALUE (got {bad[0]!r}).", err=True)
        sys.exit(1)
    options = density_bench.Options(counts=_counts(counts, "--counts"),
                                    per_app=() if per_app.strip() == "none" else _counts(per_app, "--per-app"),
                                    warmup=warmup, window=window, conf=conf, capacity=capacity,
                                    critical_lane=critical_lane)
    _calibrate_now()
    try:
        result = density_bench.run(options, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    _print_result(as_json, result, density_bench.render(result))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/density.png", err=True)


@bench.command("capacity")
@click.option("--scenario", type=click.Path(dir_okay=False), required=True, help="Scenario YAML (see bench/scenarios/).")
@click.option("--policies", default="fifo,fair,cameo", show_default=True, help="Policies whose capacity is searched.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/capacity", show_default=True,
              help="Writes results.json, summary.txt, capacity.png and each probe's files here.")
@click.option("--max-minutes", type=click.FloatRange(1, 24 * 60), default=25, show_default=True,
              help="Stop here and report the bracket reached (no probe starts that would not end in time).")
@click.option("--max-probes", type=click.IntRange(1, 50), default=12, show_default=True,
              help="Probes per policy at most; at least min(4, this) are made.")
@_TARGET_OPTION
@_json_option
@_sitting_option
@_URGENT_LANE_OPTION
def bench_capacity(scenario: str, policies: str, out: str, max_minutes: float, max_probes: int, target: str,
                   as_json: bool, urgent_lane: str) -> None:
    """The highest load (one multiplier on every rate) each policy carries with every SLA kept."""
    from sluice.api.scenario import ScenarioError, load_scenario
    from sluice.bench import cameo as cameo_bench
    from sluice.bench import capacity as capacity_bench
    from sluice.bench.capacity_search import Search
    from sluice.testing.kafka import KafkaUnavailable

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in cameo_bench.VARIANTS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        click.echo(f"--policies: use some of {', '.join(cameo_bench.VARIANTS)}, each once (got {policies!r}).", err=True)
        sys.exit(1)
    search = Search(min_probes=min(4, max_probes), max_probes=max_probes)
    try:
        load_scenario(Path(scenario))
        cameo_bench.check_target(target, chosen, urgent_lane)
        _calibrate_now()
        result = capacity_bench.run(Path(scenario), chosen, Path(out), max_minutes, search,
                                    log=lambda m: click.echo(m, err=True), urgent_lane=urgent_lane, target=target)
    except (ScenarioError, KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    _print_result(as_json, result, capacity_bench.render(result))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/capacity.png", err=True)


@bench.command("rescale")
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
              help="Writes results.json, table.md, rescale.png and each run's files here.")
@click.option("--from-results", "from_results", type=click.Path(dir_okay=False), default=None,
              help="Run nothing: render the table and plot again from an earlier run's results.json.")
@_json_option
@_sitting_option
def bench_rescale(strategies: str, stores: str, directions: str, keys: int | None, state_mb: int | None, rate: float, steady: float,
                  after: float, sla: float, grace: float, out: str, from_results: str | None, as_json: bool) -> None:
    """Megaphone's figure: a stateful query's batches while the pool grows 2->4 and shrinks 4->2 (local-cluster)."""
    from sluice.bench import rescale as rescale_bench
    from sluice.testing.kafka import KafkaUnavailable

    if from_results is not None:
        try:
            document = rescale_bench.rerender(Path(from_results), Path(out))
        except (OSError, ValueError, KeyError, TypeError) as error:
            click.echo(f"--from-results: {from_results} is no results.json of `sluice bench rescale` ({error}).", err=True)
            sys.exit(1)
        _print_result(as_json, document, rescale_bench.table_text(document["stores"]))
        return

    chosen = [p.strip() for p in strategies.split(",") if p.strip()]
    if not chosen or any(p not in rescale_bench.STRATEGIES for p in chosen):
        click.echo(f"--strategies: use some of {', '.join(rescale_bench.STRATEGIES)} (got {strategies!r}).", err=True)
        sys.exit(1)
    providers = [p.strip() for p in stores.split(",") if p.strip()]
    if not providers or any(p not in rescale_bench.STORES for p in providers):
        click.echo(f"--stores: use some of {', '.join(rescale_bench.STORES)} (got {stores!r}).", err=True)
        sys.exit(1)
    changes = [d.strip() for d in directions.split(",") if d.strip()]
    if not changes or any(d not in rescale_bench.DIRECTIONS for d in changes):
        click.echo(f"--directions: use some of {', '.join(rescale_bench.DIRECTIONS)} (got {directions!r}).", err=True)
        sys.exit(1)
    if state_mb is None:
        options = rescale_bench.Options(keys=keys or rescale_bench.Options.keys, rate=rate, steady=steady, after=after,
                                        sla=f"{sla:g}s", grace=grace)
    else:
        try:
            keys, value_bytes = rescale_bench.sized(state_mb, keys)
        except ValueError as error:
            click.echo(f"{error}.", err=True)
            sys.exit(1)
        options = rescale_bench.Options(keys=keys, rate=rate, steady=steady, after=after, sla=f"{sla:g}s", state_mb=state_mb,
                                        value_bytes=value_bytes, partitions=rescale_bench.STATE_PARTITIONS, grace=grace)
    _calibrate_now()
    try:
        document = rescale_bench.run(options, chosen, providers, Path(out), log=lambda m: click.echo(m, err=True),
                                     directions=[d for d in rescale_bench.DIRECTIONS if d in changes])
    except (KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    _print_result(as_json, document, rescale_bench.table_text(document["stores"]))
    click.echo(f"wrote {out}/results.json, {out}/table.md, {out}/rescale.png ({document['wall_seconds']} s)", err=True)


@bench.command("ds2")
@click.option("--policies", default="ds2,threshold", show_default=True,
              help="Autoscaling policies compared in the same run: ds2 (the operator's) and threshold.")
@click.option("--rates", default="300,3000,1500", show_default=True,
              help="Events per second of the low, high and middle phases.")
@click.option("--phase", type=DurationParam(20, 3600, legacy=True), default="60s", show_default=True,
              help="Time per phase.")
@click.option("--utilization", type=click.FloatRange(0.001, 1), default=0.35, show_default=True,
              help="The utilization target both policies size for (low, so this machine's loads span 1 to 3 executors).")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/ds2", show_default=True,
              help="Writes results.json, table.md, ds2.png and each run's files here.")
@_json_option
@_sitting_option
def bench_ds2(policies: str, rates: str, phase: float, utilization: float, out: str, as_json: bool) -> None:
    """DS2's convergence on real executors (local-cluster), under- and over-provisioned, against a threshold policy."""
    from sluice.bench import ds2 as ds2_bench
    from sluice.testing.kafka import KafkaUnavailable

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    if not chosen or any(p not in ds2_bench.POLICIES for p in chosen):
        click.echo(f"--policies: use some of {', '.join(ds2_bench.POLICIES)} (got {policies!r}).", err=True)
        sys.exit(1)
    try:
        low, high, mid = (float(r) for r in rates.split(","))
    except ValueError:
        click.echo(f"--rates: give three events-per-second figures, low,high,middle, such as 300,3000,1500 (got {rates!r}).",
                   err=True)
        sys.exit(1)
    if min(low, high, mid) <= 0:
        click.echo(f"--rates: every rate must be above zero (got {rates!r}).", err=True)
        sys.exit(1)
    options = ds2_bench.Options(rates=(low, high, mid), phase=phase, utilization=utilization)
    _calibrate_now()
    try:
        result = ds2_bench.run(options, chosen, Path(out), log=lambda m: click.echo(m, err=True))
    except (KafkaUnavailable, RuntimeError) as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    _print_result(as_json, result, ds2_bench.table_text(result))
    click.echo(f"wrote {out}/results.json, {out}/table.md, {out}/ds2.png ({result['wall_seconds']} s)", err=True)

@bench.command("simulate")
@click.option("--counts", default="100,1000,10000", show_default=True, help="Queries simulated at each step (ascending).")
@click.option("--per-tenant", type=click.IntRange(1, 10_000), default=10, show_default=True, help="Queries per tenant.")
@click.option("--duration", type=DurationParam(1, 24 * 3600), default="10m", show_default=True,
              help="Simulated time per step.")
@click.option("--out", type=click.Path(file_okay=False), default="bench/out/simulate", show_default=True,
              help="Writes results.json, summary.txt and simulate.png here.")
@click.option("--sizing", type=click.IntRange(0, 100_000), default=200, show_default=True,
              help="Also time the operator's SLA-aware sizing (every pool sync) of a pool of this many queries; 0: not.")
@_json_option
def bench_simulate(counts: str, per_tenant: int, duration: float, out: str, sizing: int, as_json: bool) -> None:
    """How fast `sluice simulate` runs a large pool (10,000 queries of 1,000 tenants), and each scheduling decision."""
    from sluice.bench import simulate as simulate_bench

    options = simulate_bench.Options(counts=_counts(counts, "--counts"), per_tenant=per_tenant,
                                     duration=duration, sizing=sizing)
    result = simulate_bench.run(options, Path(out), log=lambda m: click.echo(m, err=True))
    _print_result(as_json, result, simulate_bench.render(result["steps"], result["sizing"], result["compiled"]))
    click.echo(f"wrote {out}/results.json, {out}/summary.txt, {out}/simulate.png", err=True)


if __name__ == "__main__":
    main()
