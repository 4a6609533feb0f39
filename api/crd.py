"""CustomResourceDefinitions generated from the models: the models are the one source of truth.

Pydantic's JSON Schema is turned into a Kubernetes *structural* OpenAPI v3 schema: references are
inlined, `Optional[X]` becomes `X`, a tagged union becomes one object holding every variant's
properties (the tag an enum) plus CEL rules for each variant's required fields, JSON-Schema
`exclusiveMinimum: n` becomes OpenAPI 3.0's `minimum: n, exclusiveMinimum: true`, and field
docstrings become descriptions. A spec field's pydantic default becomes its schema `default:`,
so `kubectl get -o yaml` shows what will run; variants of a union carry none (the apiserver would
default one variant's fields into another's), nor does status. Every integer field of a spec carries
one CEL rule so that the API server, like the models, refuses a whole number written as a float
(`4.0`): its integer type alone lets one through.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from .constants import GROUP, POOLS, QUERIES, VERSION
from .pool import StreamingPoolSpec, StreamingPoolStatus
from .query import StreamingQuerySpec, StreamingQueryStatus
from .units import Duration, Memory

Schema = dict[str, Any]

_KEEP = {
    "type", "description", "properties", "required", "items", "enum", "pattern", "format",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "maxProperties",
    "x-kubernetes-validations", "x-kubernetes-preserve-unknown-fields",
}


def _resolve(schema: Schema, defs: dict[str, Schema]) -> Schema:
    if "$ref" in schema:
        target = copy.deepcopy(defs[schema["$ref"].rsplit("/", 1)[-1]])
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        target.update(extra)
        return target
    return schema


def structural(schema: Schema, defs: dict[str, Schema], defaults: bool = False) -> Schema:
    """Convert one pydantic JSON-Schema node into a structural OpenAPI v3 node (with its
    `default:`s when `defaults`)."""
    schema = _resolve(schema, defs)
    description = schema.get("description")

    variants = schema.get("oneOf") or schema.get("anyOf")
    if variants:
        non_null = [v for v in variants if v.get("type") != "null"]
        if len(non_null) == 1:
            inner = structural(non_null[0], defs, defaults)
            if defaults and schema.get("default") is not None:
                inner["default"] = schema["default"]
        else:
            inner = _merge_union(non_null, schema.get("discriminator"), defs)
        if description:
            inner["description"] = description
        return inner

    out: Schema = {}
    for key, value in schema.items():
        if key == "properties":
            out["properties"] = {name: structural(sub, defs, defaults) for name, sub in value.items()}
        elif key == "items":
            out["items"] = structural(value, defs, defaults)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out["additionalProperties"] = structural(value, defs, defaults)
        elif key == "patternProperties":
            # structural schemas have no patternProperties: a map of values, keys checked by CEL
            ((pattern, sub),) = value.items()
            out["additionalProperties"] = structural(sub, defs, defaults)
            out["x-kubernetes-validations"] = [
                {"rule": f"self.all(k, k.matches('{pattern}'))", "message": f"keys must match {pattern}"}
            ]
        elif key == "default":
            if defaults and value is not None:
                out["default"] = value
        elif key == "exclusiveMinimum":
            out["minimum"] = value
            out["exclusiveMinimum"] = True
        elif key == "exclusiveMaximum":
            out["maximum"] = value
            out["exclusiveMaximum"] = True
        elif key == "const":
            out["enum"] = [value]
            out.setdefault("type", "string")
        elif key in _KEEP:
            out[key] = value
    if "properties" in out:
        out["type"] = "object"
    return out


def _merge_union(variants: list[Schema], discriminator: Any, defs: dict[str, Schema]) -> Schema:
    """A tagged union as one object: all variants' properties, tag as enum, CEL rules per variant."""
    tag = discriminator["propertyName"] if isinstance(discriminator, dict) else "type"
    merged: Schema = {"type": "object", "properties": {}, "required": [tag]}
    tags: list[str] = []
    rules: list[dict[str, str]] = []
    for raw in variants:
        variant = structural(raw, defs)
        value = variant["properties"][tag]["enum"][0]
        tags.append(value)
        for name, prop in variant["properties"].items():
            if name != tag:
                merged["properties"].setdefault(name, prop)
        required = [r for r in variant.get("required", []) if r != tag]
        if required:
            has = " && ".join(f"has(self.{r})" for r in required)
            rules.append(
                {"rule": f"self.{tag} != '{value}' || ({has})",
                 "message": f"{tag} {value} requires {', '.join(required)}"}
            )
    merged["properties"][tag] = {"type": "string", "enum": tags, "description": "Which kind; its fields sit beside it."}
    if rules:
        merged["x-kubernetes-validations"] = rules
    return merged


_WHOLE_NUMBER = {"rule": "type(self) == int", "message": "must be a whole number written without a decimal point"}


def whole_numbers(schema: Schema) -> Schema:
    """`schema` with `_WHOLE_NUMBER` first among the rules of every integer node: the API server
    accepts `4.0` for `type: integer` and its CEL then reads a float, so the rule refuses it."""
    out = copy.deepcopy(schema)
    nodes = [out]
    while nodes:
        node = nodes.pop()
        if node.get("type") == "integer":
            node["x-kubernetes-validations"] = [dict(_WHOLE_NUMBER), *node.get("x-kubernetes-validations", [])]
        nodes.extend(node.get("properties", {}).values())
        nodes.extend(v for k, v in node.items() if k in ("items", "additionalProperties") and isinstance(v, dict))
    return out


class _Generator(GenerateJsonSchema):
    def encode_default(self, dft: Any) -> Any:
        """Durations and sizes default to their text, as manifests write them ('1Gi', '0s')."""
        return dft.text if isinstance(dft, Duration | Memory) else super().encode_default(dft)


def object_schema(model: type[BaseModel], defaults: bool = False) -> Schema:
    full = model.model_json_schema(mode="validation", by_alias=True, schema_generator=_Generator)
    defs = full.pop("$defs", {})
    return structural(full, defs, defaults)


def _crd(
    *, kind: str, plural: str, short: str, scope: str, spec: type[BaseModel], status: type[BaseModel],
    description: str, columns: list[dict[str, Any]], scale: bool,
) -> dict[str, Any]:
    spec_schema = whole_numbers(object_schema(spec, defaults=True))
    status_schema = object_schema(status)
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.executors",
            "statusReplicasPath": ".status.executors.current",
            "labelSelectorPath": ".status.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind, "listKind": f"{kind}List", "plural": plural,
                "singular": kind.lower(), "shortNames": [short], "categories": ["sluice"],
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def _status_columns() -> list[dict[str, Any]]:
    """The printer columns both resources end with."""
    return [
        {"name": "P99", "type": "string", "jsonPath": ".status.latency.p99", "description": "p99 latency"},
        {"name": "Attainment", "type": "string", "jsonPath": ".status.attainment",
         "description": "share of rows within the latency target"},
        {"name": "Executors", "type": "integer", "jsonPath": ".status.executors.current"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status",
         "description": "the Ready condition (kubectl wait --for=condition=Ready)"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Bottleneck", "type": "string", "jsonPath": ".status.bottleneck", "priority": 1,
         "description": "what leads recent batches' critical path"},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    ]


def crds() -> list[dict[str, Any]]:
    """Both CRDs as Python objects."""
    query = _crd(
        kind="StreamingQuery", plural=QUERIES, short="sq", scope="Namespaced",
        spec=StreamingQuerySpec, status=StreamingQueryStatus,
        description="A tenant's Spark Structured Streaming query with a latency SLA; the namespace is the tenant.",
        columns=[
            {"name": "Pool", "type": "string", "jsonPath": ".spec.pool"},
            {"name": "SLA", "type": "string", "jsonPath": ".spec.sla.latencyTarget"},
            *_status_columns(),
        ],
        scale=False,
    )
    pool = _crd(
        kind="StreamingPool", plural=POOLS, short="sp", scope="Cluster",
        spec=StreamingPoolSpec, status=StreamingPoolStatus,
        description="A shared Spark runtime (cluster-scoped) that hosts many tenants' streaming queries.",
        columns=[
            {"name": "Policy", "type": "string", "jsonPath": ".spec.policy"},
            {"name": "Queries", "type": "integer", "jsonPath": ".status.queries"},
            *_status_columns(),
        ],
        scale=True,
    )
    return [query, pool]


def crds_yaml() -> str:
    """Both CRDs as one multi-document YAML text: what `sluice crds` prints and crds/ holds."""
    header = "# Generated by `sluice crds` from the pydantic models in api/; do not edit.\n"
    return header + "---\n".join(yaml.safe_dump(c, sort_keys=False, width=120) for c in crds())
