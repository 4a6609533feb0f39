"""Durations and memory quantities, parsed once where a manifest enters the models.

`Duration` accepts text such as `"500ms"`, `"2s"`, `"1.5m"` or `"1h"` (a bare number is refused, as the
CRD's `type: string` refuses it), keeps the text the user wrote (so manifests round-trip unchanged)
and exposes `.seconds`; `PositiveDuration` is one above zero, in the models and the CRD alike. `Memory` accepts
Kubernetes quantities (`"512Mi"`, `"2Gi"`, `"1G"`) and exposes `.bytes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, GetCoreSchemaHandler, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PATTERN = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h)$"
POSITIVE_DURATION_PATTERN = r"^([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)(ms|s|m|h)$"
"""DURATION_PATTERN without the zeros ('0s', '0.0ms'): what the API server checks for PositiveDuration."""
_DURATION_RE = re.compile(DURATION_PATTERN)

_MEMORY_UNITS = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}
MEMORY_PATTERN = r"^[0-9]+(k|M|G|T|Ki|Mi|Gi|Ti)?$"
_MEMORY_RE = re.compile(r"^([0-9]+)(k|M|G|T|Ki|Mi|Gi|Ti)?$")


class _Quantity:
    """What Duration and Memory share: written as text in manifests, checked by `PATTERN`."""

    __slots__ = ()
    text: str
    PATTERN: ClassVar[str]

    @classmethod
    def parse(cls, value: object) -> Any:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.parse,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda q: q.text),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "pattern": cls.PATTERN}


@dataclass(frozen=True, slots=True)
class Duration(_Quantity):
    """A non-negative duration; `text` is what the manifest said, `seconds` its value."""

    text: str
    seconds: float
    PATTERN: ClassVar[str] = DURATION_PATTERN

    @property
    def ms(self) -> float:
        return self.seconds * 1000.0

    @classmethod
    def parse(cls, value: object) -> Duration:
        if isinstance(value, Duration):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(f"expected a duration with its unit, such as '{value}s' or '500ms', got the bare number {value}")
        if not isinstance(value, str):
            raise ValueError("expected a duration such as '500ms', '2s' or '1m'")
        text = value.strip()
        if text.startswith("-"):
            raise ValueError(f"a duration cannot be negative, got '{value}'")
        match = _DURATION_RE.match(text)
        if not match:
            raise ValueError(
                f"expected a duration such as '500ms', '2s' or '1m' (units ms, s, m, h), got '{value}'"
            )
        unit = match.group(2)
        return cls(text, float(text[: -len(unit)]) * _DURATION_UNITS[unit])


def _above_zero(value: Duration) -> Duration:
    if value.seconds <= 0:
        raise ValueError(f"must be longer than zero, got '{value.text}'")
    return value


PositiveDuration = Annotated[Duration, AfterValidator(_above_zero),
                             WithJsonSchema({"type": "string", "pattern": POSITIVE_DURATION_PATTERN})]


@dataclass(frozen=True, slots=True)
class Memory(_Quantity):
    """A memory size as a Kubernetes quantity; `text` as written, `bytes` its value."""

    text: str
    bytes: int
    PATTERN: ClassVar[str] = MEMORY_PATTERN

    @property
    def mib(self) -> int:
        return self.bytes // 2**20

    @classmethod
    def parse(cls, value: object) -> Memory:
        if isinstance(value, Memory):
            return value
        text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
        match = _MEMORY_RE.match(text)
        if not match:
            raise ValueError(f"expected a memory size such as '512Mi' or '2Gi', got '{value}'")
        return cls(text, int(match.group(1)) * _MEMORY_UNITS[match.group(2) or ""])



CPU_PATTERN = r"^([0-9]+m|[0-9]+(\.[0-9]+)?)$"
_CPU_RE = re.compile(CPU_PATTERN)


@dataclass(frozen=True, slots=True)
class Cpu(_Quantity):
    """A CPU amount as a Kubernetes quantity (`"500m"`, `"1"`, `"0.5"`); `cores` its value."""

    text: str
    cores: float
    PATTERN: ClassVar[str] = CPU_PATTERN

    @classmethod
    def parse(cls, value: object) -> Cpu:
        if isinstance(value, Cpu):
            return value
        text = str(value).strip() if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
        if not _CPU_RE.match(text) or (cores := float(text[:-1]) / 1000 if text.endswith("m") else float(text)) <= 0:
            raise ValueError(f"expected a CPU amount above zero such as '500m' or '1', got '{value}'")
        return cls(text, cores)
