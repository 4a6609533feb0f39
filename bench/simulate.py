"""`sluice bench simulate`: how long `sluice simulate` takes for a large pool, and each decision.

The mix (seeded, so runs compare): tenants of 10 queries each; one in ten a critical filter (SLA
2 s), the rest bulk (SLA 30 s, 1 min, 2 min or 5 min; half of them 10 s windowed aggregations),
each reading 10-50 rows/s, with the scheduler's prior costs (150 ms a batch, 20 µs a row).
Intervals are the runtime's, chosen from the SLAs. The pool has the executors (4 cores each) DS2
sizes for the rates. Each step simulates `duration` seconds under cameo and reports the wall
time, the events handled and the scheduler's time per decision (a `dispatch` call, timed with
`time.perf_counter` around the pure core).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.compiled import compiled
from sluice.operator.autoscaler import ds2_executors
from sluice.operator.sla_sizing import rounded, sized, span
from sluice.scheduler.simulate import Options as SimOptions
from sluice.scheduler.simulate import Pool, SimQuery, simulate

GOAL_SECONDS = 60.0
"""The goal: 10,000 queries of 1,000 tenants for 10 simulated minutes in at most this long."""
GOAL_DECISION_US = 50.0
CORES = 4


@dataclass(frozen=True, slots=True)
class Options:
    counts: tuple[int, ...] = (100, 1_000, 10_000)
    per_tenant: int = 10
    duration: float = 600.0
    seed: int = 7
    sizing: int = 200
    """Queries of the pool whose SLA-aware sizing (the operator's, every pool sync) is timed; 0: none."""


def mix(queries: int, per_tenant: int = 10, seed: int = 7) -> list[SimQuery]:
    rnd = random.Random(seed)
    out = []
    for i in range(queries):
        tenant = f"tenant-{i // per_tenant:05d}"
        rate = rnd.uniform(10, 50)
        if i % 10 == 0:
            out.append(SimQuery(f"{tenant}/q{i}", tenant, 2.0, rate, 0.15, 20e-6, 0.03, critical=True))
            continue
        sla = rnd.choice([30.0, 60.0, 120.0, 300.0])
        windowed = i % 2 == 1
        out.append(SimQuery(f"{tenant}/q{i}", tenant, sla, rate, 0.15, 20e-6, 0.03,
                            window=10.0 if windowed else None, delay=2.0 if windowed else 0.0))
    return out


def step(queries: int, options: Options) -> dict[str, Any]:
    sims = mix(queries, options.per_tenant, options.seed)
    executors, _ = ds2_executors(sims, CORES)
    began = time.perf_counter()
    result = simulate(sims, Pool(executors, CORES, "cameo"), SimOptions(duration=options.duration, warmup=30.0),
                      timer=time.perf_counter)
    wall = time.perf_counter() - began
    worst = result.worst()
    return {"queries": queries, "tenants": -(-queries // options.per_tenant), "executors": executors,
            "simulated_s": options.duration, "wall_s": round(wall, 2), "events": result.events,
            "batches": sum(q.batches for q in result.queries.values()), "decisions": result.decisions,
            "decision_us": round(result.decision_seconds / max(result.decisions, 1) * 1e6, 2),
            "kept": result.kept, "worst_query": None if worst is None else worst.key,
            "worst_attainment": None if worst is None else worst.attainment}


def sizing(queries: int, options: Options) -> dict[str, Any]:
    """The operator's SLA-aware sizing of a pool of `queries` of the mix, timed without its cache
    (what a sync whose measurements moved costs): the same search over executor counts, from 1 to
    4x DS2's count."""
    sims = tuple(rounded(q) for q in mix(queries, options.per_tenant, options.seed))
    executors, _ = ds2_executors(sims, CORES)
    most = max(4 * executors, 8)
    began = time.perf_counter()
    found = sized.__wrapped__(sims, CORES, "cameo", 1, most)
    wall = time.perf_counter() - began
    return {"queries": queries, "wall_s": round(wall, 2), "simulations": found.simulations,
            "simulated_s": span(queries), "executors": found.executors, "ds2_executors": executors, "most": most}


def run(options: Options, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    steps = []
    native = compiled()
    log(f"the scheduler core and the simulation: {'compiled (mypyc)' if native else 'interpreted (make compile builds them)'}")
    for n in options.counts:
        log(f"simulating {n:,} queries for {options.duration:g} simulated seconds ...")
        steps.append(step(n, options))
        log(f"  {steps[-1]['wall_s']} s wall, {steps[-1]['decision_us']} µs a decision")
    timed = None
    if options.sizing:
        log(f"sizing a pool of {options.sizing:,} queries as the operator does each sync ...")
        timed = sizing(options.sizing, options)
        log(f"  {timed['wall_s']} s wall, {timed['simulations']} simulations")
    result = {"steps": steps, "sizing": timed, "compiled": native,
              "goal": {"wall_s_at_10000": GOAL_SECONDS, "decision_us": GOAL_DECISION_US},
              "options": {"counts": list(options.counts), "per_tenant": options.per_tenant,
                          "duration": options.duration, "seed": options.seed, "sizing": options.sizing}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "summary.txt").write_text(render(steps, timed, native) + "\n")
    plot(steps, out / "simulate.png")
    return result


def render(steps: Sequence[dict[str, Any]], timed: dict[str, Any] | None = None, core: bool | None = None) -> str:
    head = (f"{'queries':>8} {'tenants':>8} {'executors':>9} {'batches':>10} {'wall s':>8} {'x sim speed':>11} "
            f"{'µs/decision':>11} {'SLAs kept':>9}")
    lines = [head, "-" * len(head)]
    for s in steps:
        lines.append(f"{s['queries']:>8,} {s['tenants']:>8,} {s['executors']:>9} {s['batches']:>10,} {s['wall_s']:>8.1f} "
                     f"{s['simulated_s'] / max(s['wall_s'], 1e-9):>11.1f} {s['decision_us']:>11.1f} "
                     f"{'yes' if s['kept'] else 'no':>9}")
    lines.append(f"goals: 10,000 queries x 10 simulated minutes in <= {GOAL_SECONDS:.0f} s; "
                 f"<= {GOAL_DECISION_US:.0f} µs a decision")
    if core is not None:
        lines.append(f"the scheduler core and the simulation ran {'compiled with mypyc' if core else 'interpreted'}")
    if timed is not None:
        lines.append(f"the operator's SLA-aware sizing of {timed['queries']:,} queries (each pool sync whose "
                     f"measurements moved): {timed['wall_s']:.1f} s, {timed['simulations']} simulations of "
                     f"{timed['simulated_s']:g} s")
    return "\n".join(lines)


def plot(steps: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    counts = [s["queries"] for s in steps]
    left.plot(counts, [s["wall_s"] for s in steps], "o-")
    left.axhline(GOAL_SECONDS, color="red", ls=":", label="goal at 10,000")
    left.set(xscale="log", yscale="log", xlabel="queries", ylabel="wall seconds for the simulation")
    left.legend()
    right.plot(counts, [s["decision_us"] for s in steps], "o-")
    right.axhline(GOAL_DECISION_US, color="red", ls=":", label="goal")
    right.set(xscale="log", xlabel="queries", ylabel="µs per scheduling decision")
    right.legend()
    fig.suptitle("sluice bench simulate")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rerender(results: Path, out: Path) -> tuple[dict[str, Any], str]:
    """The table and simulate.png again from an earlier run's results.json."""
    document = json.loads(results.read_text())
    out.mkdir(parents=True, exist_ok=True)
    plot(document["steps"], out / "simulate.png")
    return document, render(document["steps"], document.get("sizing"), document.get("compiled"))
