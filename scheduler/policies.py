"""Dispatch policies: each turns a pending batch into a sort key once, when the batch arrives.

A policy is one small class. `key` returns (priority, start deadline): lower priority is served
first; the start deadline is the latest time the batch may start and still meet its SLA, and sets
its FAIR band. Keys are fixed at submit time so a dispatch decision is a heap pop, whatever the
number of registered queries; starvation is handled by aging in the core, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from sluice.api.constants import POLICIES


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """What the scheduler knows of a query: tenant, SLA and the semantics that set its frontier."""

    key: str
    tenant: str
    latency_target: float
    """L, seconds."""
    weight: float = 1.0
    """Tenant weight under `fair`."""
    window_size: float | None = None
    """Event-time window length in seconds for windowed aggregations; None for stateless pipelines."""
    watermark_delay: float = 0.0
    """Allowed lateness in seconds: a window closes when the watermark passes its end."""
    reserved_slots: int = 0
    """Task slots the query holds for as long as it runs (a Real-time query: it submits no
    batches; its slots come out of the capacity the micro-batch queries share)."""
    critical: bool = False
    """Latency-critical (`spec.sla.critical`): its late batches keep the most urgent band, where
    another query's batch late by more than its SLA leaves the urgent bands (`Scheduler._band`)."""


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """A micro-batch waiting to run. Times are wall-clock seconds (epoch)."""

    query: str
    batch_id: int
    rows: int = 0
    oldest_event: float | None = None
    """Production time of the batch's oldest event, if known."""
    window_end: float | None = None
    """End (event time) of the earliest window the batch feeds, if the runtime knows it."""


def frontier(spec: QuerySpec, batch: BatchRequest, arrived: float) -> float:
    """t_MF: the wall-clock time at which the batch's output becomes due.

    Stateless: the oldest event's production time (or the batch's arrival when unknown).
    Windowed: the time the earliest window the batch feeds can close under the watermark
    (window end + watermark delay); data for a window that cannot emit yet is not urgent.
    """
    return frontier_at(spec, batch.oldest_event, batch.window_end, arrived)


def frontier_at(spec: QuerySpec, oldest_event: float | None, window_end: float | None, arrived: float) -> float:
    """`frontier` from a batch's oldest event and earliest window end (no `BatchRequest` to build:
    the core asks it for every predicted arrival)."""
    oldest = oldest_event if oldest_event is not None else arrived
    if spec.window_size is None:
        return oldest
    end = window_end
    if end is None:
        size = spec.window_size
        end = (oldest // size) * size + size
    return max(end + spec.watermark_delay, oldest)


class Policy(Protocol):
    name: ClassVar[str]
    uses_bands: ClassVar[bool]

    def key(self, spec: QuerySpec, oldest_event: float | None, due: float, cost: float, path: float,
            now: float) -> tuple[float, float]:
        """(priority, start deadline) of a batch arriving at `now`: `oldest_event` its oldest event's
        production time if known, `due` its t_MF + L (`frontier`),
        `cost` its C_M and `path` its C_path (the core's cost model: computed once, by the core)."""
        ...

    def granted(self, spec: QuerySpec, priority: float, cost: float) -> None:
        """Called when a batch of `spec` with `priority` and estimated `cost` is granted."""
        ...

    def forget(self, key: str) -> None:
        ...


class _Stateless:
    uses_bands: ClassVar[bool] = True

    def granted(self, spec: QuerySpec, priority: float, cost: float) -> None:
        return None

    def forget(self, key: str) -> None:
        return None


class Fifo(_Stateless):
    """Arrival order, one band: what Spark does without Sluice."""

    name: ClassVar[str] = "fifo"
    uses_bands: ClassVar[bool] = False

    def key(self, spec: QuerySpec, oldest_event: float | None, due: float, cost: float, path: float,
            now: float) -> tuple[float, float]:
        return now, due - (cost + path)


class Edf(_Stateless):
    """Earliest deadline first on the plain deadline t + L (t: oldest event, else arrival)."""

    name: ClassVar[str] = "edf"

    def key(self, spec: QuerySpec, oldest_event: float | None, due: float, cost: float, path: float,
            now: float) -> tuple[float, float]:
        t = oldest_event if oldest_event is not None else now
        deadline = t + spec.latency_target
        return deadline, deadline


class Cameo(_Stateless):
    """Cameo's start deadline: ddl = t_MF + L - C_M - C_path."""

    name: ClassVar[str] = "cameo"

    def key(self, spec: QuerySpec, oldest_event: float | None, due: float, cost: float, path: float,
            now: float) -> tuple[float, float]:
        start_deadline = due - (cost + path)
        return start_deadline, start_deadline


class Fair:
    """Weighted fair share per tenant (start-time fair queueing): no tenant starves.

    Each tenant has a finish tag; a batch's priority is max(virtual time, tenant's finish tag) and
    the tenant's tag then advances by the batch's estimated cost divided by the tenant's weight.
    """

    name: ClassVar[str] = "fair"
    uses_bands: ClassVar[bool] = False

    def __init__(self) -> None:
        self.virtual = 0.0
        self.finish: dict[str, float] = {}

    def key(self, spec: QuerySpec, oldest_event: float | None, due: float, cost: float, path: float,
            now: float) -> tuple[float, float]:
        start = max(self.virtual, self.finish.get(spec.tenant, 0.0))
        self.finish[spec.tenant] = start + cost / spec.weight
        return start, due - (cost + path)

    def granted(self, spec: QuerySpec, priority: float, cost: float) -> None:
        self.virtual = max(self.virtual, priority)

    def forget(self, key: str) -> None:
        return None


IMPLEMENTATIONS: dict[str, type[Fifo] | type[Fair] | type[Edf] | type[Cameo]] = {
    p.name: p for p in (Fifo, Fair, Edf, Cameo)
}
"""The class behind each name of `sluice.api.constants.POLICIES` (a test keeps the two equal)."""


def make_policy(name: str) -> Policy:
    try:
        return IMPLEMENTATIONS[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICIES)}") from None
