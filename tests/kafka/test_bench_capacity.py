"""`sluice bench capacity` end to end on a tiny scenario with 2 probes: its files, JSON and progress."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.bench]
ROOT = Path(__file__).resolve().parents[2]


def test_two_probes_write_the_contract_files(tmp_path: Path) -> None:
    scenario = yaml.safe_load((ROOT / "bench" / "scenarios" / "two-tenants.yaml").read_text())
    scenario.update(name="tiny", duration="12s", warmup="6s")
    scenario["queries"][1]["load"]["rate"] = 1000
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "bench", "capacity", "--scenario", str(path), "--policies", "cameo",
         "--max-probes", "2", "--max-time", "10m", "--out", str(out), "--no-calibrate"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["scenario"] == "tiny" and set(results["policies"]) == {"cameo"}
    entry = results["policies"]["cameo"]
    probes = entry["probes"]
    assert len(probes) == 2
    for probe in probes:
        assert {"multiplier", "ok", "worst_query", "worst_attainment", "rows"} <= set(probe)
        assert probe["worst_query"] in ("payments/fraud-alerts", "analytics/merchant-stats")
        assert probe["rows"] > 0
    first, second = probes
    assert first["multiplier"] == 1.0
    assert second["multiplier"] == (2.0 if first["ok"] else 0.5)  # bracketing follows the first verdict
    low, high = entry["bracket"]
    passed = [p["multiplier"] for p in probes if p["ok"]]
    assert entry["capacity"] == (max(passed) if passed else 0.0) == (low or 0.0)
    assert high == (min(p["multiplier"] for p in probes if not p["ok"]) if len(passed) < 2 else None)
    # progress: each probe with its policy, the elapsed time and the bracket
    assert proc.stderr.count("cameo: probe ") == 2 and "min]" in proc.stderr and "bracket [" in proc.stderr
    assert (out / "capacity.png").stat().st_size > 1000
    assert "capacity" in (out / "summary.txt").read_text()
    assert not (out / "runs" / "cameo-1" / "work").exists()  # a probe's checkpoints go; its report stays
    report = json.loads((out / "runs" / "cameo-1" / "report.json").read_text())
    assert results["urgent_lane"] == "gated" and report["spark"]["urgent_lane"] == "gated"
    assert report["spark"]["lane_on"]  # a gated policy takes the lane by default
    sent = json.loads((out / "runs" / "cameo-1" / "sent.json").read_text())  # what the run drained against
    for key in ("payments/fraud-alerts", "analytics/merchant-stats"):
        assert sent[key] >= report["queries"][key]["rows"] > 0
    assert report["drain"]["limit_s"] == 32 and report["drain"]["took_s"] <= 32 + 2  # 30 s SLA + 2 s
