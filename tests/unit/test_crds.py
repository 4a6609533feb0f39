"""crds/ is generated from the models; this test fails when they drift apart."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from sluice.api.crd import crds, crds_yaml
from sluice.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_crds_equal_generated() -> None:
    checked_in = (ROOT / "crds" / "sluice.dev.yaml").read_text()
    assert checked_in == crds_yaml(), "crds/ is stale: run `sluice crds > crds/sluice.dev.yaml`"


def test_cli_prints_the_same() -> None:
    result = CliRunner().invoke(main, ["crds"])
    assert result.exit_code == 0
    assert result.output == crds_yaml()


def _walk(schema: dict, path: str = "") -> list[str]:
    """Return the places that break Kubernetes' structural-schema rules."""
    problems = []
    for banned in ("$ref", "anyOf", "oneOf", "allOf", "default", "title", "const"):
        if banned in schema:
            problems.append(f"{path}: {banned}")
    if "properties" in schema and schema.get("type") != "object":
        problems.append(f"{path}: properties without type object")
    if "type" not in schema and "x-kubernetes-preserve-unknown-fields" not in schema:
        problems.append(f"{path}: no type")
    for name, sub in schema.get("properties", {}).items():
        problems += _walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        problems += _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _walk(schema["additionalProperties"], f"{path}{{}}")
    return problems


def test_schemas_are_structural_and_documented() -> None:
    for crd in crds():
        version = crd["spec"]["versions"][0]
        root = version["schema"]["openAPIV3Schema"]
        assert _walk(root) == []
        spec = root["properties"]["spec"]
        undocumented = [k for k, v in spec["properties"].items() if not v.get("description")]
        assert undocumented == []
        assert "status" in version["subresources"]


def test_names_scopes_columns_and_scale() -> None:
    query, pool = crds()
    assert query["spec"]["scope"] == "Namespaced" and query["spec"]["names"]["shortNames"] == ["sq"]
    assert pool["spec"]["scope"] == "Cluster" and pool["spec"]["names"]["shortNames"] == ["sp"]
    columns = [c["name"] for c in query["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Pool", "SLA", "P99", "Attainment", "Executors", "Phase", "Age"]
    scale = pool["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {"specReplicasPath": ".spec.executors", "statusReplicasPath": ".status.executors.current"}
    assert yaml.safe_load_all(crds_yaml())  # parses back
