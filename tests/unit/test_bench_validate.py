"""`sluice.bench.validate`: the harness's figures beside a recording's costs, and the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.bench.validate import judged_report, main, table


def test_the_harness_s_figures_replace_the_runtime_s_and_both_stay() -> None:
    report = {"cores": 2, "queries": {"a/f": {"p99_ms": 300.0, "attainment": 1.0, "costs": {"fixed_ms": 1.0}}}}
    results = {"sitting": {"python_ms": 3.0}, "policies": {"cameo": {"a/f": {"p99_ms": 900.0, "attainment": 0.8}}}}
    merged = judged_report(report, results, "cameo")
    entry = merged["queries"]["a/f"]
    assert (entry["p99_ms"], entry["attainment"]) == (900.0, 0.8)
    assert (entry["runtime_p99_ms"], entry["runtime_attainment"]) == (300.0, 1.0)
    assert merged["sitting"] == {"python_ms": 3.0} and entry["costs"] == {"fixed_ms": 1.0}
    assert report["queries"]["a/f"]["p99_ms"] == 300.0  # the recording itself is left as it was
    assert "machine" not in merged  # results from before the machine's cores were measured
    machine = {"seconds": 60.0, "busy_cores": 1.8, "run_cores": 1.2, "other_cores": 0.6}
    assert judged_report(report, {**results, "machine": {"cameo": [machine, None]}}, "cameo")["machine"] == machine
    with pytest.raises(ValueError, match="policy 'fifo'"):
        judged_report(report, results, "fifo")
    with pytest.raises(ValueError, match="query a/f"):
        judged_report(report, {"policies": {"cameo": {}}}, "cameo")


def test_the_table_counts_the_queries_within_the_goal(tmp_path: Path) -> None:
    for model, error, points in (("cores", 0.2, -4.0), ("slots", -0.6, 1.0)):
        sim = tmp_path / "burst" / f"sim-{model}"
        sim.mkdir(parents=True)
        (sim / "simulate.json").write_text(json.dumps({"measured": {"a/f": {
            "measured_p99_ms": 1000.0, "predicted_p99_ms": 1000.0 * (1 + error), "p99_error": error,
            "measured_attainment": 0.9, "predicted_attainment": 0.9 + points / 100, "attainment_points": points}}}))
    text = table(tmp_path)
    assert "cores: 1 of 1 queries within 25% on p99" in text
    assert "slots: 0 of 1 queries within 25% on p99" in text
    assert "interval rule" not in text  # no report records the rule's worst case
    (tmp_path / "burst" / "report.json").write_text(json.dumps({"queries": {"a/f": {
        "p99_ms": 800.0, "max_ms": 950.0, "costs": {"interval_ms": 200.0, "worst_case_ms": 600.0}}}}))
    rule = table(tmp_path).split("the interval rule's worst case")[1].splitlines()[-1].split()
    assert rule == ["burst/a/f", "200", "600", "800", "-25%", "950"]
    assert main(["only-one"]) == 2


def test_the_cores_the_rest_of_the_machine_took_are_the_busy_cores_less_the_runs() -> None:
    from sluice.bench.scenario_runs import machine_use

    # over 10 s the machine was busy 18 CPU seconds, the runs (Python and their JVMs) 12 of them
    assert machine_use((100.0, 500.0, 40.0), (110.0, 518.0, 52.0)) == {
        "seconds": 10.0, "busy_cores": 1.8, "run_cores": 1.2, "other_cores": 0.6}
    # the two counters are read a moment apart: a run busier than the machine is no negative rest
    assert machine_use((0.0, 0.0, 0.0), (10.0, 10.0, 10.5))["other_cores"] == 0.0


def test_the_recent_only_refit_drops_the_kept_batches_and_leaves_the_rest(tmp_path: Path) -> None:
    # recent batches alike (5,000 rows, 70 ms task CPU each); kept: 50,000 rows at 520 ms (20 ms + 10 µs a row)
    recent = [[5000, 0.1, 0.07, 0.14, 2]] * 4
    kept = [[50000, 0.1, 0.52, 1.04, 2]] * 2
    costs = {"fixed_ms": 5.0, "driver_ms": 100.0, "task_cpu_ms": 20.0, "task_cpu_per_row_us": 10.0, "tasks": 2,
             "task_run_ratio": 2.0, "fit": "6 batches (2 of them the run's largest, older): ..."}
    report = {"queries": {"a/agg": {"costs": costs, "work_samples": {"recent": recent, "kept": kept}},
                          "a/old": {"costs": {"fixed_ms": 1.0, "task_cpu_ms": 3.0}},  # recorded before samples
                          "a/few": {"costs": {"task_cpu_ms": 4.0}, "work_samples": {"recent": recent[:2], "kept": kept}}}}
    refit = main(["--recent-only", str(write(tmp_path / "r.json", report)), str(tmp_path / "out.json")])
    assert refit == 0
    out = json.loads((tmp_path / "out.json").read_text())["queries"]
    agg = out["a/agg"]["costs"]
    # alike sizes: all of 70 ms taken as growing with the rows, 14 µs a row
    assert (agg["task_cpu_ms"], agg["task_cpu_per_row_us"]) == (0.0, 14.0)
    assert agg["fixed_ms"] == 5.0 and agg["driver_ms"] == 100.0 and "4 batches:" in agg["fit"]
    assert out["a/old"]["costs"] == {"fixed_ms": 1.0, "task_cpu_ms": 3.0}
    assert out["a/few"]["costs"] == {"task_cpu_ms": 4.0}  # two recent batches fit nothing: kept as recorded
    assert report["queries"]["a/agg"]["costs"]["task_cpu_ms"] == 20.0  # the recording is left as it was
    assert main(["--recent-only", str(tmp_path / "missing.json"), str(tmp_path / "x.json")]) == 1


def test_a_node_run_is_simulated_at_the_executors_its_pool_held_longest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sluice.bench.validate import held_executors

    # 1 executor for 10 s, 2 for 50 s (10 -> 60), 1 again for 20 s: 2 held longest
    assert held_executors({"executors": [[0.0, 1], [10.0, 2], [60.0, 1], [80.0, 1]]}) == 2
    assert held_executors({"executors": [[0.0, 1], [10.0, 2], [20.0, 2]]}) == 2  # a tie goes to the larger
    assert held_executors({"executors": [[5.0, 3]]}) == 3  # one poll: what it saw
    assert held_executors({"executors": [[0.0, 0], [10.0, 0]]}) == 1  # none registered yet: at least one
    assert held_executors({}) == 1
    assert main(["--executors", str(write(tmp_path / "r.json", {"executors": [[0.0, 2], [30.0, 1], [40.0, 1]]}))]) == 0
    assert capsys.readouterr().out == "2\n"
    assert main(["--executors", str(tmp_path / "missing.json")]) == 1


def test_a_node_run_is_judged_again_from_a_later_second_on(tmp_path: Path) -> None:
    from sluice.api.constants import GRID
    from sluice.bench.validate import steady_report

    scenario = Path(__file__).resolve().parents[2] / "bench" / "scenarios" / "two-tenants.yaml"
    late, warm = [5000.0] * len(GRID), [100.0] * len(GRID)  # every row of a batch alike
    report = {"queries": {"payments/fraud-alerts": {"p99_ms": 5000.0, "attainment": 0.5,
                                                    "timeline": [[30.0, 60, late], [60.0, 60, warm], [70.0, 0, []]]},
                          "analytics/merchant-stats": {"p99_ms": 1.0, "timeline": [[40.0, 10, late]]}}}
    steady = steady_report(report, scenario, 50.0)["queries"]
    # the filter's 1 s SLA: from 50 s on only the warm batch, every row within it
    assert steady["payments/fraud-alerts"]["p99_ms"] == 100.0 and steady["payments/fraud-alerts"]["attainment"] == 1.0
    # the aggregation committed nothing from 50 s on: no figure, not the whole run's
    assert steady["analytics/merchant-stats"]["p99_ms"] is None and steady["analytics/merchant-stats"]["attainment"] is None
    whole = steady_report(report, scenario, 0.0)["queries"]["payments/fraud-alerts"]
    assert whole["p99_ms"] == 5000.0 and whole["attainment"] == pytest.approx(0.5)
    assert report["queries"]["payments/fraud-alerts"]["p99_ms"] == 5000.0  # the recording is left as it was
    path = write(tmp_path / "r.json", report)
    assert main(["--steady", "50", str(scenario), str(path), str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["queries"]["payments/fraud-alerts"]["attainment"] == 1.0
    assert main(["--steady", "x", str(scenario), str(path), str(tmp_path / "out.json")]) == 1


def write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path
