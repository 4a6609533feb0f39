"""Status, written through the api's status models: the one place the operator names a status key.

Handlers build a `StreamingQueryStatus` or `StreamingPoolStatus` with the fields they own and
`write` puts the fields that were set (not the models' defaults) into kopf's status patch, so a
field that is not in the model cannot be written and a value of the wrong type fails here, not at
the API server. `query_status` is the one mapping from the runtime's `QueryStatus` (the control
API's) to the CRD's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from sluice.api.common import CommonStatus, LatencyStatus
from sluice.api.query import StreamingQueryStatus
from sluice.api.wire import QueryStatus

from .admission import set_condition
from .display import latency_text, percent_text


def write(patch: kopf.Patch, status: CommonStatus, current: Mapping[str, Any] | None = None,
          cleared: Iterable[str] = ()) -> None:
    """The fields set on `status` into `patch.status`; with `current` (the object's status now), only
    those that differ, so a status that did not move costs no write. `cleared`: dotted paths that a
    merge patch must remove (null), such as `message` or `state.placement.<executor>`."""
    fields = status.model_dump(mode="json", exclude_unset=True)
    for path in cleared:
        head, *rest = path.split(".")
        if not rest:
            fields[head] = None
            continue
        node = fields.setdefault(head, {})
        for part in rest[:-1]:
            node = node.setdefault(part, {})
        node[rest[-1]] = None
    for key, value in fields.items():
        if current is None or current.get(key) != value:
            patch.status[key] = value


def query_status(status: QueryStatus, conditions: list[dict[str, Any]], message: str
                 ) -> tuple[StreamingQueryStatus, list[str]]:
    """A StreamingQuery's status from its runtime's `QueryStatus` (the status timer's figures), and
    the fields to clear (an interval that no longer applies: Real-time Mode has none)."""
    out = StreamingQueryStatus.model_validate({
        "phase": status.phase, "message": message, "conditions": conditions,
        "inputRate": round(status.input_rate, 2), "processingRate": round(status.processing_rate, 2),
        "batches": status.batches, "rows": status.rows, "schedulerMode": status.scheduler,
        "bottleneck": status.bottleneck, "batchIntervalMs": status.interval_ms,
        "batchIntervalReason": status.interval_reason, "execution": status.execution,
        "executionReason": status.execution_reason, "reservedSlots": status.reserved_slots,
        "kafkaLag": status.kafka_lag,
        "producerRate": None if status.producer_rate is None else round(status.producer_rate, 2),
    })
    if status.p50_ms is not None and status.p99_ms is not None:
        out.latency = LatencyStatus(p50Ms=status.p50_ms, p99Ms=status.p99_ms, p99=latency_text(status.p99_ms))
    if status.attainment is not None:
        out.slaAttainment = round(status.attainment, 4)
        out.attainment = percent_text(status.attainment)
    return out, ["batchIntervalMs"] if status.interval_ms is None else []


STALLED_REASONS = frozenset({"InvalidSpec", "Rejected", "Failed", "NamespaceNotAllowed", "QuotaExceeded",
                             "FilesOutsideRoot", "DriverFull", "TaskSlotsReserved"})
"""Reasons that wait for a person (a spec, a quota or a pool to change): kstatus reads them as Failed
(`Stalled=True`), so a GitOps pipeline fails at once instead of waiting for its timeout. The other
reasons a query or pool is not Ready (a runtime starting, a registration, a pool not yet created, a
source not yet reachable) resolve themselves: `Reconciling=True`, kstatus' InProgress."""


def health(conditions: list[dict[str, Any]], phase: str, reason: str, message: str, now: str,
           generation: int | None, ready_message: str = "") -> list[dict[str, Any]]:
    """`Ready`, `Stalled` and `Reconciling` for a phase and the reason behind it (pure; `now` passed
    in), as kstatus (sigs.k8s.io/cli-utils, what Flux and kpt use) reads them: Running and
    Suspended are Current (Ready), a stalled reason or a Failed phase is Failed (Stalled), anything
    else is InProgress (Reconciling)."""
    done = phase in ("Running", "Suspended")
    stalled = not done and (phase == "Failed" or reason in STALLED_REASONS)
    text = message or f"the object is {phase}."
    out = set_condition(conditions, "Ready", done, phase if done else reason,
                        (ready_message or text) if done else text, now, generation)
    out = set_condition(out, "Stalled", stalled, reason if stalled else "NotStalled",
                        text if stalled else "nothing waits for a person.", now, generation)
    return set_condition(out, "Reconciling", not done and not stalled, reason if not (done or stalled) else "Settled",
                         text if not (done or stalled) else "nothing in progress.", now, generation)
