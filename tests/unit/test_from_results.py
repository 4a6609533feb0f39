"""`--from-results`: a benchmark's table and plot drawn again from the results.json kept in the
tree, so the tree keeps no plot it cannot make again, and bad input gets one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import main

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


@pytest.mark.parametrize(("bench", "results", "plot", "first_words"), [
    ("capacity", "capacity-local/two-tenants", "capacity.png", "scenario two-tenants: capacity"),
    ("density", "density/2026-12-02-a", "density.png", "N worst crit"),
    ("overhead", "overhead/2026-12-04", "overhead.png", "mode"),
    ("ds2", "ds2", "ds2.png", "| policy | start |"),
    ("simulate", "simulate", "simulate.png", "queries  tenants"),
])
def test_a_kept_result_is_drawn_again(bench: str, results: str, plot: str, first_words: str, tmp_path: Path) -> None:
    kept = RESULTS / results / "results.json"
    result = CliRunner().invoke(main, ["bench", bench, "--from-results", str(kept), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().startswith(first_words)
    assert (tmp_path / plot).stat().st_size > 10_000  # a real figure, not an empty canvas
    assert (tmp_path / "summary.txt").read_text().strip() == result.stdout.strip()
    as_json = CliRunner().invoke(main, ["bench", bench, "--from-results", str(kept), "--out", str(tmp_path), "--json"])
    assert json.loads(as_json.stdout) == json.loads(kept.read_text())


def test_another_benchmark_s_results_are_refused_in_one_sentence(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "density", "--from-results",
                                       str(RESULTS / "ds2" / "results.json"), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "--from-results: " in result.output and "is no results.json of this benchmark" in result.output
    assert "Traceback" not in result.output
