"""`sluice bench batch-cost` end to end at a tiny scale: two queries of the density mix, Spark's
defaults then Sluice's, through real runtime processes and a real broker. Its files and JSON
contract, not its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.bench]


def test_a_tiny_batch_cost_run_measures_each_side_and_their_ratios(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "bench", "batch-cost", "--queries", "2", "--warmup", "5s", "--window", "10s",
         "--conf", "spark.sql.streaming.ui.enabled=false", "--lever", "spark.sql.lightweightPlanChangeValidation=false",
         "--out", str(out), "--no-calibrate"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    sides = result["sides"]
    lever = "sluice+spark.sql.lightweightPlanChangeValidation=false"
    assert list(sides) == ["spark-defaults", "sluice", lever]
    for side in sides.values():
        assert side["queries"] == 2 and side["batches"] > 0
        assert 0 < side["cores"] <= 2.5  # a JVM and a Python process were measured
        assert side["cpu_ms_per_batch"] > 0
        assert 0 < side["cpu_ms_per_batch_without_jit"] <= side["cpu_ms_per_batch"]  # less the JIT compilers' threads
        assert side["codegen_compiles_per_min_per_query"] >= 0  # read from the runtime's /metrics
    assert "spark.sql.adaptive.enabled=true" in sides["spark-defaults"]["conf"]
    assert sides["sluice"]["conf"] == ["spark.sql.streaming.ui.enabled=false"]  # --conf goes to Sluice's side alone
    assert sides[lever]["conf"] == ["spark.sql.streaming.ui.enabled=false", "spark.sql.lightweightPlanChangeValidation=false"]
    assert sides[lever]["ratio_to_sluice"] == pytest.approx(sides[lever]["cpu_ms_per_batch"] / sides["sluice"]["cpu_ms_per_batch"], abs=0.001)
    assert sides[lever]["ratio_to_sluice_without_jit"] == pytest.approx(
        sides[lever]["cpu_ms_per_batch_without_jit"] / sides["sluice"]["cpu_ms_per_batch_without_jit"], abs=0.001)
    assert result["ratio"] == pytest.approx(sides["sluice"]["cpu_ms_per_batch"] / sides["spark-defaults"]["cpu_ms_per_batch"], abs=0.001)
    summary = (out / "summary.txt").read_text()
    assert "sluice / spark-defaults" in summary and "lever 1: spark.sql.lightweightPlanChangeValidation=false" in summary
    assert (out / "batch-cost.png").stat().st_size > 10_000
    assert "spark-defaults: measuring" in proc.stderr and "sluice: measuring" in proc.stderr  # progress per side
