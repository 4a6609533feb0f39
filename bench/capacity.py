"""`sluice bench capacity`: how much load one pool carries, per policy, with every SLA kept.

Every rate of a scenario (bursts with them) is scaled by one multiplier m. A probe runs the scaled
scenario once, exactly as `sluice bench cameo` runs it (a fresh `sluice run` on fresh topics,
warm-up excluded), and passes when every query kept its SLA over the measured window: at least
99% of its rows within the SLA for a `critical: true` query, 95% for the others. The search
(`bench.capacity_search`, pure) brackets and bisects m per policy. Policies take turns, one probe each,
so that a time limit leaves every policy with a bracket of about the same width.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sluice.api.constants import GATED_POLICIES, POLICIES
from sluice.api.query import StreamingQuery
from sluice.api.scenario import Scenario, load_scenario

from . import cameo as cameo_bench
from .capacity_search import DEFAULT, Probe, Search, bracket, capacity, confirmed, next_multiplier
from .placement import placed
from .scenario_runs import warm_broker

CRITICAL_ATTAINMENT = 0.99
"""Share of a critical query's rows that must be within its SLA."""
BULK_ATTAINMENT = 0.95
"""Share of every other query's rows that must be within its SLA."""
START_SECONDS = 40.0
"""A probe's time besides the scenario itself (JVM start, the bench's 8 s wait, stopping), until measured."""


def scaled(scenario: Scenario, multiplier: float) -> Scenario:
    """The scenario with every query's rate multiplied (a burst's factor applies to the scaled rate)."""
    queries = [q.model_copy(update={"load": q.load.model_copy(update={"rate": q.load.rate * multiplier})})
               for q in scenario.queries]
    return scenario.model_copy(update={"queries": queries})


def judge(multiplier: float, table: dict[str, Any], scenario: Scenario,
          queries: list[StreamingQuery], report: dict[str, Any] | None = None) -> Probe:
    """One probe's verdict from its per-query figures (`bench.summarize`'s table for one policy).

    A query without a measured row (it fell so far behind that nothing it produced was measured)
    kept nothing: attainment 0."""
    worst_key, worst_margin, worst_attainment = "", float("inf"), None
    ok, rows = True, 0
    for query, item in zip(queries, scenario.queries, strict=True):
        figures = table[query.key]
        attainment = figures["attainment"] if figures["attainment"] is not None else 0.0
        needed = CRITICAL_ATTAINMENT if item.critical else BULK_ATTAINMENT
        rows += int(figures["rows"] or 0)
        ok = ok and attainment >= needed
        if attainment - needed < worst_margin:
            worst_key, worst_margin, worst_attainment = query.key, attainment - needed, attainment
    bottleneck = ((report or {}).get("queries", {}).get(worst_key) or {}).get("bottleneck")
    return Probe(multiplier, ok, worst_key, worst_attainment, rows, bottleneck)


def ratio(numerator: float, denominator: float) -> str:
    if denominator <= 0:
        return "n/a (the denominator carried no load with every SLA kept)"
    return f"{numerator / denominator:.2f}x"


def render(result: dict[str, Any]) -> str:
    lines = [f"scenario {result['scenario']}: capacity = the highest rate multiplier with every SLA kept "
             f"(critical >= {CRITICAL_ATTAINMENT:.0%} of rows within SLA, others >= {BULK_ATTAINMENT:.0%})", ""]
    lines.append(f"{'policy':8} {'capacity':>8} {'bracket':>16} {'probes':>6}  worst query at the first failure above")
    for policy, entry in result["policies"].items():
        low, high = entry["bracket"]
        shown = f"[{'-' if low is None else low}, {'-' if high is None else high}]"
        above = [p for p in entry["probes"] if not p["ok"] and high is not None and p["multiplier"] == high]
        worst = ""
        if above:
            first = above[0]
            shown_attainment = "" if first["worst_attainment"] is None else f" {first['worst_attainment']:.1%}"
            limit = f" (bottleneck: {first['bottleneck']})" if first.get("bottleneck") else ""
            worst = f"{first['worst_query']}{shown_attainment}{limit}"
        unconfirmed = "" if entry.get("confirmed", True) else " (not confirmed: an end of the bracket has one probe)"
        lines.append(f"{policy:8} {entry['capacity']:>8.3g} {shown:>16} {len(entry['probes']):>6}  {worst}{unconfirmed}")
    lines.append("")
    policies = result["policies"]
    for other in (p for p in POLICIES if p not in GATED_POLICIES):  # Spark's own: fifo and fair
        if "cameo" in policies and other in policies:
            lines.append(f"cameo/{other}: {ratio(policies['cameo']['capacity'], policies[other]['capacity'])}")
    lines.append(f"wall time {result['elapsed_s'] / 60:.1f} min ({result['stopped']})")
    return "\n".join(lines)


PROBES_HEADER = ("# per probe: the verdict and the worst query over the run as judged; then each query's harness "
                 "figures over the last minute of load (node target), its critical path's two leading phases, "
                 "and the most executors the pool ran\n")


def probe_line(policy: str, probe: Probe, report: dict[str, Any], queries: list[StreamingQuery]) -> str:
    """One line of probes.txt: what a probe's report.json says, kept after `runs/` is deleted."""
    def pct(v: Any) -> str:
        return "-" if v is None else f"{v:.1%}"

    counts = [float(c) for _, c in report.get("executors") or []]
    parts = [f"{policy:6} x{probe.multiplier:<7.3g} {'ok  ' if probe.ok else 'miss'} worst {pct(probe.worst_attainment)}"
             f" ex {max(counts) if counts else '-'}"]
    for q in queries:
        item = report.get("queries", {}).get(q.key) or {}
        own = item.get("harness_at_load_end") or {}
        p99 = own.get("p99_ms")
        path = sorted((item.get("critical_path") or {}).items(), key=lambda kv: -kv[1])[:2]
        parts.append(f"{q.key.split('/')[-1]} {pct(own.get('attainment'))} p99 "
                     f"{'-' if p99 is None else f'{p99 / 1000:.2f}s'} "
                     f"[{', '.join(f'{label} {share:.0%}' for label, share in path)}]")
    return " | ".join(parts)


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy, entry in result["policies"].items():
        points = sorted((p["multiplier"], p["worst_attainment"] or 0.0) for p in entry["probes"])
        if points:
            ax.plot([m for m, _ in points], [a * 100 for _, a in points], marker="o", label=f"{policy} (capacity {entry['capacity']:.3g})")
    ax.axhline(CRITICAL_ATTAINMENT * 100, color="grey", linestyle=":", linewidth=1)
    ax.axhline(BULK_ATTAINMENT * 100, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rate multiplier")
    ax.set_ylabel("worst query's rows within SLA (%)")
    ax.set_title(f"SLA capacity: {result['scenario']}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "capacity.png", dpi=110)
    plt.close(fig)


@contextlib.contextmanager
def _broker(broker: Any) -> Iterator[Any]:
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def run(scenario_path: Path, policies: list[str], out: Path, max_minutes: float, search: Search = DEFAULT,
        log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
        urgent_lane: str = "gated", target: str = "local", node: Any = None,
        bulk_tasks: int | None = None) -> dict[str, Any]:
    """Search each policy's capacity; writes results.json, summary.txt, capacity.png and probes.txt
    (a line per probe as it ends) into `out`.
    `target` node: each probe on a fresh pool of the one-node Kubernetes (`bench.node`; `node`, a
    `NodeTarget` to use, else one is opened; `bulk_tasks`, every pool's `spec.executor.bulkTasks`)."""
    from sluice.testing.kafka import KafkaBroker

    from . import node as on_node

    scenario, queries = load_scenario(scenario_path)
    cameo_bench.check_target(target, policies, urgent_lane, bulk_tasks=bulk_tasks)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "kafka", ignore_errors=True)
    shutil.rmtree(out / "runs", ignore_errors=True)
    (out / "probes.txt").write_text(PROBES_HEADER)
    stack = contextlib.ExitStack()
    if target == "node":
        if node is None:
            node = stack.enter_context(on_node.open_target(None, log))
        proc = node.broker.proc
        node.placement = place = placed(target, proc.pid if proc is not None else None, log)

        def probe_run(scaled_scenario: Scenario, policy: str, folder: Path) -> dict[str, Any]:
            return on_node.run_once(scaled_scenario, queries, policy, node, folder, log=lambda _m: None,
                                    bulk_tasks=bulk_tasks)
    else:
        broker = stack.enter_context(_broker(KafkaBroker(out / "kafka")))
        place = placed(target, broker.proc.pid if broker.proc is not None else None, log)

        def probe_run(scaled_scenario: Scenario, policy: str, folder: Path) -> dict[str, Any]:
            return cameo_bench.run_once(scaled_scenario, queries, policy, broker, folder, log=lambda _m: None,
                                        urgent_lane=urgent_lane, placement=place)
    stack.callback(place.close)
    started = clock()  # the broker's warm-up counts in --max-minutes
    broker_warmup: dict[str, Any] = {}
    probes: dict[str, list[Probe]] = {p: [] for p in policies}
    done: set[str] = set()
    durations: list[float] = []
    placements: dict[str, list[Any]] = {}
    stopped = "every search ended"
    try:
        broker_warmup = warm_broker(node.broker if target == "node" else broker, scenario, log)
        while len(done) < len(policies):
            for policy in policies:
                if policy in done:
                    continue
                multiplier = next_multiplier(probes[policy], search)
                if multiplier is None:
                    done.add(policy)
                    continue
                expected = statistics.mean(durations) if durations else \
                    scenario.duration.seconds + scenario.warmup.seconds + START_SECONDS
                elapsed = clock() - started
                if elapsed + expected > max_minutes * 60:
                    stopped = f"stopped at --max-minutes {max_minutes:g}: a next probe would not have ended in time"
                    done.update(policies)
                    break
                found = bracket(probes[policy])
                number = len(probes[policy]) + 1
                log(f"[{elapsed / 60:5.1f} min] {policy}: probe {number} at x{multiplier:g} "
                    f"(bracket [{found.low}, {found.high}])")
                folder = out / "runs" / f"{policy}-{number}"
                began = clock()
                report = probe_run(scaled(scenario, multiplier), policy, folder)
                durations.append(clock() - began)
                shutil.rmtree(folder / "work", ignore_errors=True)  # checkpoints: the report is what counts
                table = cameo_bench.summarize({policy: [report]}, scenario, queries)["policies"][policy]
                probe = judge(multiplier, table, scenario, queries, report)
                probes[policy].append(probe)
                placements.setdefault(policy, []).append((report.get("machine") or {}).get("placement"))
                with (out / "probes.txt").open("a") as lines:
                    lines.write(probe_line(policy, probe, report, queries) + "\n")
                worst = "-" if probe.worst_attainment is None else f"{probe.worst_attainment:.1%}"
                log(f"           {'kept every SLA' if probe.ok else 'missed'}: worst {probe.worst_query} {worst}"
                    + (f", bottleneck: {probe.bottleneck}" if probe.bottleneck else ""))
    finally:
        stack.close()
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "target": target,
        "urgent_lane": urgent_lane,
        **({"bulk_tasks": "the pool's default (its cores)" if bulk_tasks is None else bulk_tasks}
           if target == "node" else {}),
        "policies": {
            policy: {
                "capacity": capacity(found),
                "bracket": [bracket(found).low, bracket(found).high],
                "confirmed": confirmed(found, search),
                "probes": [{"multiplier": p.multiplier, "ok": p.ok, "worst_query": p.worst_query,
                            "worst_attainment": p.worst_attainment, "rows": p.rows, "bottleneck": p.bottleneck}
                           for p in found],
            }
            for policy, found in probes.items()
        },
        "elapsed_s": round(clock() - started, 1),
        "max_minutes": max_minutes,
        "stopped": stopped,
        "placement": placements,
        "broker_warmup": broker_warmup,
    }
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "summary.txt").write_text(render(result) + "\n")
    plot(result, out)
    return result


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    """The table and capacity.png again from an earlier run's results.json."""
    document = json.loads(results.read_text())
    out.mkdir(parents=True, exist_ok=True)
    plot(document, out)
    return document, render(document)
