"""What-if validation's measured side (`bench/run-all-validate.sh`): a recorded run's report with
the harness's own figures for each query (every row sent judged, `sluice bench cameo`'s
results.json), so `sluice simulate --costs` sets the prediction beside what the harness measured,
not beside the runtime's status.

    python -m sluice.bench.validate REPORT RESULTS POLICY OUT
    python -m sluice.bench.validate --table DIR     (the validation table of DIR/<scenario>/sim-<model>/)
    python -m sluice.bench.validate --recent-only REPORT OUT   (the work refitted without the kept batches)
    python -m sluice.bench.validate --executors REPORT   (the executors a node-target run's pool held longest)
    python -m sluice.bench.validate --steady SECONDS SCENARIO REPORT OUT   (judged from SECONDS into the load on)
"""

from __future__ import annotations

import json
import math
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

from sluice.scheduler.costs import WorkSample, fit_work


def judged_report(report: dict[str, Any], results: dict[str, Any], policy: str) -> dict[str, Any]:
    """`report` with each query's p99_ms and attainment replaced by the harness's for `policy`
    (the runtime's kept as runtime_p99_ms and runtime_attainment), the run's machine speed (`sitting`), and the
    cores the rest of the machine took while the load ran (`machine`, when the results have it)."""
    harness = results.get("policies", {}).get(policy)
    if not isinstance(harness, dict):
        raise ValueError(f"the results have no figures for policy {policy!r}; give the policy the benchmark ran.")
    out: dict[str, Any] = json.loads(json.dumps(report))  # a deep copy: the recording stays as it was
    for key, entry in out.get("queries", {}).items():
        judged = harness.get(key)
        if not isinstance(judged, dict):
            raise ValueError(f"the results have no figures for query {key}; give the results of the same run.")
        entry["runtime_p99_ms"], entry["runtime_attainment"] = entry.get("p99_ms"), entry.get("attainment")
        entry["p99_ms"], entry["attainment"] = judged.get("p99_ms"), judged.get("attainment")
    out["sitting"] = results.get("sitting")
    machine = (results.get("machine") or {}).get(policy) or [None]
    if machine[0] is not None:  # the cores the rest of the machine took while the load ran (first repeat)
        out["machine"] = machine[0]
    out["measured_by"] = "the benchmark harness: every row sent, judged at the sink"
    return out


def recent_only(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with each query's work refitted from its recent batches alone (`work_samples`:
    the fit of before the run's largest older batches were kept), so one recording is simulated
    both ways; a query whose recording has no samples, or too few recent ones, keeps its costs."""
    out: dict[str, Any] = json.loads(json.dumps(report))
    for entry in out.get("queries", {}).values():
        costs, samples = entry.get("costs"), (entry.get("work_samples") or {}).get("recent")
        work = fit_work([WorkSample(*s) for s in samples]) if costs and samples else None
        if costs and work is not None:
            costs.update(work.figures())
    return out


def held_executors(report: dict[str, Any]) -> int:
    """The executor count a node-target run's pool held longest while the load ran (the report's
    `executors`: [seconds since the load started, count] at each poll; ties go to the larger), so
    the simulation's pool, of one size, is the one the run mostly had; 1 without a record."""
    points = sorted((float(t), int(n)) for t, n in report.get("executors") or [] if n >= 1)
    held: dict[int, float] = {}
    for (t, n), (later, _) in pairwise(points):
        held[n] = held.get(n, 0.0) + later - t
    if points:
        held.setdefault(points[-1][1], 0.0)
    return max(held, key=lambda n: (held[n], n)) if held else 1


def steady_report(report: dict[str, Any], scenario: Path, since: float) -> dict[str, Any]:
    """`report` (a judged node-target run's, each query with its batches' `timeline`: [seconds
    since the load started, rows, latencies at the grid's quantiles]) with each query's p99_ms and
    attainment over the batches committed `since` seconds after the load started and later: the
    pool once its JVMs have warmed up and its executors joined, as `sluice simulate --warmup`
    counts. The SLAs are the scenario's."""
    from sluice.api.scenario import load_scenario

    from .node import timeline_figures

    _, queries = load_scenario(scenario)
    slas = {q.key: q.spec.sla.latencyTarget.ms for q in queries}
    out: dict[str, Any] = json.loads(json.dumps(report))
    for key, entry in out.get("queries", {}).items():
        entry.update(timeline_figures(entry.get("timeline") or [], since, math.inf, slas[key]))
    out["measured_by"] = f"the benchmark harness: the batches committed {since:g} s after the load started and later"
    return out


P99_GOAL, POINTS_GOAL = 0.25, 5.0
"""What-if's goal: p99 within 25% of the measured, attainment within 5 points."""


def table(root: Path) -> str:
    """Predicted against measured per query and model, and how many queries meet the goal."""
    lines = [f"{'scenario/query':48} {'model':>10} {'meas p99':>9} {'pred p99':>9} {'err':>6} "
             f"{'meas att':>8} {'pred att':>8} {'pts':>6} ok", "-" * 115]
    met: dict[str, list[bool]] = {}
    for sim in sorted(root.glob("*/sim-*/simulate.json")):
        scenario, model = sim.parent.parent.name, sim.parent.name.removeprefix("sim-")
        for key, row in json.loads(sim.read_text()).get("measured", {}).items():
            error, points = row.get("p99_error"), row.get("attainment_points")
            ok = error is not None and points is not None and abs(error) <= P99_GOAL and abs(points) <= POINTS_GOAL
            met.setdefault(model, []).append(ok)

            def fmt(value: float | None, spec: str) -> str:
                return "-" if value is None else format(value, spec)

            lines.append(f"{scenario + '/' + key:48} {model:>10} {fmt(row.get('measured_p99_ms'), '.0f'):>9} "
                         f"{fmt(row.get('predicted_p99_ms'), '.0f'):>9} {fmt(error, '+.0%'):>6} "
                         f"{fmt(row.get('measured_attainment'), '.1%'):>8} {fmt(row.get('predicted_attainment'), '.1%'):>8} "
                         f"{fmt(points, '+.1f'):>6} {'yes' if ok else 'no'}")
    for model, oks in sorted(met.items()):
        lines.append(f"{model}: {sum(oks)} of {len(oks)} queries within {P99_GOAL:.0%} on p99 and "
                     f"{POINTS_GOAL:g} points on attainment")
    return "\n".join(lines + rule_table(root))


def rule_table(root: Path) -> list[str]:
    """The interval rule's worst case (`costs.worst_case_ms`, at the interval in force, from the
    run's own costs) against the measured p99 and maximum, per query of each DIR/<scenario>/report.json
    that records it (none before 2026-12-01)."""
    rows = []
    for report in sorted(root.glob("*/report.json")):
        for key, entry in json.loads(report.read_text()).get("queries", {}).items():
            worst = (entry.get("costs") or {}).get("worst_case_ms")
            p99 = entry.get("p99_ms")
            if worst is None or p99 is None:
                continue
            error = "-" if p99 <= 0 else format(worst / p99 - 1, "+.0%")
            rows.append(f"{report.parent.name + '/' + key:48} {entry['costs'].get('interval_ms') or 0:>11.0f} "
                        f"{worst:>10.0f} {p99:>9.0f} {error:>6} {entry.get('max_ms') or 0:>9.0f}")
    if not rows:
        return []
    head = f"{'scenario/query':48} {'interval ms':>11} {'rule worst':>10} {'meas p99':>9} {'err':>6} {'rt max':>9}"
    return ["", "the interval rule's worst case at the interval in force, from the run's own costs:", head,
            "-" * len(head), *rows]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--table":
        print(table(Path(argv[1])))
        return 0
    if len(argv) == 2 and argv[0] == "--executors":
        try:
            print(held_executors(json.loads(Path(argv[1]).read_text())))
        except (OSError, ValueError, TypeError) as error:
            print(f"cannot read the executors of {argv[1]}: {error}", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 5 and argv[0] == "--steady":
        try:
            steady = steady_report(json.loads(Path(argv[3]).read_text()), Path(argv[2]), float(argv[1]))
        except (OSError, ValueError, TypeError, KeyError) as error:
            print(f"cannot judge {argv[3]} from {argv[1]} s on: {error}", file=sys.stderr)
            return 1
        Path(argv[4]).write_text(json.dumps(steady, indent=1) + "\n")
        return 0
    if len(argv) == 3 and argv[0] == "--recent-only":
        try:
            refitted = recent_only(json.loads(Path(argv[1]).read_text()))
        except (OSError, ValueError, TypeError) as error:
            print(f"cannot refit {argv[1]}: {error}", file=sys.stderr)
            return 1
        Path(argv[2]).write_text(json.dumps(refitted, indent=1) + "\n")
        return 0
    if len(argv) != 4:
        print("usage: python -m sluice.bench.validate REPORT RESULTS POLICY OUT", file=sys.stderr)
        return 2
    report, results, policy, out = argv
    try:
        merged = judged_report(json.loads(Path(report).read_text()), json.loads(Path(results).read_text()), policy)
    except (OSError, ValueError) as error:
        print(f"cannot merge the figures: {error}", file=sys.stderr)
        return 1
    Path(out).write_text(json.dumps(merged, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
