"""The Cameo benchmark's variants: micro-batches under each policy, each query's own mode under `auto`."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from sluice.bench.cameo import AUTO, LANE, VARIANTS, _for_run, load_scenario
from sluice.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_policies_run_micro_batches_and_auto_keeps_each_querys_mode() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    assert VARIANTS[-2:] == (AUTO, LANE) and "cameo" in VARIANTS
    fraud, load = queries[0], scenario.queries[0].load
    forced = _for_run(fraud, load, "127.0.0.1:9", "in-1", "cameo", sink_topic="out-1")
    assert forced["spec"]["execution"] == "microBatch"
    # every variant writes at least once, as Real-time Mode does (like with like)
    assert forced["spec"]["sink"] == {"type": "kafka", "bootstrapServers": "127.0.0.1:9", "topic": "out-1",
                                      "delivery": "atLeastOnce"}
    own = _for_run(fraud, load, "127.0.0.1:9", "in-1", AUTO, sink_topic="out-1")
    assert own["spec"]["execution"] == "auto"  # the manifest's (default): the runtime picks Real-time Mode
    assert own["spec"]["sink"]["delivery"] == "atLeastOnce"
    bulk = _for_run(queries[2], scenario.queries[2].load, "127.0.0.1:9", "in-3", AUTO)
    assert bulk["spec"]["sink"] == {"type": "noop"}
    lane = _for_run(fraud, load, "127.0.0.1:9", "in-1", LANE, sink_topic="out-1")
    assert lane["spec"]["execution"] == "auto"  # the lane keeps each query's own mode too


def test_delivery_overrides_every_kafka_sink_and_is_refused_where_there_is_none() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    fraud, load = queries[0], scenario.queries[0].load
    chosen = _for_run(fraud, load, "127.0.0.1:9", "in-1", "cameo", sink_topic="out-1", delivery="exactlyOnce")
    assert chosen["spec"]["sink"]["delivery"] == "exactlyOnce"
    bulk = _for_run(queries[2], scenario.queries[2].load, "127.0.0.1:9", "in-3", "cameo", delivery="exactlyOnce")
    assert bulk["spec"]["sink"] == {"type": "noop"}  # a noop sink has no delivery to set
    two = ROOT / "bench" / "scenarios" / "two-tenants.yaml"
    result = CliRunner().invoke(main, ["bench", "cameo", "--scenario", str(two), "--delivery", "exactlyOnce",
                                       "--no-calibrate", "--out", "unused"])
    assert result.exit_code == 1
    assert result.output.strip() == (f"--delivery: {two} has no Kafka sink to write exactlyOnce; use a scenario whose "
                                     "queries write to Kafka (bench/scenarios/realtime.yaml) or leave --delivery out.")
