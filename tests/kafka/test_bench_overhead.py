"""`sluice bench overhead` end to end, shortened: its files and JSON contract (not its figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.bench import overhead

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


@pytest.mark.bench
def test_one_round_runs_each_mode_in_its_own_process_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "out"
    modes = ("plain", "cameo", "cameo+urgent")  # ungated runs the same code as cameo, minus the gate
    options = overhead.Options(rounds=1, seconds=6, warmup=4, rate=500, only=modes)
    result = overhead.run(options, out, log=lambda m: None)
    results = json.loads((out / "results.json").read_text())
    assert [r["mode"] for r in results["runs"]] == list(modes)
    for mode in modes:
        row = results["modes"][mode]
        # the window opens at the first batch with rows plus the warm-up: 6 s at a 500 ms trigger
        assert row["batches"] >= 3
        assert row["triggerExecution"]["median_ms"] >= row["addBatch"]["median_ms"] > 0
    assert set(results["rounds"][0]["ratios"]) == {"cameo/plain", "cameo+urgent/plain"}
    assert "cameo/plain" in results["triggerExecution_ratio"]
    setups = results["setups"]  # the ratio's two sides ran on one Spark setup; the lane on its own
    assert setups["plain"]["master"] == setups["cameo"]["master"] and not setups["cameo"]["urgent_lane"]
    assert setups["cameo+urgent"]["urgent_lane"] and setups["cameo+urgent"]["master"] != setups["plain"]["master"]
    for mode in ("cameo", "cameo+urgent"):  # Sluice still measured each row's latency while it ran
        (latency,) = results["latency"][mode]
        assert latency["p50_ms"] is not None and latency["p50_ms"] > 0
    assert "median cameo/plain triggerExecution" in result["table"]
    assert (out / "overhead.png").stat().st_size > 1000 and (out / "summary.txt").exists()
    assert results["runs"][0]["sent"] > 0


def test_fewer_than_three_rounds_is_refused_in_one_sentence() -> None:
    proc = subprocess.run([sys.executable, "-m", "sluice", "bench", "overhead", "--rounds", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rounds" in proc.stderr and "Traceback" not in proc.stderr

