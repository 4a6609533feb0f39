"""`sluice bench cameo --target node`, short: one policy, about a minute of load, on the node tier's
cluster and broker (this file runs after test_node.py, whose release it reuses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sluice.bench import cameo
from sluice.bench.node import NodeTarget, install
from sluice.testing.kafka import KafkaBroker
from sluice.testing.node import NodeCluster

pytestmark = [pytest.mark.node, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def short_scenario(path: Path) -> Path:
    """bench/scenarios/burst.yaml at a third of its length, its burst kept inside the load."""
    scenario = yaml.safe_load((ROOT / "bench" / "scenarios" / "burst.yaml").read_text())
    scenario["warmup"], scenario["duration"] = "15s", "40s"
    for item in scenario["queries"]:
        for burst in item["load"].get("bursts", []):
            burst["at"], burst["for"] = "25s", "5s"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def test_the_cameo_benchmark_runs_a_scenario_on_a_pool_and_judges_every_row(
        node: NodeCluster, node_broker: KafkaBroker, tmp_path: Path) -> None:
    install(node, say=lambda message: None)
    target = NodeTarget(node, node_broker, say=lambda message: None)
    # the pool warms at start for 15 s, not its default 45 s (test_node.py checks what the warm-up runs)
    result = cameo.run(short_scenario(tmp_path / "burst.yaml"), ["cameo"], 1, tmp_path / "out", log=lambda m: None,
                       target="node", node=target, start_warmup="15s")
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["target"] == "node" and document["urgent_lane"] == "gated" and document["start_warmup"] == "15s"
    # cameo's pool ran the lane's bulk turns in its executor pods
    assert document["urgent_lane_status"]["cameo"][0].startswith("on: bulk tasks take turns"), document
    figures = document["policies"]["cameo"]
    assert set(figures) == {"payments/fraud-alerts", "analytics/merchant-stats"}
    for key, q in figures.items():
        # every query was sent rows and its batches were read back from the pod: rows judged
        assert q["sent"] > 0 and q["processed"] > 0, (key, q)
        assert q["attainment"] is not None and q["p99_ms"] is not None, (key, q)
    report = json.loads((tmp_path / "out" / "runs" / "cameo-0" / "report.json").read_text())
    # the gate asked the sidecar: the pool's queries ran gated
    assert {v["scheduler"] for v in report["queries"].values()} == {"gated"}
    # what `sluice simulate --costs` reads of the run: the pool's Spark setup as its runtime told
    # it (two-core executor pods: the lane's 8 slots a core and a bulk turn a core, no CAP_SYS_NICE)
    assert report["spark"] == {"master": "k8s", "executor_cores": 2, "host_cores": report["cores"], "task_slots": 16,
                               "bulk_tasks": 2, "priorities": False, "lane_on": True}, report["spark"]
    assert report["gate_capacity"] >= 4 and report["critical_lane"] >= 0
    # the pool's pods used CPU while the load ran, and the rest of the node (control plane, broker) some too
    machine = report["machine"]
    assert machine["run_cores"] > 0.1 and machine["busy_cores"] >= machine["run_cores"] - 0.05, machine
    assert document["machine"]["cameo"][0] == machine
    # and over time: the pods' JVMs compiled while the load ran (JIT), the tasks ran on their
    # threads, and each pod (the driver's, an executor's at least) has its own series
    series = machine["series"]
    assert series["jit"][-1][1] > 0 and series["task"][-1][1] > 0, {k: v[-1] for k, v in series.items()}
    assert any(name.startswith("sluice-pool-") for name in series) and any("-exec-" in name for name in series), list(series)
    # each query's costs as the pool's status had them, and its first batches' (a cold start)
    critical = report["queries"]["payments/fraud-alerts"]
    assert critical["costs"]["fixed_ms"] >= 0 and critical["costs"]["input_rate"] > 0, critical["costs"]
    assert critical["cold_ms"] and all(ms > 0 for ms in critical["cold_ms"]), critical["cold_ms"]
    # its critical path at each poll (SnailTrail's shares over its recent batches) and the bands its
    # batches ran in so far; none kept for the bulk query
    path = critical["critical_path_series"]
    assert path and any(shares for _, shares, _ in path) and all(k.startswith("band") for k in path[-1][2]), path[-3:]
    assert path[-1][2] and report["queries"]["analytics/merchant-stats"]["critical_path_series"] == []
    executors = document["executors"]["cameo"][0]
    assert executors and all(n >= 1 for _, n in executors), executors
    # each scaling the operator decided while the load ran, with DS2's reason (its events); an
    # executor that joined after the load started was one of them
    scalings = document["scalings"]["cameo"][0]
    assert all(s["reason"].startswith("DS2") and s["at_s"] >= 0 for s in scalings), scalings
    assert scalings or not report["joins"], (report["joins"], scalings)
    # what users see in the StreamingQueries' status, beside the harness's figure of the same minute
    compared = document["status_vs_harness"]["cameo"][0]
    # the critical filter commits every few hundred ms: the harness judged its last minute
    assert compared["payments/fraud-alerts"]["harness"]["p99_ms"] is not None, compared
    # the aggregation's first window may close only after this short load ends on a slow machine
    # (its batches' rows waited 20-35 s here; the speed is bench cameo's to judge): then the
    # status has no figure either; where the status has one, the harness read that minute too
    assert all(v["harness"]["p99_ms"] is not None for v in compared.values() if v["status"]["p99_ms"] is not None), compared
    assert any(line.startswith("cameo #1 payments/fraud-alerts: status p99") for line in result["throughput"])
    # the run leaves no pool behind
    assert not json.loads(node.kubectl("get", "sp", "-o", "json").stdout)["items"]
