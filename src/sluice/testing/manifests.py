"""Hostile manifests for fuzzing: the examples, mutated at one path each (a bad value, a deleted
field, an unknown field), as a Hypothesis strategy."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

HOSTILE: list[Any] = [
    None, True, False, 0, -1, 1, 0.0, 1.0, 2**63, -(2**63), 1.5, 1.5e308, float("inf"), "", " ", "x" * 5000, "1h" * 200,
    "-5s", "0s", "25h", "1e400", "NaN", "true", "01", "Ünïcödé", "a\nb", "${HOME}", "../../etc/passwd", "/",
    [], [None], {}, {"x": 1}, "1000000000000000000000000000000", "1Ti", "2Ti", "100Mi", "value > 1",
    "reflect('java.lang.Runtime', 'exec', 'id')", "java_method('java.lang.System', 'exit', 0)",
    "x -- comment", "/* c */ value", "transform(array(1), x -> x)",
]


def documents() -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in EXAMPLES]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def mutate(document: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> dict[str, Any]:
    """A copy of `document` with the node at `path` replaced by `value`, deleted, or given an unknown sibling."""
    doc = copy.deepcopy(document)
    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "delete":
        del parent[last]
    elif isinstance(parent, dict):  # "unknown": a field no model has, beside this one
        parent["unknownField"] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """(a mutated example, what was done to it)."""
    document = draw(st.sampled_from(documents()))
    path = draw(st.sampled_from(_paths(document)))
    how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "unknown"]))
    value = draw(st.one_of(st.sampled_from(HOSTILE), st.integers(), st.floats(allow_nan=True), st.text(max_size=30)))
    return mutate(document, path, how, value), f"{how} {'.'.join(map(str, path))} = {value!r:.60}"


def every_mutation() -> list[tuple[dict[str, Any], str]]:
    """Each example mutated at each path in every HOSTILE way (deleted, each hostile value, an
    unknown sibling), apiVersion and kind left alone: the exhaustive set beside `mutated()`'s draws."""
    out = []
    for document in documents():
        for path in _paths(document):
            if path[0] in ("apiVersion", "kind"):
                continue
            for how, value in [("delete", None), *(("replace", v) for v in HOSTILE), ("unknown", 1)]:
                out.append((mutate(document, path, how, value), f"{document['metadata']['name']}: {how} "
                            f"{'.'.join(map(str, path))} = {value!r:.60}"))
    return out
