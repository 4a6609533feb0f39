"""Reading manifests: YAML text in, models or one-sentence errors out (never a traceback)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from .common import SHOWN, shown
from .constants import API_VERSION
from .expressions import ExpressionError
from .pool import StreamingPool
from .query import PipelineError, StreamingQuery

Resource = StreamingQuery | StreamingPool
KINDS: dict[str, type[StreamingQuery] | type[StreamingPool]] = {
    "StreamingQuery": StreamingQuery,
    "StreamingPool": StreamingPool,
}


@dataclass(frozen=True)
class ManifestError:
    """One problem in one document: where it is and a sentence saying what to do."""

    source: str
    """File name (or '<stdin>') and document number, e.g. 'q.yaml#2'."""
    path: str
    """Field path, e.g. 'spec.pipeline[1].filter'; empty for the whole document."""
    message: str
    semantic: bool = False
    """Found by what no CRD schema can check (an expression parsed, a column looked up in the rows,
    a DDL schema read): the API server accepts such a manifest and the operator refuses it."""

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}: " if self.path else f"{self.source}: "
        return where + self.message


@dataclass(frozen=True)
class Parsed:
    source: str
    resource: Resource


class ManifestErrors(Exception):
    def __init__(self, errors: Sequence[ManifestError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = list(errors)


def _path(loc: Sequence[int | str], document: Any) -> str:
    """Render a pydantic location as a field path, keeping only keys present in the input.

    Union tags (e.g. 'kafka' for a source of type kafka) and validator names are not fields, so
    they are dropped by walking the document alongside the location.
    """
    out = ""
    node = document
    for part in loc:
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out += f"[{part}]"
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part in node:
            out += ("." if out else "") + part
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str):
            if part == node.get("type") or "[" in part:
                continue  # a union tag or a validator's name, not a field
            out += ("." if out else "") + part  # a missing field: name it
            node = None
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "...'"


def _shorten_quotes(text: str) -> str:
    return re.sub("'([^'\\n]{" + str(SHOWN) + "})[^'\\n]{4,}'", lambda m: f"'{m.group(1)}...'", text)


def _sentence(text: str) -> str:
    text = shown(text.strip(), limit=1 << 30)  # one line; quoted values are shortened below
    text = _shorten_quotes(text)
    if text.startswith("Value error, "):
        text = text[len("Value error, "):]
    if text.startswith("Input should be "):
        text = "must be " + text[len("Input should be "):]
    elif len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text if text.endswith(".") else text + "."


def _describe(error: Any, document: Any) -> tuple[str, str]:
    """One pydantic error → (field path, sentence)."""
    loc = list(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, PipelineError):
        loc += ["source", "schema"] if cause.index < 0 else ["pipeline", cause.index, cause.kind]
        return _path(loc, document), _sentence(str(cause))
    if isinstance(cause, ExpressionError):
        return _path(loc, document), _sentence(str(cause))
    path = _path(loc, document)
    given = error.get("input")
    if kind == "missing":
        return path, "is required but missing; add it."
    if kind == "too_short":
        return path, f"needs at least {ctx.get('min_length')} item(s), has {ctx.get('actual_length')}; add one."
    if kind == "extra_forbidden":
        return path, "is not a known field; remove it or fix its spelling."
    if kind in ("literal_error", "enum"):
        return path, f"must be {ctx.get('expected')}, got {_shown(given)}."
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        expected = ctx.get("expected_tags")
        return path + ".type" if path else "type", f"must be one of {expected}, got {_shown(tag)}."
    if kind == "union_tag_not_found":
        return path + ".type" if path else "type", f"is required; set it to one of the {path.rsplit('.', 1)[-1]} types."
    if kind == "string_pattern_mismatch" and "a-z0-9" in str(ctx.get("pattern", "")):
        return path, (
            f"must be a lowercase DNS name (letters, digits and '-', at most 63 characters), got {_shown(given)}."
        )
    message = _sentence(error["msg"])
    if kind not in ("value_error", "assertion_error") and given is not None and not isinstance(given, dict | list):
        message = message[:-1] + f", got {_shown(given)}."
    return path, message


def parse_document(document: Any, source: str) -> Resource:
    """Validate one parsed YAML document; raises ManifestErrors with one sentence per problem."""
    if not isinstance(document, dict):
        raise ManifestErrors([ManifestError(source, "", "a manifest must be a mapping with apiVersion, kind, metadata and spec.")])
    api_version = document.get("apiVersion")
    if api_version != API_VERSION:
        raise ManifestErrors([ManifestError(source, "apiVersion", f"must be {API_VERSION!r}, got {_shown(api_version)}.")])
    kind = document.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ManifestErrors([ManifestError(source, "kind", f"must be 'StreamingQuery' or 'StreamingPool', got {_shown(kind)}.")])
    try:
        return model.model_validate(document)
    except ValidationError as error:
        seen: set[tuple[str, str]] = set()
        problems = []
        for item in error.errors():
            described = _describe(item, document)
            if described not in seen:
                seen.add(described)
                cause = (item.get("ctx") or {}).get("error")
                problems.append(ManifestError(source, *described, isinstance(cause, PipelineError | ExpressionError)))
        raise ManifestErrors(problems) from None



def load_documents(text: str, name: str) -> Iterator[tuple[str, Any]]:
    """Split multi-document YAML; yields (source label, document). Raises ManifestErrors on bad YAML."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "could not be parsed"
        raise ManifestErrors([ManifestError(name, "", f"is not valid YAML{where}: {problem}.")]) from None
    numbered = [d for d in documents if d is not None]
    for i, document in enumerate(numbered, start=1):
        yield (f"{name}#{i}" if len(numbered) > 1 else name), document


def parse_text(text: str, name: str = "<input>") -> tuple[list[Parsed], list[ManifestError]]:
    """Parse every document of a YAML text; returns what validated and every error found."""
    parsed: list[Parsed] = []
    errors: list[ManifestError] = []
    try:
        documents = list(load_documents(text, name))
    except ManifestErrors as error:
        return [], error.errors
    if not documents:
        return [], [ManifestError(name, "", "holds no manifest; write a StreamingQuery or StreamingPool.")]
    for source, document in documents:
        try:
            parsed.append(Parsed(source, parse_document(document, source)))
        except ManifestErrors as error:
            errors.extend(error.errors)
    return parsed, errors


def load_query(document: dict[str, Any]) -> StreamingQuery:
    """Validate one StreamingQuery document (e.g. a body from the API server)."""
    resource = parse_document(document, "StreamingQuery")
    if not isinstance(resource, StreamingQuery):
        raise ManifestErrors([ManifestError("StreamingQuery", "kind", "must be 'StreamingQuery'.")])
    return resource
