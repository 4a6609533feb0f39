"""`sluice bench cameo` end to end on a short scenario: its files and JSON contract (not its figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_short_benchmark_writes_results_and_plots(tmp_path: Path) -> None:
    scenario = yaml.safe_load((ROOT / "bench" / "scenarios" / "two-tenants.yaml").read_text())
    scenario.update(duration="14s", warmup="6s")  # a cold JVM needs its first seconds
    scenario["queries"][1]["load"]["rate"] = 2000
    # the filter writes Kafka (its output keeps seq): its latency is read at the sink topic
    scenario["queries"][0]["manifest"]["spec"]["sink"] = {"type": "kafka", "bootstrapServers": "replaced-by-bench",
                                                          "topic": "replaced-by-bench", "delivery": "exactlyOnce"}
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    # leftovers of an earlier benchmark into the same folder: a checkpoint naming another
    # topic's offsets made every batch of a rerun hang; each run must start fresh
    stale = out / "runs" / "fifo-0" / "work" / "checkpoints" / "payments" / "fraud-alerts" / "offsets"
    stale.mkdir(parents=True)
    (stale / "0").write_text("stale")
    (out / "kafka" / "kafka-1").mkdir(parents=True)
    (out / "kafka" / "kafka-1" / "junk").write_text("stale")
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "bench", "cameo", "--scenario", str(path), "--policies", "fifo,cameo", "--out", str(out),
         "--no-calibrate", "--urgent-lane", "all"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert set(results["policies"]) == {"fifo", "cameo"}
    assert results["sitting"] == {"skipped": "--no-calibrate"}  # the machine speed is named, measured or not
    assert results["urgent_lane"] == "all" and results["drain_s"] > 0
    warm = results["broker_warmup"]  # the scenario's load for its warm-up's 6 s, read back, before the first run
    assert warm["seconds"] >= 6 and warm["sent"] >= 0.8 * 6 * warm["rate"] and warm["read"] > 0, warm
    assert "broker warm:" in proc.stderr + proc.stdout
    for policy in ("fifo", "cameo"):  # `all`: fifo on the lane's setup too, like for like
        spark = json.loads((out / "runs" / f"{policy}-0" / "report.json").read_text())["spark"]
        assert spark["urgent_lane"] == "all" and spark["lane_on"] and spark["master"] == "local[16]"
    for table in results["policies"].values():  # every row sent is judged
        figures = table["payments/fraud-alerts"]
        assert figures["sent"] > 0 and figures["sent"] == figures["processed"] + figures["backlog_end"]
    for table in results["policies"].values():
        for key in ("payments/fraud-alerts", "analytics/merchant-stats"):
            assert {"p50_ms", "p99_ms", "max_ms", "sla_ms", "attainment", "rows"} <= set(table[key])
        assert table["payments/fraud-alerts"]["rows"] > 0 and table["payments/fraud-alerts"]["sla_ms"] == 1000
        # one measuring point: the Kafka filter where a read_committed reader sees its rows, the
        # noop aggregation at its commit
        assert table["payments/fraud-alerts"]["latency_end"] == "sink read"
        assert table["analytics/merchant-stats"]["latency_end"] == "commit"
    assert set(results["latency_end"]) == {"sink read", "commit"}
    for name in ("latency.png", "cdf.png", "summary.txt"):
        assert (out / name).stat().st_size > 1000 or name == "summary.txt"
    assert "p99 fifo/cameo" in proc.stdout and "rows per policy" in proc.stdout
    assert (stale / "0").read_text() != "stale"  # the run wrote its own offsets into a fresh checkpoint
    for policy in ("fifo", "cameo"):  # each run's load began once its queries were in (`await_ready`)
        assert float((out / "runs" / f"{policy}-0" / "ready").read_text()) > 0
    assert not (out / "kafka" / "kafka-1" / "junk").exists()


def test_bad_scenario_gets_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nduration: soon\nqueries: []\n")
    proc = subprocess.run([sys.executable, "-m", "sluice", "bench", "cameo", "--scenario", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "duration" in proc.stderr and "Traceback" not in proc.stderr
