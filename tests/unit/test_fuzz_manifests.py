"""Fuzzing the manifests: the examples mutated at every path (bad values, deleted and unknown
fields), 1,000 per run, through `sluice validate` and the operator's admission path (the models
`load_query` and `pool_model` read bodies with). Never a traceback; every error one sentence
naming a field. And the defects such fuzzing found, each kept as a case."""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from sluice.api.manifest import ManifestErrors, load_query, parse_text
from sluice.operator.admission import admit
from sluice.operator.pools import pool_model
from sluice.testing.manifests import ROOT, documents, mutated


def one_sentence(message: str) -> bool:
    return "\n" not in message and message.endswith(".") and "Traceback" not in message and len(message) < 600


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_no_mutated_manifest_gets_a_traceback_and_every_error_names_a_field(case: tuple[dict[str, Any], str]) -> None:
    document, what = case
    parsed, errors = parse_text(yaml.safe_dump(document), "m.yaml")
    assert parsed or errors, what
    for error in errors:
        assert error.path and one_sentence(error.message), (what, error)
    # the operator reads the same document from the apiserver (which always sets apiVersion and
    # kind, and keeps no unknown top-level field) with the same models: it must agree with
    # `sluice validate`
    if document.get("apiVersion") != "sluice.dev/v1alpha1" or set(document) - {"apiVersion", "kind", "metadata", "spec"}:
        return
    if document.get("kind") == "StreamingQuery":
        try:
            query = load_query(document)
        except ManifestErrors as refused:
            assert errors and all(one_sentence(e.message) for e in refused.errors), what
        else:
            assert not errors, what
            admit(query, None, 0)  # no pool: a decision, not an exception
    elif document.get("kind") == "StreamingPool":
        try:
            pool_model(document)
        except kopf.PermanentError as refused:
            assert errors and "\n" not in str(refused), what
        else:
            assert not errors, what


def query_example() -> dict[str, Any]:
    return copy.deepcopy(next(d for d in documents() if d["metadata"]["name"] == "fraud-filter"))


def errors_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in parse_text(yaml.safe_dump(document), "m.yaml")[1]]


@pytest.mark.parametrize(("path", "value", "field", "words"), [
    (("spec", "source", "rowsPerSecond"), True, "spec.source.rowsPerSecond", "integer"),
    (("spec", "source", "rowsPerSecond"), "20", "spec.source.rowsPerSecond", "integer"),
    (("spec", "pipeline"), [{"filter": "1h1h1h1h"}], "spec.pipeline[0].filter", "column '1h1h1h1h' does not exist"),
    (("spec", "pipeline"), [{"select": ["x" * 5000]}], "spec.pipeline[0].select[0]", "at most 4096 characters"),
    (("spec", "pipeline"), [{"select": ["x" * 4000]}], "spec.pipeline[0].select", "does not exist here"),
    (("spec", "pipeline"), [{"select": ["value AS v"]}, {"filter": "value > 1"}], "spec.pipeline[1].filter",
     "column 'value' does not exist"),
    # what the API server refused and the models accepted (tests/cluster/test_manifest_agreement.py)
    (("spec", "sla", "latencyTarget"), 1, "spec.sla.latencyTarget", "'1s'"),
    (("spec", "trigger", "interval"), 1.5, "spec.trigger.interval", "bare number"),
    (("spec", "source", "rowsPerSecond"), 2**63, "spec.source.rowsPerSecond", "less than or equal to 10000000"),
    (("metadata", "unknownField"), 1, "metadata.unknownField", "not a known field"),
    (("metadata", "unknownField"), None, "metadata.unknownField", "not a known field"),
])
def test_what_the_first_fuzzing_accepted_is_refused(path: tuple[str, ...], value: Any, field: str, words: str) -> None:
    doc = query_example()
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    errors = errors_of(doc)
    assert len(errors) == 1 and errors[0][0] == field and words in errors[0][1], errors


def test_columns_are_checked_only_where_the_schema_is_known() -> None:
    doc = query_example()
    doc["spec"]["pipeline"] = [{"select": ["value * 2", "timestamp"]}, {"filter": "anything > 1"}]
    assert errors_of(doc) == []  # Spark names `value * 2` itself: the columns after it are unknown
    doc["spec"]["pipeline"] = [{"withColumn": {"name": "double", "expr": "value * 2"}}, {"filter": "double > 1"}]
    assert errors_of(doc) == []
    doc["spec"]["source"] = {"type": "kafka", "bootstrapServers": "k:9092", "topic": "t", "schema": "key STRING, amt DOUBLE"}
    doc["spec"]["pipeline"] = [{"filter": "AMT > 1"}]  # Spark matches names without case
    assert errors_of(doc) == []
    doc["spec"]["source"]["schema"] = "key STRING, amt"
    assert errors_of(doc)[0][0] == "spec.source.schema"


@pytest.mark.parametrize("memory", ["1000000000000000000000000000000", "2Ti", "100Mi"])
def test_executor_memory_is_bounded(memory: str) -> None:
    pool = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "p"},
            "spec": {"executor": {"memory": memory}}}
    (error,) = errors_of(pool)
    assert error[0] == "spec.executor.memory" and "outside 512Mi..1Ti" in error[1]


def test_a_long_column_name_is_shortened_where_the_error_lists_the_columns() -> None:
    document = query_example()
    document["spec"]["pipeline"][0]["withColumn"]["name"] = "x" * 500
    [(path, message)] = [e for e in errors_of(document) if "does not exist" in e[1]]
    assert path == "spec.pipeline[1].filter" and one_sentence(message) and "x" * 41 not in message, message


def test_a_null_field_is_absent_as_the_api_server_prunes_it() -> None:
    pool = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool", "metadata": {"name": "p"},
            "spec": {"executor": {"memory": None, "cores": None}, "policy": None, "quotas": {"a": None, "b": {}}}}
    [parsed], errors = parse_text(yaml.safe_dump(pool), "m.yaml")
    assert errors == [] and parsed.resource.spec.executor.memory.text == "1Gi"  # type: ignore[union-attr]
    assert list(parsed.resource.spec.quotas) == ["b"]  # type: ignore[union-attr]
    pool["spec"] = None  # a pool must still have a spec, as the CRD says
    assert errors_of(pool) == [("spec", "is required but missing; add it.")]


@pytest.mark.parametrize(("aggregate", "words"), [
    ({"fn": "sum"}, "sum needs a 'column'"),
    ({"fn": "approx_percentile", "column": "value"}, "needs 'percentile'"),
    ({"fn": "count", "percentile": 0.5}, "only applies to approx_percentile"),
])
def test_an_aggregate_missing_its_column_or_percentile_is_refused_by_both_checkers(aggregate: dict[str, Any], words: str) -> None:
    doc = query_example()
    doc["spec"]["pipeline"] = [{"groupBy": ["value"]}, {"aggregate": [aggregate]}]
    assert any(words in message for _, message in errors_of(doc)), errors_of(doc)
    crds = list(yaml.safe_load_all((ROOT / "crds" / "sluice.dev.yaml").read_text()))
    rules = [r["message"] for r in _find_rules(crds)]
    assert {"every fn but count needs a 'column' to aggregate", "approx_percentile needs 'percentile', e.g. 0.99",
            "'percentile' only applies to approx_percentile"} <= set(rules)


def _find_rules(node: Any) -> list[dict[str, str]]:
    if isinstance(node, dict):
        return list(node.get("x-kubernetes-validations", [])) + [r for v in node.values() for r in _find_rules(v)]
    if isinstance(node, list):
        return [r for v in node for r in _find_rules(v)]
    return []
