"""A scenario file: StreamingQuery manifests with a load profile each (`sluice bench`, `sluice simulate`).

Pure data and its checks. A scenario names each query's load (events per second, keys, bursts,
an optional trigger) next to the manifest a user would apply; the benchmarks replay it on real
Spark and the what-if commands simulate it. `Burst` is the one shape of a load burst that the load
generator, the simulator and the scenario files share.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .manifest import ManifestErrors, load_query
from .query import KafkaSource, StreamingQuery
from .units import Duration


@dataclass(frozen=True)
class Burst:
    """From `at` seconds for `length` seconds, the rate is multiplied by `factor`."""

    at: float
    length: float
    factor: float

    @classmethod
    def parse(cls, text: str) -> Burst:
        """'30s,10s,10' -> a 10x burst from 30 s for 10 s."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 3:
            raise ValueError(f"--burst {text!r}: write AT,FOR,FACTOR, e.g. 30s,10s,10")
        try:
            at, length = Duration.parse(parts[0]).seconds, Duration.parse(parts[1]).seconds
            factor = float(parts[2])
        except ValueError as error:
            raise ValueError(f"--burst {text!r}: {error}") from None
        if factor <= 0 or length <= 0:
            raise ValueError(f"--burst {text!r}: FOR and FACTOR must be above zero")
        return cls(at, length, factor)


class BurstSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    at: Duration
    length: Duration = Field(alias="for")
    factor: float = Field(gt=0)


class LoadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: float = Field(gt=0, description="events per second")
    trigger: Duration | None = None
    """Overrides spec.trigger.interval."""
    keys: int = Field(default=100, ge=1)
    bursts: list[BurstSpec] = Field(default_factory=list)


class ScenarioQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    critical: bool = False
    """A latency-critical query: the ratios are reported for these."""
    load: LoadSpec
    manifest: dict[str, Any]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    duration: Duration
    warmup: Duration = Duration.parse("15s")
    queries: list[ScenarioQuery] = Field(min_length=1)


class ScenarioError(ValueError):
    pass


def load_scenario(path: Path) -> tuple[Scenario, list[StreamingQuery]]:
    """Read and check a scenario file; every problem is one sentence."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScenarioError(f"{path}: cannot be read ({error.strerror}); check the path.") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: is not valid YAML ({str(error).splitlines()[0]}).") from None
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{path}: {where}: {first['msg']}.") from None
    queries = []
    for i, item in enumerate(scenario.queries):
        try:
            query = load_query(item.manifest)
        except ManifestErrors as errors:
            raise ScenarioError(f"{path}: queries[{i}].manifest: {errors.errors[0].path}: {errors.errors[0].message}") from None
        if not isinstance(query.spec.source, KafkaSource):
            raise ScenarioError(f"{path}: queries[{i}].manifest: spec.source.type must be kafka: the benchmark measures latency from Kafka production time.")
        queries.append(query)
    return scenario, queries
