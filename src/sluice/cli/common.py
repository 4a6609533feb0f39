"""What every `sluice` command shares: exit codes, the DURATION type, manifests read with one
sentence per problem, `--json`, and the machine speed a benchmark records."""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from sluice.api.constants import BULK_TASKS_PER_CORE, URGENT_LANE_CHOICES
from sluice.api.manifest import ManifestError, parse_text
from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery

EXIT_OK = 0
"""Done."""
EXIT_ERROR = 1
"""Bad input (one sentence names the field and the fix) or a failed run."""
EXIT_USAGE = 2
"""A command line click could not parse (an unknown option, a missing argument)."""
EXIT_SLA_MISSED = 3
"""`sluice size`: no pool up to --max-executors keeps every SLA."""


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Say one sentence on stderr and exit with `code` (nothing is left half done)."""
    click.echo(message, err=True)
    sys.exit(code)


def load_queries(files: tuple[str, ...]) -> tuple[list[StreamingQuery], StreamingPool | None]:
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
    if errors:
        fail("\n".join(str(problem) for problem in errors))
    if not queries:
        fail("No StreamingQuery in the given files; pass at least one query manifest with -f.")
    return queries, pool


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
            self.fail(f"{text} is outside {seconds_text(self.low)} to {seconds_text(self.high)}.", param, ctx)
        return seconds


def seconds_text(seconds: float) -> str:
    return "no limit" if seconds == float("inf") else f"{seconds:g}s"


def seconds_alias(new: str) -> Callable[[click.Context, click.Parameter, float | None], float | None]:
    """The callback of an old bare-seconds flag kept as an alias of `new` (a duration flag)."""

    def callback(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is not None:
            click.echo(f"{param.opts[-1]} {value:g} is now {new} {value:g}s.", err=True)
            ctx.meta[f"alias:{new}"] = value
        return value

    return callback


def aliased(ctx: click.Context, new: str, value: float) -> float:
    """The value of duration flag `new`, or of its old alias when that was given."""
    return float(ctx.meta.get(f"alias:{new}", value))


def json_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as JSON (a benchmark: the document it writes to results.json) "
                             "instead of the table.")(f)


def calibrate_now() -> None:
    """Measure the machine speed for the benchmark about to run (its input already checked), unless
    `--no-calibrate`; a calibration that fails is said and recorded, and the benchmark runs on."""
    ctx = click.get_current_context()
    if not ctx.meta.get("calibrate", False):
        ctx.meta["speed"] = {"skipped": "--no-calibrate"}
        return
    from sluice.bench import calibrate as calibration
    from sluice.testing.kafka import KafkaUnavailable

    try:
        ctx.meta["speed"] = calibration.speed(log=lambda m: click.echo(m, err=True))
    except (RuntimeError, KafkaUnavailable) as error:
        ctx.meta["speed"] = {"error": str(error)}
        click.echo(f"the machine speed was not measured ({error}); the benchmark runs on.", err=True)


def print_result(as_json: bool, result: dict[str, object], table: str) -> None:
    import json

    speed = click.get_current_context().meta.get("speed")
    if speed is not None:
        result = {**result, "sitting": speed}
    click.echo(json.dumps(result, default=str) if as_json else table)


def calibrate_option(f: Callable[..., None]) -> Callable[..., None]:
    """`--calibrate/--no-calibrate` on a benchmark: the machine speed measured once its input is checked
    (`calibrate_now`, `sluice bench calibrate`), one line when it is off the reference, and
    `"sitting"` in the results.json the benchmark writes into its `--out` (and in its `--json`)."""

    @functools.wraps(f)
    def wrapper(*args: object, calibrate: bool, **kwargs: object) -> None:
        import json

        ctx = click.get_current_context()
        started = time.time()
        ctx.meta["calibrate"] = calibrate
        f(*args, **kwargs)
        results = Path(str(kwargs["out"])) / "results.json"
        if "speed" in ctx.meta and results.exists() and results.stat().st_mtime >= started:
            document = json.loads(results.read_text())
            document["sitting"] = ctx.meta["speed"]
            results.write_text(json.dumps(document, indent=2, default=str) + "\n")

    return click.option("--calibrate/--no-calibrate", default=True, show_default=True,
                        help="Measure the machine speed first (`sluice bench calibrate`, about a minute) and record it "
                             "in results.json.")(wrapper)

def parse_counts(value: str, option: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        counts = ()
    if not counts or any(c < 1 for c in counts) or list(counts) != sorted(set(counts)):
        fail(f"{option}: give ascending whole numbers of queries, e.g. 1,10,50 (got {value!r}).")
    return counts


URGENT_LANE_OPTION = click.option(
    "--urgent-lane", type=click.Choice(URGENT_LANE_CHOICES), default="gated", show_default=True,
    help="Who gets the urgent lane (`sluice run --urgent-lane`): gated policies only, every policy (fifo and "
         "fair on the same slots, turns and priorities: ordering and lane then measured apart), or none.")


BULK_TASKS_OPTION = click.option(
    "--bulk-tasks", type=click.IntRange(1, 63),
    help="Node target: every pool's spec.executor.bulkTasks (bulk tasks at once in each executor under a gated "
         f"policy's urgent lane, at most {BULK_TASKS_PER_CORE} a core); default: the pool's (its cores).")


TARGET_OPTION = click.option(
    "--target", type=click.Choice(["local", "node"]), default="local", show_default=True,
    help="local: `sluice run` on this machine. node: a fresh StreamingPool per run on the one-node Kubernetes (the "
         "running dev cluster, else one brought up for the benchmark; needs root): the helm-installed operator, the "
         "driver pod and its scheduler sidecar, executor pods; the policy is the pool's spec.policy.")


def from_results_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option("--from-results", "from_results", type=click.Path(dir_okay=False), default=None,
                        help="Run nothing: the table and the plot again, into --out, from an earlier run's "
                             "results.json.")(f)


def rerender(render: Callable[[Path, Path], tuple[dict[str, Any], str]], results: str, out: str,
             as_json: bool) -> None:
    """`--from-results`: a benchmark's table (and summary.txt) and plot drawn again from its results.json."""
    try:
        document, table = render(Path(results), Path(out))
    except (OSError, ValueError, KeyError, TypeError) as error:
        fail(f"--from-results: {results} is no results.json of this benchmark ({error}).")
    (Path(out) / "summary.txt").write_text(table + "\n")
    click.echo(json.dumps(document, default=str) if as_json else table)
    click.echo(f"wrote {out}/summary.txt and the plot from {results}", err=True)
