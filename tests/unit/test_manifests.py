"""Manifests: the examples validate; malformed ones get exactly one sentence naming the field."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sluice.api.manifest import parse_text
from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery
from sluice.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
WINDOWED = yaml.safe_load((ROOT / "examples" / "hourly-revenue.yaml").read_text())
POOL = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())

Doc = dict[str, Any]


def at(*path: Any, value: Any = KeyError) -> Callable[[Doc], None]:
    """A mutation that sets (or, with no value, deletes) the field at path."""

    def mutate(doc: Doc) -> None:
        node = doc
        for part in path[:-1]:
            node = node[part]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return mutate


def step_first(step: Any) -> Callable[[Doc], None]:
    return lambda doc: doc["spec"]["pipeline"].insert(0, step)


def drop_step(index: int) -> Callable[[Doc], None]:
    return lambda doc: doc["spec"]["pipeline"].pop(index)


# (case id, base document, mutation, expected field path, words the sentence must contain)
CASES: list[tuple[str, Doc, Callable[[Doc], None], str, str]] = [
    ("wrong-kind", WINDOWED, at("kind", value="Deployment"), "kind", "StreamingQuery"),
    ("wrong-api-version", WINDOWED, at("apiVersion", value="v1"), "apiVersion", "sluice.dev/v1alpha1"),
    ("unknown-spec-field", WINDOWED, at("spec", "paralellism", value=3), "spec.paralellism", "not a known field"),
    ("unknown-source-field", WINDOWED, at("spec", "source", "topic", value="t"), "spec.source.topic", "not a known field"),
    ("unknown-sla-field", WINDOWED, at("spec", "sla", "target", value="1s"), "spec.sla.target", "not a known field"),
    ("negative-duration", WINDOWED, at("spec", "sla", "latencyTarget", value="-5s"), "spec.sla.latencyTarget", "negative"),
    ("unparsable-duration", WINDOWED, at("spec", "sla", "latencyTarget", value="fast"), "spec.sla.latencyTarget", "duration"),
    ("zero-duration", WINDOWED, at("spec", "sla", "latencyTarget", value="0s"), "spec.sla.latencyTarget", "longer than zero"),
    ("bad-watermark-delay", WINDOWED, at("spec", "pipeline", 2, "watermark", "delay", value="10 sec"), "spec.pipeline[2].watermark.delay", "duration"),
    ("empty-pipeline", WINDOWED, at("spec", "pipeline", value=[]), "spec.pipeline", "at least 1"),
    ("pipeline-not-list", WINDOWED, at("spec", "pipeline", value="filter x"), "spec.pipeline", "list"),
    ("window-without-column", WINDOWED, at("spec", "pipeline", 3, "window", "column"), "spec.pipeline[3].window.column", "required"),
    ("window-without-watermark", WINDOWED, drop_step(2), "spec.pipeline[2].window", "watermark"),
    ("aggregate-without-groupby", WINDOWED, drop_step(4), "spec.pipeline[4].aggregate", "groupBy"),
    ("groupby-without-window-key", WINDOWED, at("spec", "pipeline", 4, "groupBy", value=["merchant"]), "spec.pipeline[4].groupBy", "window"),
    ("empty-groupby", WINDOWED, at("spec", "pipeline", 4, "groupBy", value=[]), "spec.pipeline[4].groupBy", "at least 1"),
    ("sum-without-column", WINDOWED, at("spec", "pipeline", 5, "aggregate", value=[{"fn": "sum"}]), "spec.pipeline[5].aggregate[0]", "column"),
    ("unknown-aggregate", WINDOWED, at("spec", "pipeline", 5, "aggregate", value=[{"fn": "median", "column": "amount"}]), "spec.pipeline[5].aggregate[0].fn", "approx_percentile"),
    ("percentile-missing", WINDOWED, at("spec", "pipeline", 5, "aggregate", value=[{"fn": "approx_percentile", "column": "amount"}]), "spec.pipeline[5].aggregate[0]", "percentile"),
    ("slide-longer-than-size", WINDOWED, at("spec", "pipeline", 3, "window", "slide", value="20s"), "spec.pipeline[3].window", "slide"),
    ("filter-not-boolean", WINDOWED, step_first({"filter": "value + 1"}), "spec.pipeline[0].filter", "not a boolean"),
    ("filter-syntax", WINDOWED, step_first({"filter": "value >"}), "spec.pipeline[0].filter", "not a valid Spark SQL"),
    ("filter-subquery", WINDOWED, step_first({"filter": "value IN (SELECT id FROM secrets)"}), "spec.pipeline[0].filter", "subquery"),
    ("expr-file-read", WINDOWED, step_first({"withColumn": {"name": "x", "expr": "read_files('/etc/passwd')"}}), "spec.pipeline[0].withColumn.expr", "allow-list"),
    ("expr-java-reflect", WINDOWED, step_first({"withColumn": {"name": "x", "expr": "reflect('java.lang.Runtime', 'getRuntime')"}}), "spec.pipeline[0].withColumn.expr", "allow-list"),
    ("filter-aggregate", WINDOWED, step_first({"filter": "count(*) > 1"}), "spec.pipeline[0].filter", "allow-list"),
    ("filter-over-clause", WINDOWED, step_first({"filter": "sum(value) OVER () > 1"}), "spec.pipeline[0].filter", "window (OVER)"),
    ("filter-two-statements", WINDOWED, step_first({"filter": "value > 1; DROP TABLE t"}), "spec.pipeline[0].filter", "more than one statement"),
    ("filter-qualified-column", WINDOWED, step_first({"filter": "other.value > 1"}), "spec.pipeline[0].filter", "qualifies"),
    ("select-table-star", WINDOWED, step_first({"select": ["*"]}), "spec.pipeline[0].select[0]", "'*'"),
    ("step-two-kinds", WINDOWED, step_first({"filter": "value > 1", "select": ["value"]}), "spec.pipeline[0]", "exactly one"),
    ("step-empty", WINDOWED, step_first({}), "spec.pipeline[0]", "empty"),
    ("step-not-mapping", WINDOWED, step_first(["filter"]), "spec.pipeline[0]", "mapping"),
    ("unknown-step", WINDOWED, step_first({"join": "other"}), "spec.pipeline[0].join", "not a known field"),
    ("unknown-source-type", WINDOWED, at("spec", "source", "type", value="socket"), "spec.source.type", "kafka"),
    ("kafka-without-topic", WINDOWED, at("spec", "source", value={"type": "kafka", "bootstrapServers": "k:9092"}), "spec.source.topic", "required"),
    ("unknown-sink-type", WINDOWED, at("spec", "sink", value={"type": "jdbc"}), "spec.sink.type", "noop"),
    ("bad-pool-name", WINDOWED, at("spec", "pool", value="Shared_Pool"), "spec.pool", "DNS name"),
    ("percentile-over-100", WINDOWED, at("spec", "sla", "percentile", value=120), "spec.sla.percentile", "100"),
    ("missing-sla", WINDOWED, at("spec", "sla"), "spec.sla", "required"),
    ("missing-name", WINDOWED, at("metadata", "name"), "metadata.name", "required"),
    ("zero-shuffle-partitions", WINDOWED, at("spec", "resources", "shufflePartitions", value=0), "spec.resources.shufflePartitions", "greater than 0"),
    ("suspend-not-bool", WINDOWED, at("spec", "suspend", value="maybe"), "spec.suspend", "boolean"),
    ("pool-min-above-max", POOL, at("spec", "minExecutors", value=9), "spec", "minExecutors"),
    ("pool-unknown-policy", POOL, at("spec", "policy", value="lifo"), "spec.policy", "cameo"),
    ("pool-bad-memory", POOL, at("spec", "executor", "memory", value="lots"), "spec.executor.memory", "512Mi"),
    ("pool-zero-cores", POOL, at("spec", "executor", "cores", value=0), "spec.executor.cores", "greater than or equal to 1"),
    ("pool-long-warmup", POOL, at("spec", "executor", "warmup", value="10m"), "spec.executor.warmup", "at most 5m"),
    ("pool-quota-weight", POOL, at("spec", "quotas", "analytics", "weight", value=0), "spec.quotas.analytics.weight", "greater than 0"),
    ("pool-quota-share-removed", POOL, at("spec", "quotas", "analytics", "maxCoreShare", value=0.5), "spec.quotas.analytics.maxCoreShare", "not a known field"),
]


def test_examples_are_valid() -> None:
    assert len(EXAMPLES) >= 3
    kinds = set()
    for path in EXAMPLES:
        parsed, errors = parse_text(path.read_text(), path.name)
        assert errors == [], errors
        kinds.update(type(p.resource) for p in parsed)
    assert kinds == {StreamingQuery, StreamingPool}


@pytest.mark.parametrize(("case", "base", "mutate", "path", "words"), CASES, ids=[c[0] for c in CASES])
def test_malformed_manifest_gets_one_sentence(
    case: str, base: Doc, mutate: Callable[[Doc], None], path: str, words: str
) -> None:
    doc = copy.deepcopy(base)
    mutate(doc)
    parsed, errors = parse_text(yaml.safe_dump(doc), "m.yaml")
    assert parsed == []
    assert len(errors) == 1, [str(e) for e in errors]
    error = errors[0]
    assert error.path == path
    assert words in error.message
    # one sentence: ends with a period, no newline, no Python internals
    assert error.message.endswith(".") and "\n" not in error.message
    assert "Traceback" not in error.message and "<class" not in error.message


def test_units_are_parsed_once_in_the_models() -> None:
    query = StreamingQuery.model_validate(WINDOWED)
    assert query.spec.sla.latencyTarget.seconds == 30.0
    window = query.spec.pipeline[3].window
    assert window is not None and window.size.seconds == 10.0
    pool = StreamingPool.model_validate(POOL)
    assert pool.spec.executor.memory.bytes == 2 * 2**30
    # serialising gives back what the user wrote
    assert query.model_dump(mode="json", by_alias=True, exclude_none=True)["spec"]["sla"]["latencyTarget"] == "30s"


def test_cli_validate_examples_exit_zero() -> None:
    result = CliRunner().invoke(main, ["validate", "-f", *map(str, EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert result.output.count(" is valid") == len(EXAMPLES)


def test_cli_validate_multi_document_reports_each(tmp_path: Path) -> None:
    bad = copy.deepcopy(WINDOWED)
    bad["spec"]["sla"]["latencyTarget"] = "soon"
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump_all([WINDOWED, bad]))
    result = CliRunner().invoke(main, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert f"{path}#1: StreamingQuery analytics/revenue-by-merchant is valid" in result.output
    assert f"{path}#2: spec.sla.latencyTarget:" in result.output


@pytest.mark.parametrize(
    ("content", "words"),
    [("a: [1", "not valid YAML at line 1"), ("", "holds no manifest"), ("- 1\n- 2\n", "must be a mapping")],
)
def test_cli_validate_bad_yaml(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    result = CliRunner().invoke(main, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert words in result.output
    assert "Traceback" not in result.output


def test_installed_cli_never_prints_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: sluice.dev/v1alpha1\nkind: StreamingQuery\nmetadata: {name: x}\nspec: 3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "validate", "-f", str(missing), "-f", str(bad)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    assert "cannot be read" in lines[0] and "spec" in lines[1]
    assert "Traceback" not in proc.stderr


def test_the_demo_finds_its_manifests_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sluice.cli.demo import demo_manifests

    monkeypatch.chdir(tmp_path)  # not the repository: the demo's manifests come with the package
    found = [p.name for p in demo_manifests(None)]
    assert found == ["bulk-aggregation.yaml", "latency-critical.yaml"]
    assert demo_manifests(str(tmp_path)) == []  # an explicit folder is taken as given


def test_real_time_mode_is_refused_where_spark_cannot_run_it() -> None:
    from sluice.api.manifest import ManifestErrors, load_query

    kafka = yaml.safe_load((ROOT / "examples" / "kafka-clicks.yaml").read_text())
    kafka["spec"]["execution"] = "realTime"
    kafka["spec"]["sink"]["delivery"] = "atLeastOnce"  # Real-time Mode's own (the example asks exactlyOnce)
    assert load_query(kafka).spec.execution == "realTime"  # stateless, Kafka to Kafka: accepted
    rate = yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())
    rate["spec"]["execution"] = "realTime"
    with pytest.raises(ManifestErrors) as refused:
        load_query(rate)
    (error,) = refused.value.errors
    assert "execution is realTime but the source is rate" in str(error) and "use microBatch or auto" in str(error)
    assert load_query(yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())).spec.execution == "auto"


def test_a_kafka_sink_writes_exactly_once_unless_it_says_otherwise_and_real_time_mode_refuses_it() -> None:
    from sluice.api.manifest import ManifestErrors, load_query
    from sluice.api.query import KafkaSink
    from sluice.scheduler.execution import mode_of

    kafka = yaml.safe_load((ROOT / "examples" / "kafka-clicks.yaml").read_text())
    del kafka["spec"]["sink"]["delivery"]
    sink = load_query(kafka).spec.sink
    assert isinstance(sink, KafkaSink) and sink.delivery is None and sink.micro_batch_delivery == "exactlyOnce"
    kafka["spec"]["sink"]["delivery"] = "atLeastOnce"
    kafka["spec"]["execution"] = "realTime"
    assert load_query(kafka).spec.execution == "realTime"  # Spark's own writer: at least once
    kafka["spec"]["sink"]["delivery"] = "exactlyOnce"
    with pytest.raises(ManifestErrors) as refused:
        load_query(kafka)
    (error,) = refused.value.errors
    assert "delivery is exactlyOnce, and Real-time Mode writes at least once" in str(error)
    # auto with an SLA below the micro-batch floor: Real-time Mode, unless exactly once is asked for
    kafka["spec"]["execution"] = "auto"
    kafka["spec"]["sla"]["latencyTarget"] = "100ms"
    choice = mode_of(load_query(kafka))
    assert choice.mode == "microBatch" and "exactlyOnce" in choice.reason
    del kafka["spec"]["sink"]["delivery"]
    assert mode_of(load_query(kafka)).mode == "realTime"
    kafka["spec"]["sink"]["delivery"] = "twice"
    with pytest.raises(ManifestErrors) as refused:
        load_query(kafka)
    assert "delivery" in str(refused.value)
