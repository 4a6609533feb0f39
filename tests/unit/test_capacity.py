"""The capacity search (pure): bracketing and bisection on noisy pass/fail, with hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.api.scenario import Scenario, load_scenario
from sluice.bench.capacity import judge, probe_line, render, scaled
from sluice.bench.capacity_search import (
    DEFAULT,
    Probe,
    Search,
    bracket,
    capacity,
    confirmed,
    next_multiplier,
    verdicts,
)

ROOT = Path(__file__).resolve().parents[2]


def probes(*marks: tuple[float, bool]) -> list[Probe]:
    return [Probe(m, ok) for m, ok in marks]


def run_search(threshold: float, search: Search = DEFAULT, noise: dict[float, bool] | None = None) -> list[Probe]:
    """Drive the search against a machine that passes below `threshold` (some answers flipped by `noise`)."""
    made: list[Probe] = []
    while (m := next_multiplier(made, search)) is not None:
        ok = m <= threshold
        if noise and m in noise and not any(p.multiplier == m for p in made):
            ok = noise[m]  # the first probe at m answers wrongly
        made.append(Probe(m, ok))
        assert len(made) <= search.max_probes
    return made


def test_the_first_probe_is_the_scenario_as_written() -> None:
    assert next_multiplier([]) == 1.0


def test_brackets_upwards_by_doubling_then_bisects_geometrically() -> None:
    # pass at 1, 2, 4; fail at 8: bracket [4, 8]; next is sqrt(32) = 5.66
    made = probes((1, True), (2, True), (4, True), (8, False))
    assert bracket(made).low == 4 and bracket(made).high == 8
    assert next_multiplier(made) == 5.66


def test_brackets_downwards_by_halving() -> None:
    assert next_multiplier(probes((1, False))) == 0.5
    assert next_multiplier(probes((1, False), (0.5, False))) == 0.25
    # then a pass at 0.25: bracket [0.25, 0.5], next sqrt(0.125) = 0.354
    assert next_multiplier(probes((1, False), (0.5, False), (0.25, True))) == 0.354


def test_ends_when_the_bracket_is_narrow_and_two_probes_agree_at_each_end() -> None:
    # [1.41, 1.6]: 1.6 / 1.41 = 1.13 <= 1.15; each end has one probe: confirm 1.41, then 1.6
    made = probes((1, True), (2, False), (1.41, True), (1.6, False))
    assert next_multiplier(made) == 1.41 and not confirmed(made)
    made += probes((1.41, True))
    assert next_multiplier(made) == 1.6
    made += probes((1.6, False))
    assert next_multiplier(made) is None and confirmed(made)
    assert capacity(made) == 1.41


def test_a_confirmation_that_disagrees_moves_the_bracket_down() -> None:
    # the second probe at 1.41 fails: 1-1 is a tie, a failure; the bracket is now [1, 1.41]
    made = probes((1, True), (2, False), (1.41, True), (1.6, False), (1.41, False))
    assert (bracket(made).low, bracket(made).high) == (1, 1.41)
    assert next_multiplier(made) == 1.19  # bisected again
    assert capacity(made) == 1 and not confirmed(made)


def test_a_narrow_bracket_found_early_reprobes_its_low_end() -> None:
    # tolerance 2: [1, 2] is narrow after 2 probes; min 4 probes: confirm the pass at 1
    made = probes((1, True), (2, False))
    assert next_multiplier(made, Search(tolerance=2.0)) == 1


def test_gives_up_below_the_floor_with_capacity_zero() -> None:
    made = run_search(threshold=0.0, search=Search(floor=0.1))
    assert [p.multiplier for p in made] == [1, 0.5, 0.25, 0.125]
    assert capacity(made) == 0.0 and bracket(made).high == 0.125


def test_stops_climbing_at_the_ceiling() -> None:
    made = run_search(threshold=1000.0, search=Search(ceiling=8))
    assert [p.multiplier for p in made] == [1, 2, 4, 8]
    assert capacity(made) == 8 and bracket(made).high is None


def test_a_clean_machine_is_found_within_tolerance() -> None:
    for threshold in (0.3, 1.0, 1.7, 3.2, 11.0):
        made = run_search(threshold)
        found = bracket(made)
        assert found.low is not None and found.high is not None
        assert found.low <= threshold < found.high
        assert found.high / found.low <= Search().tolerance
        assert len(made) >= 4


def test_the_majority_decides_a_multiplier_and_a_tie_fails() -> None:
    assert verdicts(probes((1, True), (1, False))) == [(1, False)]
    assert verdicts(probes((1, True), (1, False), (1, True))) == [(1, True)]


def test_a_lucky_pass_above_a_failure_costs_capacity_never_adds_it() -> None:
    # 1 P, 1.19 P, 1.41 F, 1.68 P, 2 F: two splits each contradict one verdict; the lower one wins
    made = probes((1, True), (2, False), (1.41, False), (1.19, True), (1.68, True))
    found = bracket(made)
    assert (found.low, found.high, found.contradictions) == (1.19, 1.41, 1)
    assert capacity(made) == 1.19


def test_an_unlucky_failure_is_probed_again_and_the_majority_overturns_it() -> None:
    # the machine passes up to 1.7; the first probe at 1 fails by noise. The search believes it at
    # first (a capacity is a promise) and brackets below 1; confirming that bracket's failing end
    # probes 1 again, twice passes outvote the one failure, and the search climbs to the machine's.
    made = run_search(1.7, noise={1.0: False})
    assert made[0] == Probe(1.0, False)
    assert [p.ok for p in made if p.multiplier == 1.0] == [False, True, True]
    assert 1.7 / Search().tolerance <= capacity(made) <= 1.7 < bracket(made).high  # type: ignore[operator]
    # the noise cost probes: the search hit max_probes before confirming its new ends, and says so
    assert len(made) == Search().max_probes and not confirmed(made)


def test_max_probes_bounds_the_search() -> None:
    made = run_search(1.7, Search(max_probes=3, min_probes=3))
    assert len(made) == 3


def scenario() -> tuple[Scenario, list]:  # type: ignore[type-arg]
    return load_scenario(ROOT / "bench" / "scenarios" / "burst.yaml")


def test_scaling_multiplies_every_rate_and_keeps_bursts_relative() -> None:
    base, _ = scenario()
    double = scaled(base, 2.0)
    for before, after in zip(base.queries, double.queries, strict=True):
        assert after.load.rate == pytest.approx(2 * before.load.rate)
        assert [b.factor for b in after.load.bursts] == [b.factor for b in before.load.bursts]
    assert any(q.load.bursts for q in double.queries)  # the burst scenario has one: it scales with the rate
    assert base.queries[0].load.rate != double.queries[0].load.rate  # the original is untouched


def test_a_probe_passes_only_when_every_query_keeps_its_class_threshold() -> None:
    base, queries = scenario()
    critical = next(q.key for q, s in zip(queries, base.queries, strict=True) if s.critical)
    bulk = next(q.key for q, s in zip(queries, base.queries, strict=True) if not s.critical)
    table = {critical: {"attainment": 0.992, "rows": 10}, bulk: {"attainment": 0.96, "rows": 90}}
    report = {"queries": {critical: {"bottleneck": "waiting for cores"}}}
    assert judge(1.0, table, base, queries, report) == Probe(1.0, True, critical, 0.992, 100, "waiting for cores")
    table[critical]["attainment"] = 0.985  # 98.5% is enough for bulk, not for critical
    probe = judge(1.0, table, base, queries)
    assert not probe.ok and probe.worst_query == critical
    table = {critical: {"attainment": 1.0, "rows": 10}, bulk: {"attainment": None, "rows": 0}}
    probe = judge(2.0, table, base, queries)  # nothing measured: nothing kept
    assert not probe.ok and probe.worst_query == bulk and probe.worst_attainment == 0.0


def test_the_summary_gives_capacities_and_ratios() -> None:
    result = {
        "scenario": "s", "elapsed_s": 600.0, "stopped": "every search ended",
        "policies": {
            "fifo": {"capacity": 0.5, "bracket": [0.5, 0.707], "probes": [
                {"multiplier": 0.707, "ok": False, "worst_query": "a/b", "worst_attainment": 0.9, "rows": 5,
                 "bottleneck": "walCommit"}]},
            "fair": {"capacity": 0.0, "bracket": [None, 0.125], "probes": []},
            "cameo": {"capacity": 1.41, "bracket": [1.41, 1.6], "probes": []},
        },
    }
    text = render(result)
    assert "cameo/fifo: 2.82x" in text
    assert "cameo/fair: n/a" in text
    assert "a/b 90.0% (bottleneck: walCommit)" in text


def test_a_probe_line_keeps_what_its_report_said() -> None:
    _, queries = load_scenario(ROOT / "bench" / "scenarios" / "burst.yaml")
    first, second = queries[0].key, queries[1].key
    report = {"executors": [[0.0, 1.0], [30.0, 2.0], [60.0, 1.0]], "queries": {
        first: {"harness_at_load_end": {"p99_ms": 1470.0, "attainment": 0.922},
                "critical_path": {"driver": 0.1, "stage start": 0.52, "waiting for cores": 0.21}},
        second: {}}}  # a query whose report says nothing (a local run has no last-minute figures)
    line = probe_line("fifo", Probe(0.841, False, first, 0.884), report, queries)
    assert line.startswith("fifo   x0.841   miss worst 88.4% ex 2.0 | ")
    assert f"{first.split('/')[-1]} 92.2% p99 1.47s [stage start 52%, waiting for cores 21%]" in line
    assert line.endswith(f"{second.split('/')[-1]} - p99 - []")


def test_bad_policies_get_one_sentence() -> None:
    from click.testing import CliRunner

    from sluice.cli.main import main

    result = CliRunner().invoke(main, ["bench", "capacity", "--scenario", str(ROOT / "bench" / "scenarios" / "burst.yaml"),
                                       "--policies", "cameo,fastest"])
    assert result.exit_code == 1 and "--policies" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["bench", "capacity", "--scenario", "missing.yaml"])
    assert result.exit_code == 1 and "missing.yaml" in result.output and "Traceback" not in result.output
