"""`sluice bench density` end to end at a tiny scale: a shared pool of 1 then 2 queries, and one
application per query, through the real control API. Its files and JSON contract, not its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.bench]


def test_tiny_density_run_writes_the_contract_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "bench", "density", "--counts", "1,2", "--per-app", "1",
         "--warmup", "15s", "--window", "10s", "--out", str(out), "--no-calibrate"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    assert [r["queries"] for r in result["shared"]] in ([1], [1, 2])  # stops after the first broken step
    for row in result["shared"]:
        assert {"queries", "worst_critical_attainment", "worst_bulk_attainment", "driver_rss_mb", "driver_cores"} <= set(row)
        assert 200 < row["driver_rss_mb"] < 8000  # a JVM and a Python process were measured
        assert 0 < row["driver_cores"] <= 2.5
        assert row["metric_series"] > 0 and row["decision_us"] > 0
    assert result["shared"][0]["worst_critical_attainment"] is not None  # query 0 is a critical filter
    # a critical query's cost figures are kept (its batch's fixed cost, its tasks' time off the CPU), a bulk one's not
    for row in result["shared"]:
        for key, query in row["per_query"].items():
            assert ("costs" in query) == key.endswith("/q0000"), key
    assert result["shared"][0]["per_query"]["tenant-00/q0000"]["costs"]["fixed_ms"] > 0
    (app,) = result["per_app"]
    assert app["queries"] == 1 and 200 < app["rss_mb_per_query"] < 8000 and app["cores_per_query"] > 0
    assert result["capacity_queries"] in (0, 1, 2)
    assert (out / "density.png").stat().st_size > 1000
    assert "capacity:" in (out / "summary.txt").read_text()
    assert "N=1:" in proc.stderr  # progress per step
