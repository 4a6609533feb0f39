"""What `sluice simulate` and `sluice size` print and write: the predicted table beside a
recording's measured figures, and the JSON, summary and plot of a simulation."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sluice.cli.whatif import Recorded
from sluice.scheduler.simulate import Result, SimQuery


def table(result: Result, queries: Sequence[SimQuery], recorded: Mapping[str, Recorded] | None = None) -> str:
    """The predicted figures per query; with a recording, its measured p99 and attainment beside them."""
    measured = {k: r for k, r in (recorded or {}).items() if r.p99 is not None or r.attainment is not None}
    head = (f"{'query':36} {'SLA ms':>8} {'p50 ms':>9} {'p99 ms':>9} {'within':>7} {'goal':>5} {'kept':>4} "
            f"{'interval ms':>11} {'batches':>7}" + (f" {'rec p99':>9} {'rec within':>10}" if measured else ""))
    pool = result.pool
    taken = f", {pool.taken:g} core(s) taken by other processes" if pool.taken > 0 else ""
    host = "" if pool.host_cores is None else f", all on one machine's {pool.host_cores:g} cores"
    raised = ", urgent threads weigh more on the cores (raised priorities)" if pool.priority else ""
    lines = [f"{pool.executors} executor(s) x {pool.cores_per_executor} core(s){host}, {pool.policy}{taken}{raised}",
             head, "-" * len(head)]
    for q in queries:
        r = result.queries[q.key]
        p50, p99, att = r.quantile(0.5), r.quantile(0.99), r.attainment
        lines.append(f"{q.key:36} {q.sla * 1000:>8.0f} {'-' if p50 is None else f'{p50 * 1000:.0f}':>9} "
                     f"{'-' if p99 is None else f'{p99 * 1000:.0f}':>9} {'-' if att is None else f'{att:.1%}':>7} "
                     f"{r.goal:>5.0%} {'yes' if r.kept else 'NO':>4} {r.interval * 1000:>11.0f} {r.batches:>7}"
                     + (_measured_columns(measured.get(q.key)) if measured else ""))
    if measured:
        lines.append("rec: measured in the recorded run (--costs), over its own window")
    return "\n".join(lines)


def _measured_columns(found: Recorded | None) -> str:
    p99 = "-" if found is None or found.p99 is None else f"{found.p99 * 1000:.0f}"
    att = "-" if found is None or found.attainment is None else f"{found.attainment:.1%}"
    return f" {p99:>9} {att:>10}"


def comparison(result: Result, recorded: Mapping[str, Recorded]) -> dict[str, dict[str, float | None]]:
    """Predicted against measured, per query the recording measured: p99 error (ratio) and attainment gap (points)."""
    out: dict[str, dict[str, float | None]] = {}
    for key, found in recorded.items():
        r = result.queries.get(key)
        if r is None or (found.p99 is None and found.attainment is None):
            continue
        p99, att = r.quantile(0.99), r.attainment
        out[key] = {
            "predicted_p99_ms": None if p99 is None else p99 * 1000,
            "measured_p99_ms": None if found.p99 is None else found.p99 * 1000,
            "p99_error": None if p99 is None or not found.p99 else p99 / found.p99 - 1,
            "predicted_attainment": att, "measured_attainment": found.attainment,
            "attainment_points": None if att is None or found.attainment is None else (att - found.attainment) * 100,
        }
    return out


def result_json(result: Result) -> dict[str, Any]:
    return {"executors": result.pool.executors, "cores_per_executor": result.pool.cores_per_executor,
            "policy": result.pool.policy, "other_cores": result.pool.taken, "kept": result.kept,
            "seconds": result.options.duration, "warmup_seconds": result.options.warmup,
            "queries": {k: r.json() for k, r in result.queries.items()}}


def document(result: Result, recorded: Mapping[str, Recorded] | None = None) -> dict[str, Any]:
    """What `--json` prints and simulate.json holds: the pool, each query's figures and, against a
    recording, the measured ones beside them (`measured`)."""
    body = result_json(result)
    if recorded:
        body["measured"] = comparison(result, recorded)
    return body


def write_outputs(result: Result, queries: Sequence[SimQuery], out: Path,
                  recorded: Mapping[str, Recorded] | None = None) -> None:
    """simulate.json (with `measured` against a recording), summary.txt and simulate.png
    (each query's worst latency per batch over simulated time)."""
    out.mkdir(parents=True, exist_ok=True)
    body = document(result, recorded)
    (out / "simulate.json").write_text(json.dumps(body, indent=2) + "\n")
    (out / "summary.txt").write_text(table(result, queries, recorded) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    for q in queries:
        points = result.queries[q.key].timeline
        if points:
            line, = ax.plot([t for t, _ in points], [lat for _, lat in points], lw=0.8, label=q.key)
            ax.axhline(q.sla, color=line.get_color(), ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("simulated seconds")
    ax.set_ylabel("worst latency of each batch (s); dotted: SLA")
    ax.set_title(f"sluice simulate: {result.pool.executors} x {result.pool.cores_per_executor} cores, {result.pool.policy}")
    if len(queries) <= 12:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "simulate.png", dpi=110)
    plt.close(fig)
