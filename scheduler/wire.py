"""The scheduler sidecar's wire models (`sluice.api.wire`) to and from the core's types.

Durations are milliseconds on the wire and seconds in the core.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.api.wire import Completed, Dispatch, GrantOut, Register

from .core import Completion, Grant
from .policies import BatchRequest, QuerySpec


def register_of(spec: QuerySpec) -> Register:
    return Register(
        latencyTargetMs=spec.latency_target * 1000, weight=spec.weight,
        windowSizeMs=None if spec.window_size is None else spec.window_size * 1000,
        watermarkDelayMs=spec.watermark_delay * 1000, reservedSlots=spec.reserved_slots,
        critical=spec.critical,
    )


def spec_of(body: Register, key: str, tenant: str) -> QuerySpec:
    return QuerySpec(
        key, tenant, body.latencyTargetMs / 1000, body.weight,
        None if body.windowSizeMs is None else body.windowSizeMs / 1000, body.watermarkDelayMs / 1000,
        body.reservedSlots, body.critical,
    )


def completed_of(c: Completion) -> Completed:
    return Completed(
        batchId=c.batch_id, durationMs=c.seconds * 1000, rows=c.rows,
        tailMs=None if c.tail is None else c.tail * 1000, coordinationMs=c.coordination * 1000,
        latencyMs=None if c.latency is None else c.latency * 1000, endsGroup=c.ends_group,
    )


def completion_of(body: Completed, query: str) -> Completion:
    return Completion(
        query, body.batchId, body.durationMs / 1000, body.rows,
        None if body.tailMs is None else body.tailMs / 1000,
        body.coordinationMs / 1000, None if body.latencyMs is None else body.latencyMs / 1000, body.endsGroup,
    )


def dispatch_of(request: BatchRequest, completed: Sequence[Completion], wait: float) -> Dispatch:
    return Dispatch(query=request.query, batchId=request.batch_id, rows=request.rows,
                    oldestEventTime=request.oldest_event, windowEnd=request.window_end,
                    completed=[completed_of(c) for c in completed], waitMs=wait * 1000)


def request_of(body: Dispatch) -> BatchRequest:
    return BatchRequest(body.query, body.batchId, body.rows, body.oldestEventTime, body.windowEnd)


def grant_out_of(g: Grant) -> GrantOut:
    return GrantOut(
        granted=True, query=g.query, batchId=g.batch_id, band=g.band, k=g.k, deadline=g.deadline,
        slackMs=g.slack * 1000, waitedMs=g.waited * 1000, aged=g.aged,
    )


def grant_of(body: GrantOut) -> Grant:
    return Grant(body.query, body.batchId, body.band, body.k, body.deadline, body.slackMs / 1000,
                 body.waitedMs / 1000, body.aged)
