"""crds/ is generated from the models; this test fails when they drift apart."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from sluice.api.crd import crds, crds_yaml
from sluice.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_crds_equal_generated() -> None:
    checked_in = (ROOT / "crds" / "sluice.dev.yaml").read_text()
    assert checked_in == crds_yaml(), "crds/ is stale: run `sluice crds > crds/sluice.dev.yaml`"


def test_cli_prints_the_same() -> None:
    result = CliRunner().invoke(main, ["crds"])
    assert result.exit_code == 0
    assert result.output == crds_yaml()


def _walk(schema: dict, path: str = "", defaults: bool = True) -> list[str]:
    """Return the places that break Kubernetes' structural-schema rules (and defaults where
    `defaults` is False)."""
    problems = []
    for banned in ("$ref", "anyOf", "oneOf", "allOf", "title", "const", *(() if defaults else ("default",))):
        if banned in schema:
            problems.append(f"{path}: {banned}")
    if "properties" in schema and schema.get("type") != "object":
        problems.append(f"{path}: properties without type object")
    if "type" not in schema and "x-kubernetes-preserve-unknown-fields" not in schema:
        problems.append(f"{path}: no type")
    if schema.get("default") is None and "default" in schema:
        problems.append(f"{path}: default null")
    for name, sub in schema.get("properties", {}).items():
        problems += _walk(sub, f"{path}.{name}", defaults)
    if isinstance(schema.get("items"), dict):
        problems += _walk(schema["items"], f"{path}[]", defaults)
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _walk(schema["additionalProperties"], f"{path}{{}}", defaults)
    return problems


def test_schemas_are_structural_and_documented() -> None:
    for crd in crds():
        version = crd["spec"]["versions"][0]
        root = version["schema"]["openAPIV3Schema"]
        assert _walk(root) == []
        assert _walk(root["properties"]["status"], "status", defaults=False) == []
        spec = root["properties"]["spec"]
        undocumented = [k for k, v in spec["properties"].items() if not v.get("description")]
        assert undocumented == []
        assert "status" in version["subresources"]


def test_names_scopes_columns_and_scale() -> None:
    query, pool = crds()
    assert query["spec"]["scope"] == "Namespaced" and query["spec"]["names"]["shortNames"] == ["sq"]
    assert pool["spec"]["scope"] == "Cluster" and pool["spec"]["names"]["shortNames"] == ["sp"]
    columns = {c["name"]: c for c in query["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert list(columns) == ["Pool", "SLA", "P99", "Attainment", "Executors", "Ready", "Phase", "Age", "Bottleneck",
                             "Message"]
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Bottleneck"]["priority"] == columns["Message"]["priority"] == 1  # -o wide only
    assert all("priority" not in columns[name] for name in ("Pool", "SLA", "P99", "Attainment", "Ready", "Phase"))
    # units in the column: the operator writes '812ms' and '97.5%' beside the raw numbers
    assert columns["P99"]["jsonPath"] == ".status.latency.p99" and columns["P99"]["type"] == "string"
    assert columns["Attainment"]["jsonPath"] == ".status.attainment"
    scale = pool["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {"specReplicasPath": ".spec.executors", "statusReplicasPath": ".status.executors.current",
                     "labelSelectorPath": ".status.selector"}
    assert yaml.safe_load_all(crds_yaml())  # parses back


def test_spec_defaults_are_the_models_and_unions_carry_none() -> None:
    from sluice.api.pool import StreamingPoolSpec
    from sluice.api.query import Sla

    query, pool = crds()
    spec = pool["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    model = StreamingPoolSpec()
    assert spec["policy"]["default"] == model.policy == "cameo"  # kubectl get sp shows the POLICY in force
    assert (spec["minExecutors"]["default"], spec["maxExecutors"]["default"]) == (model.minExecutors, model.maxExecutors)
    assert spec["executor"]["properties"]["memory"]["default"] == model.executor.memory.text == "1Gi"
    assert "default" not in spec["image"]  # omitted: the operator's runtime image
    qspec = query["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert qspec["sla"]["properties"]["percentile"]["default"] == Sla.model_fields["percentile"].default
    for union in ("source", "sink"):  # one variant's defaults must never land in another's
        assert _walk(qspec[union], union, defaults=False) == []


def test_the_units_in_status_columns() -> None:
    from sluice.operator.display import latency_text, percent_text

    assert [latency_text(ms) for ms in (0.4, 812.3, 999.4, 1000, 1530, 59_949, 123_000)] == [
        "0ms", "812ms", "999ms", "1.0s", "1.5s", "59.9s", "2m3s"]
    assert [percent_text(x) for x in (0, 0.975, 0.99949, 1)] == ["0.0%", "97.5%", "99.9%", "100.0%"]


def _integers(schema: dict, path: str = "") -> dict[str, dict]:
    found = {path: schema} if schema.get("type") == "integer" else {}
    for name, sub in schema.get("properties", {}).items():
        found |= _integers(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found |= _integers(schema[key], f"{path}[]")
    return found


def test_every_integer_field_of_a_spec_refuses_a_whole_float() -> None:
    """The API server takes `4.0` for `type: integer`; the models refuse it; the CEL rule makes the
    API server agree (tests/cluster/test_manifest_agreement.py sends 0.0 and 1.0 to every field)."""
    for crd in crds():
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        integers = _integers(spec)
        assert integers, crd["metadata"]["name"]
        lacking = [path for path, node in integers.items()
                   if {"rule": "type(self) == int", "message": "must be a whole number written without a decimal point"}
                   not in node.get("x-kubernetes-validations", [])]
        assert lacking == []
