"""The Cameo benchmark's variants: micro-batches under each policy, each query's own mode under `auto`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.api.constants import MASSES
from sluice.api.manifest import parse_document
from sluice.api.pool import StreamingPool
from sluice.bench.cameo import load_scenario, variants, with_jits
from sluice.bench.node import _last_minute, join_figures, join_lines, pool_manifest, reserved_by
from sluice.bench.scenario_runs import AUTO, LANE, VARIANTS, for_run
from sluice.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_policies_run_micro_batches_and_auto_keeps_each_querys_mode() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    assert VARIANTS[-2:] == (AUTO, LANE) and "cameo" in VARIANTS
    fraud, load = queries[0], scenario.queries[0].load
    forced = for_run(fraud, load, "127.0.0.1:9", "in-1", "cameo", sink_topic="out-1")
    assert forced["spec"]["execution"] == "microBatch"
    # every variant writes at least once, as Real-time Mode does (like with like)
    assert forced["spec"]["sink"] == {"type": "kafka", "bootstrapServers": "127.0.0.1:9", "topic": "out-1",
                                      "delivery": "atLeastOnce"}
    own = for_run(fraud, load, "127.0.0.1:9", "in-1", AUTO, sink_topic="out-1")
    assert own["spec"]["execution"] == "auto"  # the manifest's (default): the runtime picks Real-time Mode
    assert own["spec"]["sink"]["delivery"] == "atLeastOnce"
    bulk = for_run(queries[2], scenario.queries[2].load, "127.0.0.1:9", "in-3", AUTO)
    assert bulk["spec"]["sink"] == {"type": "noop"}
    lane = for_run(fraud, load, "127.0.0.1:9", "in-1", LANE, sink_topic="out-1")
    assert lane["spec"]["execution"] == "auto"  # the lane keeps each query's own mode too


def test_delivery_overrides_every_kafka_sink_and_is_refused_where_there_is_none() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    fraud, load = queries[0], scenario.queries[0].load
    chosen = for_run(fraud, load, "127.0.0.1:9", "in-1", "cameo", sink_topic="out-1", delivery="exactlyOnce")
    assert chosen["spec"]["sink"]["delivery"] == "exactlyOnce"
    bulk = for_run(queries[2], scenario.queries[2].load, "127.0.0.1:9", "in-3", "cameo", delivery="exactlyOnce")
    assert bulk["spec"]["sink"] == {"type": "noop"}  # a noop sink has no delivery to set
    two = ROOT / "bench" / "scenarios" / "two-tenants.yaml"
    result = CliRunner().invoke(main, ["bench", "cameo", "--scenario", str(two), "--delivery", "exactlyOnce",
                                       "--no-calibrate", "--out", "unused"])
    assert result.exit_code == 1
    assert result.output.strip() == (f"--delivery: {two} has no Kafka sink to write exactlyOnce; use a scenario whose "
                                     "queries write to Kafka (bench/scenarios/realtime.yaml) or leave --delivery out.")


def test_each_gated_policy_runs_once_per_gate_and_fifo_and_fair_once() -> None:
    assert variants(["fifo", "cameo", AUTO], ["inprocess", "sidecar"]) == [
        ("fifo", "fifo", "inprocess"), ("cameo", "cameo", "inprocess"), ("cameo+sidecar", "cameo", "sidecar"),
        (AUTO, AUTO, "inprocess"), (f"{AUTO}+sidecar", AUTO, "sidecar")]
    # a sidecar alone: fifo and fair still run (they have no gate to ask), once
    assert variants(["fair", "edf"], ["sidecar"]) == [("fair", "fair", "inprocess"), ("edf+sidecar", "edf", "sidecar")]


def test_each_variant_runs_once_per_executor_jit_and_hotspot_s_default_keeps_the_plain_name() -> None:
    assert with_jits(variants(["fifo", "cameo"], ["inprocess"]), ["tiered", "low"]) == [
        ("fifo", "fifo", "inprocess", "tiered"), ("fifo+low", "fifo", "inprocess", "low"),
        ("cameo", "cameo", "inprocess", "tiered"), ("cameo+low", "cameo", "inprocess", "low")]


def test_what_the_node_target_cannot_run_is_refused_in_one_sentence() -> None:
    two = ROOT / "bench" / "scenarios" / "two-tenants.yaml"
    cases = {
        ("--target", "node", "--policies", "cameo,auto-lane"):
            "--policies: the node target runs fifo, fair, edf, cameo, auto (a pool's spec.policy, or auto for cameo "
            "with each query's own execution mode); leave auto-lane out.",
        ("--target", "node", "--urgent-lane", "all"):
            "--urgent-lane all: a pool gives its urgent lane to gated policies only (bulk turns in each executor, "
            "no raised priorities in pods); leave --urgent-lane out with --target node.",
        ("--target", "node", "--urgent-lane", "none"):
            "--urgent-lane none: a pool gives its urgent lane to gated policies only (bulk turns in each executor, "
            "no raised priorities in pods); leave --urgent-lane out with --target node.",
        ("--target", "node", "--gate", "sidecar"):
            "--gate: on the node target the gate always asks the pool's sidecar; leave --gate out.",
        ("--gate", "inprocess,http"): "--gate: use inprocess, sidecar or inprocess,sidecar (got 'inprocess,http').",
        ("--target", "node", "--executors", "2"):
            "--executors: the node target's pool sizes itself (DS2); leave --executors out with --target node.",
        ("--executor-jit", "tiered,c1"):
            "--executor-jit: locally executors have JVMs of their own only on local-cluster; add --executors N.",
        ("--executors", "2", "--executor-jit", "c1,c2"):
            "--executor-jit: use some of tiered, c1, low, each once (got 'c1,c2').",
        ("--executor-warmup", "60s"):
            "--executor-warmup: only a pool's executors warm up before urgent work; add --target node.",
        ("--start-warmup", "45s"):
            "--start-warmup: only a pool's runtime warms up before it serves; add --target node.",
        ("--urgent-reserve", "0"):
            "--urgent-reserve: only a pool's executor pods hold bulk turns back; add --target node.",
        ("--bulk-tasks", "4"): "--bulk-tasks: it sets a pool's spec.executor.bulkTasks; add --target node.",
        ("--policies", "cameo,auto-lane", "--executors", "2"):
            "--executors: auto-lane runs its Real-time queries in an application of their own on local[*]; leave it "
            "out of --policies with --executors.",
    }
    for args, sentence in cases.items():
        result = CliRunner().invoke(main, ["bench", "cameo", "--scenario", str(two), "--no-calibrate", "--out", "unused",
                                           *args])
        assert (result.exit_code, result.output.strip()) == (1, sentence), args


def test_a_pool_for_each_policy_is_a_valid_streaming_pool(tmp_path: Path) -> None:
    _, queries = load_scenario(ROOT / "bench" / "scenarios" / "two-tenants.yaml")
    for policy in ("fifo", "fair", "cameo", AUTO):
        manifest = pool_manifest(queries[0].spec.pool, policy, sorted({q.tenant for q in queries}), tmp_path)
        pool = parse_document(manifest, "bench")
        assert isinstance(pool, StreamingPool)
        assert pool.spec.policy == ("cameo" if policy == AUTO else policy)
        assert set(pool.spec.allowedNamespaces) == {q.tenant for q in queries}


def test_a_pool_for_real_time_queries_has_room_for_their_slots_and_asks_the_node_for_as_much(tmp_path: Path) -> None:
    # realtime.yaml under auto: two 100 ms filters in Real-time Mode, each holding a slot per
    # partition of its 2-partition topic (4), beside the aggregation's micro-batches
    _, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    manifests = [q.model_dump(mode="json", exclude_none=True, by_alias=True) for q in queries]
    assert reserved_by(manifests) == 4
    for manifest in manifests:
        manifest["spec"]["execution"] = "microBatch"  # what the micro-batch policies run
    assert reserved_by(manifests) == 0
    plain = pool_manifest("bench", "cameo", ["payments"], tmp_path)["spec"]
    roomy = pool_manifest("bench", AUTO, ["payments"], tmp_path, reserved=4)["spec"]
    assert (plain["maxExecutors"], plain["executor"]["cpuRequest"]) == (2, "500m")
    assert (roomy["maxExecutors"], roomy["executor"]["cpuRequest"]) == (4, "250m")  # 4 x 2 cores: 4 held, 4 left
    assert isinstance(parse_document(pool_manifest("bench", AUTO, ["payments"], tmp_path, 4), "bench"), StreamingPool)
    warming = parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path, warmup="60s"), "bench")
    assert isinstance(warming, StreamingPool) and warming.spec.executor.warmup.seconds == 60  # --executor-warmup
    assert "warmup" not in plain["executor"]  # the pool's default
    assert parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path), "bench").spec.executor.warmup.seconds == 60
    off = parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path, warmup="0s"), "bench")
    assert isinstance(off, StreamingPool) and off.spec.executor.warmup.seconds == 0  # --executor-warmup 0s
    assert "startWarmup" not in plain  # the pool's default, 45 s
    cold = parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path, start_warmup="0s"), "bench")
    assert isinstance(cold, StreamingPool) and cold.spec.startWarmup.seconds == 0  # --start-warmup 0s
    assert "urgentReserve" not in plain["executor"]  # the pool's default, 0
    held = parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path, urgent_reserve=1), "bench")
    assert isinstance(held, StreamingPool) and held.spec.executor.urgentReserve == 1  # --urgent-reserve 1
    assert "bulkTasks" not in plain["executor"]  # the pool's default, its cores
    turns = parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path, bulk_tasks=4), "bench")
    assert isinstance(turns, StreamingPool) and turns.spec.executor.bulkTasks == 4  # --bulk-tasks 4
    assert parse_document(pool_manifest("bench", "cameo", ["payments"], tmp_path), "bench").spec.startWarmup.seconds == 45


def test_the_harness_figure_beside_the_status_spans_the_same_minute() -> None:
    # (seconds since the load started, rows, latencies at the grid): one batch outside the minute
    timeline = [[10.0, 100, [5000.0] * len(MASSES)], [80.0, 100, [200.0] * len(MASSES)],
                [130.0, 300, [1500.0] * len(MASSES)]]
    figure = _last_minute(timeline, 130.0, 1000.0)
    assert figure["attainment"] == pytest.approx(0.25) and figure["p99_ms"] == 1500.0
    assert _last_minute([], 130.0, 1000.0) == {"p99_ms": None, "attainment": None}


def test_an_executor_join_s_cost_is_the_attainment_in_the_window_after_it() -> None:
    # batches every 10 s; executors joined at 31 s and 95 s; the batches at 40 and 50 s (after the
    # first join) and 100 s (after the second) missed the 1 s SLA, the rest kept it
    late, early = [3000.0] * len(MASSES), [300.0] * len(MASSES)
    timeline = [[float(t), 100, late if t in (40, 50, 100) else early] for t in range(10, 141, 10)]
    figures = join_figures(timeline, [31.0, 95.0], 1000.0)
    assert figures["window_s"] == 30.0
    assert [j["at_s"] for j in figures["joins"]] == [31.0, 95.0]
    assert figures["joins"][0]["attainment"] == pytest.approx(1 / 3)  # 40, 50 late; 60 kept
    assert figures["joins"][1]["attainment"] == pytest.approx(2 / 3)  # 100 late; 110, 120 kept
    assert figures["after_joins"]["attainment"] == pytest.approx(3 / 6)
    assert figures["rest"]["attainment"] == 1.0 and figures["rest"]["p99_ms"] == 300.0
    # no join: every batch is the rest
    assert join_figures(timeline, [], 1000.0)["after_joins"]["attainment"] is None


def test_the_join_lines_name_each_critical_query_of_each_run_with_joins() -> None:
    from sluice.api.constants import API_VERSION
    from sluice.api.manifest import load_query
    from sluice.api.query import StreamingQuery

    def q(name: str) -> StreamingQuery:
        return load_query({"apiVersion": API_VERSION, "kind": "StreamingQuery",
                           "metadata": {"name": name, "namespace": "t"},
                           "spec": {"pool": "p", "source": {"type": "rate", "rowsPerSecond": 1},
                                    "pipeline": [{"filter": "value >= 0"}], "sink": {"type": "noop"},
                                    "sla": {"latencyTarget": "1s"}}})

    queries = [q("filter"), q("agg")]
    timeline = [[40.0, 10, [3000.0] * len(MASSES)], [80.0, 10, [100.0] * len(MASSES)]]
    report = {"joins": [35.0], "queries": {"t/filter": {"timeline": timeline}, "t/agg": {"timeline": timeline}},
              "scalings": [{"at_s": 21.4, "reason": "DS2: 1.3 cores needed ...: growing from 1."}]}
    lines = join_lines({"cameo": [report, {"joins": [], "queries": {}}]}, queries, [True, False])
    assert lines == ["cameo #1 t/filter: executors joined at 35 s; attainment 0.0% in the 30 s after, 100.0% over the rest",
                     "cameo #1 scaled at 21 s: DS2: 1.3 cores needed ...: growing from 1."]
