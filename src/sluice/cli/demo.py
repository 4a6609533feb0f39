"""`sluice demo`: two tenants on one Spark, fifo then cameo, the heavy load sized on the machine it runs on."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from sluice.api.constants import POLICIES
from sluice.api.query import RateSource, StreamingQuery
from sluice.api.wire import QueryStatus
from sluice.cli.common import (
    EXIT_ERROR,
    DurationParam,
    aliased,
    fail,
    json_option,
    load_queries,
    seconds_alias,
)

HOL_TIMES = 2.0
"""The heavy tenant's batch is sized to take this many times the tight query's SLA: a batch queued
behind it misses, and the heavy query still keeps its own SLA. Measured on two cores: a batch of
1.65x the SLA every 10 s (2.8M rows) left fifo 83% of the tight query's rows within it, cameo 100%;
batches of 6M rows stalled the whole JVM, cameo's tight query too."""
MEASURE = (30.0, 25.0, 25.0)
"""The sizing measurement (`demo-measure`), the heavy query alone in one JVM, a batch every
`MEASURE_INTERVAL`: 30 s at its manifest's rate while the JVM compiles its hot paths (not used:
a cold JVM's batches cost up to 3x the steady ones), then 25 s at the rate those costs put near
the target batch, then 25 s at a third of it. The line through the two warm batch sizes tells
the fixed cost from the cost a row (from one size alone the fixed part counts per row), and the
demo's rate never reaches past `MAX_STRETCH` times the larger one's rows: a row costs more in
larger batches (their memory), and a load sized past what was measured stalled the whole JVM."""
MEASURE_INTERVAL = 5.0
MAX_STRETCH = 1.25


@dataclass(frozen=True)
class Sizing:
    """How the demo sized the heavy tenant's load on this machine: its measured batch cost (a fixed
    part and a part per row) and the rate whose batch at its trigger interval takes `target_ms`."""

    heavy: str
    tight: str
    target_ms: float
    interval_s: float
    fixed_ms: float
    per_row_us: float
    rate: int

    def line(self) -> str:
        return (f"sized: {self.heavy} costs {self.fixed_ms:,.0f} ms + {self.per_row_us:.2f} µs a row here, so "
                f"{self.rate:,} rows/s make its batch every {self.interval_s:g}s take about "
                f"{self.batch_ms / 1000:.1f}s (the aim: {HOL_TIMES:g}x {self.tight}'s SLA, within what was measured)")

    @property
    def batch_ms(self) -> float:
        """The heavy batch the measured costs predict at the chosen rate."""
        return self.fixed_ms + self.per_row_us / 1000 * self.rate * self.interval_s


def cost_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(fixed ms, µs a row) of the line through two measured (rows a batch, ms a batch) points, or
    None when they cannot give one (equal sizes, or a cost that falls as the rows grow)."""
    (rows_a, ms_a), (rows_b, ms_b) = sorted(points)
    if rows_b <= rows_a or ms_b <= ms_a:
        return None
    per_row_ms = (ms_b - ms_a) / (rows_b - rows_a)
    return max(0.0, ms_a - per_row_ms * rows_a), per_row_ms * 1000


def heavy_rate(fixed_ms: float, per_row_us: float, interval_s: float, target_ms: float) -> int | None:
    """Rows per second whose batch (its rows arriving over `interval_s`) takes `target_ms` by the
    measured cost, or None when the fixed part alone takes it (no rate can size it)."""
    if per_row_us <= 0 or target_ms <= fixed_ms:
        return None
    return max(1, round((target_ms - fixed_ms) / (per_row_us / 1000) / interval_s))


def demo_roles(queries: list[StreamingQuery]) -> tuple[StreamingQuery, StreamingQuery]:
    """The tight query (the smallest SLA) and the heavy one (the largest, a `rate` source with a
    trigger interval); ValueError with one sentence when the manifests have no such pair."""
    by_sla = sorted(queries, key=lambda q: q.spec.sla.latencyTarget.seconds)
    tight, heavy = by_sla[0], by_sla[-1]
    if tight is heavy:
        raise ValueError("the demo needs two queries, a tight SLA and a loose one; add a second manifest")
    if not isinstance(heavy.spec.source, RateSource) or heavy.spec.trigger is None \
            or heavy.spec.trigger.interval.seconds <= 0:
        raise ValueError(f"{heavy.key}: the demo sizes the loosest-SLA query's load, so give it a `rate` source and "
                         "spec.trigger.interval")
    return tight, heavy


def _manifest(query_file: Path, out: Path, rate: int | None = None, interval: float | None = None) -> Path:
    """A copy of a manifest with its rate source's rowsPerSecond and its trigger interval replaced."""
    import yaml

    document = yaml.safe_load(query_file.read_text(encoding="utf-8"))
    if rate is not None:
        document["spec"]["source"]["rowsPerSecond"] = rate
    if interval is not None:
        document["spec"]["trigger"] = {"interval": f"{interval:g}s"}
    out.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return out


def _run_policy(files: list[Path], policy: str, seconds: float, warmup: float, work: Path) -> dict[str, Any] | None:
    """One policy in a process of its own (a fresh JVM with its own options); its report, or None."""
    import json
    import subprocess

    out = work / f"report-{policy}.json"
    child = subprocess.run([sys.executable, "-m", "sluice", "demo-policy", *(a for f in files for a in ("-f", str(f))),
                            "--policy", policy, "--duration", f"{seconds:g}s", "--warmup", f"{warmup:g}s",
                            "--report", str(out)], check=False)
    if child.returncode != 0 or not out.exists():
        click.echo(f"[{policy}] the run stopped (exit {child.returncode}); no figures for it.", err=True)
        return None
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def size_load(tight: StreamingQuery, heavy: StreamingQuery, heavy_file: Path, work: Path) -> Sizing:
    """Measure the heavy query alone at two rates and size its rate; ValueError with one sentence
    when it cannot."""
    import json
    import subprocess

    assert heavy.spec.trigger is not None  # demo_roles checked
    target = HOL_TIMES * tight.spec.sla.latencyTarget.ms
    out = work / "measure.json"
    child = subprocess.run([sys.executable, "-m", "sluice", "demo-measure", "-f", str(heavy_file),
                            "--target-ms", f"{target:g}", "--report", str(out)], check=False)
    if child.returncode != 0 or not out.exists():
        raise ValueError(f"the sizing run stopped (exit {child.returncode})")
    points = [(float(rows), float(ms)) for rows, ms in json.loads(out.read_text())]
    line = cost_line(points)
    if line is None:
        raise ValueError(f"{heavy.key}'s batches did not cost more with more rows ({points})")
    interval = heavy.spec.trigger.interval.seconds
    rate = heavy_rate(line[0], line[1], interval, target)
    if rate is not None:
        rate = min(rate, round(MAX_STRETCH * max(rows for rows, _ in points) / interval))
    if rate is None:
        raise ValueError(f"{heavy.key}'s batch costs {line[0]:,.0f} ms whatever its rows here, more than {target:,.0f} ms")
    return Sizing(heavy.key, tight.key, target, interval, line[0], line[1], rate)


@click.command()
@click.option("--duration", "seconds", type=DurationParam(10, 3600), default="60s", show_default=True,
              help="Run time per policy.")
@click.option("--seconds", "old_seconds", type=click.FloatRange(10, 3600), hidden=True,
              callback=seconds_alias("--duration"), help="Old form of --duration (bare seconds).")
@click.option("--examples", "folder", help="Folder of the demo's manifests (default: the ones installed with Sluice).")
@click.option("--policies", default="fifo,cameo", show_default=True, help="Policies to compare, in order.")
@click.option("--report", type=click.Path(dir_okay=False),
              help="Write both runs' reports and the sizing as JSON here.")
@click.option("--warmup", type=DurationParam(0, 600, legacy=True), default="10s", show_default=True,
              help="Left out of the figures at each run's start (Spark's first batches compile and load).")
@click.option("--sizing/--no-sizing", default=True, show_default=True,
              help="Size the heavy tenant's load on this machine first (about 90 s); --no-sizing: the manifests' rate.")
@json_option
@click.pass_context
def demo(ctx: click.Context, seconds: float, old_seconds: float | None, folder: str | None, policies: str,
         report: str | None, warmup: float, sizing: bool, as_json: bool) -> None:
    """Two tenants on one Spark: a tight-SLA filter beside a heavy windowed aggregation, fifo then cameo.

    The aggregation's load is first sized on this machine so that its batch takes a few times the
    filter's SLA: the head-of-line blocking that fifo suffers and cameo avoids. Both policies then
    run the same load."""
    seconds = aliased(ctx, "--duration", seconds)
    import json
    import tempfile

    files = demo_manifests(folder)
    if not files:
        fail(f"No manifests in '{folder}'; pass --examples with a folder of YAML files.")
    queries, _ = load_queries(tuple(str(f) for f in files))
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        fail(f"--policies: unknown {', '.join(unknown)}; use {', '.join(POLICIES)}.")
    try:
        tight, heavy = demo_roles(queries)
    except ValueError as error:
        fail(f"{error}.")
    heavy_file = next(f for f, q in zip(files, queries, strict=True) if q is heavy)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sluice-demo-") as folder_name:
        work = Path(folder_name)
        sized: Sizing | None = None
        if sizing:
            click.echo(f"sizing {heavy.key}'s load on this machine first: it runs alone at three rates for about 90 s, so that its "
                       f"batch takes about {HOL_TIMES:g}x {tight.key}'s {tight.spec.sla.latencyTarget} SLA ...",
                       err=True)
            try:
                sized = size_load(tight, heavy, heavy_file, work)
            except ValueError as error:
                click.echo(f"{error}; the demo runs the manifests' rate instead.", err=True)
        if sized is not None:
            click.echo(sized.line(), err=True)
            files = [_manifest(f, work / f.name, rate=sized.rate) if f == heavy_file else f for f in files]
        for policy in chosen:
            click.echo(f"[{policy}] running {len(queries)} queries for {seconds:g}s on Spark local[*] "
                       f"(the first {warmup:g}s left out) ...", err=True)
            found = _run_policy(files, policy, seconds, warmup, work)
            if found is None:
                break
            results[policy] = found
    if not results:
        sys.exit(EXIT_ERROR)
    document = {"sizing": None if sized is None else asdict(sized), "runs": results,
                "verdict": demo_verdict(results, tight)}
    if as_json:
        click.echo(json.dumps(document))
    else:
        if sized is not None:
            click.echo(sized.line())
        click.echo(demo_table(results, queries))
        click.echo(document["verdict"])
    if report:
        Path(report).write_text(json.dumps(document, indent=2) + "\n")


def demo_verdict(results: dict[str, dict[str, Any]], tight: StreamingQuery) -> str:
    """One line: what the table shows for the tight query, fifo against cameo (or the first policy
    against the last), and whether the one that orders by deadline kept its goal."""
    policies = list(results)
    goal = 0.99 if tight.spec.sla.critical else 0.95
    figures = {p: results[p]["queries"].get(tight.key, {}) for p in policies}
    if len(policies) < 2 or any(f.get("attainment") is None or not f.get("p99_ms") for f in figures.values()):
        return f"{tight.key}: not enough measured batches under every policy to compare them."
    first, last = policies[0], policies[-1]
    a, b = figures[first], figures[last]
    kept = "kept" if b["attainment"] >= goal else "missed"
    line = (f"{tight.key} (SLA {tight.spec.sla.latencyTarget}, goal {goal:.0%} of rows): {last} {kept} it with "
            f"{b['attainment']:.1%} within SLA, p99 {b['p99_ms']:,.0f} ms; {first} {a['attainment']:.1%}, p99 "
            f"{a['p99_ms']:,.0f} ms ({a['p99_ms'] / b['p99_ms']:.1f}x {last}'s)")
    if a["attainment"] < goal <= b["attainment"]:
        return line + f": under {first} its batches wait behind the heavy tenant's, under {last} they go first."
    if a["attainment"] >= goal:
        return line + f": on this machine the heavy tenant's batch did not block it long enough to miss under {first}."
    return line + "."


@click.command("demo-policy", hidden=True)
@click.option("-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False))
@click.option("--policy", type=click.Choice(POLICIES), required=True)
@click.option("--duration", "seconds", type=DurationParam(1, 3600), required=True)
@click.option("--warmup", type=DurationParam(0, 600), required=True)
@click.option("--report", type=click.Path(dir_okay=False), required=True)
def demo_policy(files: tuple[str, ...], policy: str, seconds: float, warmup: float, report: str) -> None:
    """One policy of `sluice demo`, in the process the demo started for it."""
    import threading

    from sluice.runtime import runner

    queries, _ = load_queries(files)
    stop = threading.Event()
    runner.install_interrupt(stop)
    try:
        result = runner.run(queries, runner.RunOptions(policy=policy, duration=seconds, stop=stop, warmup=warmup,
                                                       on_tick=demo_progress(policy, seconds)))
    except RuntimeError as error:  # the driver JVM died under the run
        fail(str(error))
    runner.write_report(result, Path(report))


@click.command("demo-measure", hidden=True)
@click.option("-f", "--filename", "file", required=True, type=click.Path(dir_okay=False))
@click.option("--target-ms", type=click.FloatRange(1), required=True)
@click.option("--report", type=click.Path(dir_okay=False), required=True)
def demo_measure(file: str, target_ms: float, report: str) -> None:
    """The sizing's measurement: the heavy query alone in one JVM, at its own rate and then at the
    rate its first costs say is near `target_ms` a batch; the (rows a batch, ms a batch) of each."""
    import json
    import tempfile
    import threading

    from sluice.runtime import runner

    stop = threading.Event()
    runner.install_interrupt(stop)
    points: list[tuple[float, float]] = []
    rate: float | None = None
    with tempfile.TemporaryDirectory(prefix="sluice-measure-") as work:
        for n, seconds in enumerate(MEASURE):
            probe = _manifest(Path(file), Path(work) / f"phase-{n}.yaml", rate=None if rate is None else round(rate),
                              interval=MEASURE_INTERVAL)
            queries, _ = load_queries((str(probe),))
            query = queries[0]
            assert isinstance(query.spec.source, RateSource)
            try:
                found = runner.run(queries, runner.RunOptions(policy="fifo", duration=seconds, stop=stop))
            except RuntimeError as error:  # the driver JVM died under the run
                fail(str(error))
            costs = found["queries"].get(query.key, {}).get("costs")
            if not costs:
                fail(f"the sizing run measured no batch costs of {query.key} at {query.spec.source.rowsPerSecond:,} rows/s")
            rows = query.spec.source.rowsPerSecond * MEASURE_INTERVAL
            if n == 0:  # warm-up; from one size the fixed part counts per row: the target's rows are about twice
                first = heavy_rate(costs["fixed_ms"], costs["per_row_us"], MEASURE_INTERVAL, target_ms)
                rate = 2 * (first or query.spec.source.rowsPerSecond)
                continue
            points.append((rows, costs["fixed_ms"] + costs["per_row_us"] * rows / 1000))  # its median batch
            rate = (rate or 0) / 3
    Path(report).write_text(json.dumps(points) + "\n")


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

