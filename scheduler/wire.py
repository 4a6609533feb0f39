"""The scheduler's HTTP wire format (pydantic v2): what clients send and what they get back.

Durations are milliseconds (`...Ms`); instants are wall-clock epoch seconds (`...Time`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .core import Completion, Grant
from .policies import BatchRequest, QuerySpec

Name = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Register(Wire):
    latencyTargetMs: float = Field(gt=0)
    weight: float = Field(default=1.0, gt=0)
    windowSizeMs: float | None = Field(default=None, gt=0)
    watermarkDelayMs: float = Field(default=0.0, ge=0)
    reservedSlots: int = Field(default=0, ge=0, le=100_000)
    """Task slots a Real-time query holds while it runs (it submits no batches)."""
    critical: bool = False
    """`spec.sla.critical`: its late batches stay in the most urgent band (`Scheduler._band`)."""

    def spec(self, key: str, tenant: str) -> QuerySpec:
        return QuerySpec(
            key, tenant, self.latencyTargetMs / 1000, self.weight,
            None if self.windowSizeMs is None else self.windowSizeMs / 1000, self.watermarkDelayMs / 1000,
            self.reservedSlots, self.critical,
        )

    @classmethod
    def of(cls, spec: QuerySpec) -> Register:
        return cls(
            latencyTargetMs=spec.latency_target * 1000, weight=spec.weight,
            windowSizeMs=None if spec.window_size is None else spec.window_size * 1000,
            watermarkDelayMs=spec.watermark_delay * 1000, reservedSlots=spec.reserved_slots,
            critical=spec.critical,
        )


class Completed(Wire):
    batchId: int = Field(ge=0)
    durationMs: float = Field(ge=0)
    rows: int = Field(default=0, ge=0)
    tailMs: float | None = Field(default=None, ge=0)
    coordinationMs: float = Field(default=0.0, ge=0)
    latencyMs: float | None = Field(default=None, ge=0)

    def completion(self, query: str) -> Completion:
        return Completion(
            query, self.batchId, self.durationMs / 1000, self.rows,
            None if self.tailMs is None else self.tailMs / 1000,
            self.coordinationMs / 1000, None if self.latencyMs is None else self.latencyMs / 1000,
        )

    @classmethod
    def of(cls, c: Completion) -> Completed:
        return cls(
            batchId=c.batch_id, durationMs=c.seconds * 1000, rows=c.rows,
            tailMs=None if c.tail is None else c.tail * 1000, coordinationMs=c.coordination * 1000,
            latencyMs=None if c.latency is None else c.latency * 1000,
        )


class Dispatch(Wire):
    query: str = Field(min_length=3, max_length=512, pattern=r"^[^/]+/[^/]+$")
    batchId: int = Field(ge=0)
    rows: int = Field(default=0, ge=0)
    oldestEventTime: float | None = None
    windowEnd: float | None = None
    completed: list[Completed] = Field(default_factory=list, max_length=1024)
    """Completions of this query's earlier batches, sent along to save a round trip."""
    waitMs: float = Field(default=30_000, gt=0, le=300_000)
    """How long to hold the request open waiting for a grant."""

    def request(self) -> BatchRequest:
        return BatchRequest(self.query, self.batchId, self.rows, self.oldestEventTime, self.windowEnd)

    @classmethod
    def of(cls, request: BatchRequest, completed: Sequence[Completion], wait: float) -> Dispatch:
        return cls(query=request.query, batchId=request.batch_id, rows=request.rows,
                   oldestEventTime=request.oldest_event, windowEnd=request.window_end,
                   completed=[Completed.of(c) for c in completed], waitMs=wait * 1000)


class Complete(Wire):
    query: str = Field(min_length=3, max_length=512, pattern=r"^[^/]+/[^/]+$")
    completed: list[Completed] = Field(min_length=1, max_length=1024)


class GrantOut(Wire):
    granted: bool
    query: str = ""
    batchId: int = 0
    band: str = ""
    k: int = 1
    deadline: float = 0.0
    slackMs: float = 0.0
    waitedMs: float = 0.0
    aged: bool = False
    released: bool = False
    """No grant will come: the query was unregistered while waiting; run ungated."""

    def to_grant(self) -> Grant:
        return Grant(self.query, self.batchId, self.band, self.k, self.deadline, self.slackMs / 1000,
                     self.waitedMs / 1000, self.aged)

    @classmethod
    def of(cls, g: Grant) -> GrantOut:
        return cls(
            granted=True, query=g.query, batchId=g.batch_id, band=g.band, k=g.k, deadline=g.deadline,
            slackMs=g.slack * 1000, waitedMs=g.waited * 1000, aged=g.aged,
        )
