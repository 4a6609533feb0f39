"""`sluice size` against real runs (`bench.size_check`): which recommendation is right, computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.api.scenario import load_scenario
from sluice.bench.size_check import collect, is_right, main, rows, smallest_kept

ROOT = Path(__file__).resolve().parents[2]
TWO_TENANTS = ROOT / "bench" / "scenarios" / "two-tenants.yaml"


def test_the_right_size_is_the_smallest_count_that_kept_every_sla() -> None:
    kept = {1: False, 2: True, 3: True}
    assert smallest_kept(kept) == 2
    assert is_right(2, kept) and not is_right(3, kept) and not is_right(1, kept) and not is_right(None, kept)
    noisy = {1: False, 2: True, 3: False}  # a miss above a hold: the smallest hold still decides
    assert smallest_kept(noisy) == 2 and is_right(2, noisy)


def test_when_no_count_tried_kept_every_sla_only_a_larger_one_is_right() -> None:
    kept = {1: False, 2: False, 3: False}
    assert smallest_kept(kept) is None
    assert is_right(4, kept) and is_right(None, kept)
    assert not is_right(3, kept) and not is_right(1, kept)


def test_rows_set_each_run_beside_its_recording_s_recommendation() -> None:
    found = rows({2: (True, "payments/fraud-alerts", 0.995), 1: (False, "payments/fraud-alerts", 0.7)},
                 {1: 3, 2: 2})
    assert [(r.executors, r.kept, r.recommended, r.right) for r in found] == [(1, False, 3, False), (2, True, 2, True)]


def _results(filter_attainment: float) -> dict[str, object]:
    """A `sluice bench cameo` results.json's shape for two-tenants under cameo."""
    def figures(attainment: float) -> dict[str, float]:
        return {"p50_ms": 100.0, "p99_ms": 900.0, "sla_ms": 1000.0, "attainment": attainment, "rows": 1000}
    return {"scenario": "two-tenants", "policies": {"cameo": {
        "payments/fraud-alerts": figures(filter_attainment), "analytics/merchant-stats": figures(1.0)}}}


def test_the_check_judges_each_run_as_capacity_does_and_writes_its_table(tmp_path: Path) -> None:
    # the critical filter needs 99%: 98.9% misses, 99.2% keeps
    for n, attainment, said in ((1, 0.989, 2), (2, 0.992, 2), (3, 0.999, None)):
        folder = tmp_path / f"executors-{n}"
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(_results(attainment)))
        (folder / "size.json").write_text(json.dumps({"sla_executors": said}))
    judged, recommended = collect(*load_scenario(TWO_TENANTS), tmp_path)
    assert judged[1] == (False, "payments/fraud-alerts", 0.989) and judged[2][0] and judged[3][0]
    assert recommended == {1: 2, 2: 2, 3: None}
    assert main([str(TWO_TENANTS), str(tmp_path)]) == 0
    check = json.loads((tmp_path / "check.json").read_text())
    assert check["smallest_kept"] == 2 and [r["right"] for r in check["rows"]] == [True, True, False]
    assert "`sluice size` right from 2 of 3 recordings" in (tmp_path / "table.txt").read_text()


def test_runs_of_another_scenario_are_refused_in_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "executors-1"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({**_results(1.0), "scenario": "burst"}))
    assert main([str(TWO_TENANTS), str(tmp_path)]) == 1
    assert "ran scenario 'burst', not 'two-tenants'" in capsys.readouterr().err
    assert main([str(TWO_TENANTS), str(tmp_path / "nothing-here")]) == 1
