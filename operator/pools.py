"""kopf handlers for StreamingPools: each becomes a runtime (owned objects) whose executors it sizes.

Thin: read what is there, build (pure builders), apply idempotently, decide the executor target
(pure `scaling.plan`), realize it through the runtime client, and write status through the status
subresource.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

import kopf

from sluice.api.common import ExecutorsStatus, ScalingDecision
from sluice.api.constants import API_VERSION, GROUP, POOLS, VERSION
from sluice.api.manifest import ManifestErrors, parse_document
from sluice.api.pool import StateMigration, StreamingPool, StreamingPoolStatus
from sluice.api.wire import QueryStatus

from . import kube, metrics, scaling, settings, status
from .admission import is_admitted, set_condition
from .builders import executor_selector, pool_objects, runtime_url
from .runtime_client import RuntimeClient, RuntimeRefused, RuntimeUnreachable, healthy
from .timefmt import now_rfc3339

log = logging.getLogger("sluice.operator")
OVERLOADED = "Overloaded: "
"""How an overload's sentence starts in a pool's status.message (cleared when the overload ends)."""


def pool_model(body: Any) -> StreamingPool:
    """The pool as its model; a PermanentError with one sentence per problem, naming the field, if it is not valid."""
    document = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body}
    try:
        resource = parse_document({"apiVersion": API_VERSION, "kind": "StreamingPool", **document}, "StreamingPool")
    except ManifestErrors as errors:
        raise kopf.PermanentError(" ".join(f"{e.path}: {e.message}" for e in errors.errors)) from None
    assert isinstance(resource, StreamingPool)
    return resource


@kopf.on.resume(GROUP, VERSION, POOLS)
@kopf.on.create(GROUP, VERSION, POOLS)
@kopf.on.update(GROUP, VERSION, POOLS)
async def reconcile_pool(body: kopf.Body, name: str, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    started = time.perf_counter()
    namespace = settings.current().namespace
    with metrics.reconcile("StreamingPool"):
        try:
            model = pool_model(body)
        except kopf.PermanentError as invalid:  # the spec: a person must fix it
            generation = meta.get("generation")
            status.write(patch, StreamingPoolStatus.model_validate({
                "phase": "Failed", "message": str(invalid), "observedGeneration": generation,
                "conditions": status.health(list((body.get("status") or {}).get("conditions") or []), "Failed",
                                            "InvalidSpec", str(invalid), now_rfc3339(), generation)}))
            raise
        token = await asyncio.to_thread(kube.read_token, name) or secrets.token_urlsafe(32)
        objects = pool_objects(dict(body), model, namespace, token)
        await asyncio.to_thread(kube.apply, objects)
        url = runtime_url(dict(body), namespace)
        up = await healthy(url)
        conditions = _ready(list((body.get("status") or {}).get("conditions") or []), up, url, meta.get("generation"))
        if up:
            conditions = await _scale(body, name, model, RuntimeClient(url, token), conditions, meta.get("generation"), patch)
        status.write(patch, StreamingPoolStatus.model_validate({
            "phase": "Running" if up else "Pending", "conditions": conditions, "observedGeneration": meta.get("generation"),
            "policy": model.spec.policy, "selector": executor_selector(name)}))
        kopf.info(body, reason="Reconciled", message=f"runtime objects applied in {namespace} ({len(objects)} objects).")
    log.info("pool %s reconciled in %.2fs", name, time.perf_counter() - started)


@kopf.timer(GROUP, VERSION, POOLS, interval=settings.current().pool_sync_interval, initial_delay=5)
async def sync_pool(body: kopf.Body, name: str, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    url = runtime_url(dict(body), settings.current().namespace)
    up = await healthy(url)
    hosted = [q for q in await asyncio.to_thread(kube.list_queries) if q["spec"].get("pool") == name and is_admitted(q)]
    # Ready follows the runtime, not only the last reconcile (a pool created before its runtime is up)
    conditions = _ready(list((body.get("status") or {}).get("conditions") or []), up, url, meta.get("generation"))
    token = await asyncio.to_thread(kube.read_token, name)
    if up and token:
        conditions = await _scale(body, name, pool_model(body), RuntimeClient(url, token), conditions,
                                  meta.get("generation"), patch)
    status.write(patch, StreamingPoolStatus.model_validate({
        "phase": "Running" if up else "Pending", "queries": len(hosted), "conditions": conditions,
        "observedGeneration": meta.get("generation")}))


def _ready(conditions: list[dict[str, Any]], up: bool, url: str, generation: int | None) -> list[dict[str, Any]]:
    """The pool's Ready, Stalled and Reconciling conditions (kstatus): Ready once its runtime answers,
    Reconciling while it starts."""
    return status.health(conditions, "Running" if up else "Pending", "RuntimeReady" if up else "RuntimeStarting",
                         f"the runtime answers at {url}." if up else f"waiting for the runtime at {url}.",
                         now_rfc3339(), generation)


async def _plan(body: kopf.Body, model: StreamingPool, runtime: RuntimeClient, patch: kopf.Patch,
                generation: int | None) -> scaling.Plan:
    """The executor target (spec.executors, else DS2 on the runtime's measurements); records DS2's
    recommendation and memory in status, and a change as the last scaling decision."""
    current_status = body.get("status") or {}
    current = int((current_status.get("executors") or {}).get("target") or model.spec.minExecutors)
    try:
        queries: dict[str, QueryStatus] | None = await runtime.queries()
    except RuntimeRefused:
        queries = None
    try:
        executors = await runtime.executors()
    except (RuntimeRefused, RuntimeUnreachable):  # a local-mode runtime has no executors to move state between
        executors = None
    moving = executors is not None and executors.pendingMoves > 0
    if executors is not None and executors.urgentLane:
        status.write(patch, StreamingPoolStatus(urgentLane=executors.urgentLane, priority=executors.priority))
    if executors is not None and executors.placement:
        placement: dict[str, int] = {}
        for per_query in executors.placement.values():
            for executor, units in per_query.items():
                placement[executor] = (placement.get(executor) or 0) + units
        gone = set((current_status.get("state") or {}).get("placement") or {}) - set(placement)
        # a merge patch keeps a map's old keys unless each is nulled
        status.write(patch, StreamingPoolStatus(state=StateMigration(
            placement=placement, pendingMoves=executors.pendingMoves, moves=executors.stateMoves,
            movedBytes=executors.stateMovedBytes)), cleared=[f"state.placement.{executor}" for executor in sorted(gone)])
    began = time.perf_counter()
    sla = await asyncio.to_thread(scaling.sla_count, model, queries)
    sizing_ms = None if sla is None else round((time.perf_counter() - began) * 1000)
    chosen = scaling.plan(model, current, queries, time.time(), scaling.memory(current_status), generation or 0, moving, sla)
    auto: dict[str, Any] = {"mode": model.spec.autoscaling.mode, "recommendation": None, "slaSizingMs": sizing_ms}
    if chosen.recommendation is not None:
        auto["recommendation"] = {"executors": chosen.recommendation.target, "reason": chosen.recommendation.reason,
                                  "time": now_rfc3339(),
                                  "microBatchSlots": scaling.micro_batch_slots(chosen.recommendation, model),
                                  "bound": chosen.recommendation.bound,
                                  "slaExecutors": None if sla is None else sla.executors}
        found = chosen.recommendation.ineffective_found
        if found is not None:
            kopf.warn(body, reason="IneffectiveScaling",
                      message=f"growing from {found.from_executors} to {found.to_executors} executors added "
                              f"{found.observed:.0f} rows/s of the {found.expected:.0f} expected; DS2 will not grow "
                              f"past {found.to_executors} until the spec changes.")
    if queries is not None:
        status.write(patch, StreamingPoolStatus(reservedSlots=sum(q.reserved_slots for q in queries.values())))
        lags = [q.kafka_lag for q in queries.values() if q.kafka_lag is not None]
        auto["lagRows"] = sum(lags) if lags else None
    if chosen.memory is not None:
        auto.update(scaling.memory_status(chosen.memory))
    status.write(patch, StreamingPoolStatus.model_validate({"autoscaling": auto}),  # None: gone (a merge patch nulls it)
                 cleared=[f"autoscaling.{key}" for key, value in auto.items() if value is None])
    if chosen.decision is not None:
        status.write(patch, StreamingPoolStatus(lastScalingDecision=ScalingDecision(
            time=now_rfc3339(), fromExecutors=current, toExecutors=chosen.target, reason=chosen.decision.reason,
            bound=chosen.decision.bound)))
        kopf.info(body, reason="Autoscaled", message=chosen.why)
    return chosen


def _overload(body: kopf.Body, name: str, chosen: scaling.Plan, conditions: list[dict[str, Any]],
              generation: int | None, patch: kopf.Patch) -> list[dict[str, Any]]:
    """State an overload in the pool's status (condition, message, event, metric), and its end."""
    was = any(c.get("type") == "Overloaded" and c.get("status") == "True" for c in conditions)
    metrics.overloaded(name, chosen.overload is not None)
    if chosen.overload is None:
        if str((body.get("status") or {}).get("message") or "").startswith(OVERLOADED):
            status.write(patch, StreamingPoolStatus(), cleared=["message"])  # the overload ended: its sentence goes
        return set_condition(conditions, "Overloaded", False, "WithinCapacity",
                             "the executors carry the measured demand.", now_rfc3339(), generation)
    status.write(patch, StreamingPoolStatus(message=f"{OVERLOADED}{chosen.overload}"))
    if not was:
        metrics.OVERLOADS.labels(name).inc()
        kopf.warn(body, reason="Overloaded", message=chosen.overload)
    return set_condition(conditions, "Overloaded", True, "DemandExceedsExecutors", chosen.overload,
                         now_rfc3339(), generation)


async def _scale(body: kopf.Body, name: str, model: StreamingPool, runtime: RuntimeClient,
                 conditions: list[dict[str, Any]], generation: int | None, patch: kopf.Patch) -> list[dict[str, Any]]:
    """Bring the runtime's executor target to the pool's, without restarting it; report current/target."""
    previous = int(((body.get("status") or {}).get("executors") or {}).get("current", 0))
    target = previous
    try:
        chosen = await _plan(body, model, runtime, patch, generation)
        target = chosen.target
        conditions = _overload(body, name, chosen, conditions, generation, patch)  # even if the target is refused
        status.write(patch, StreamingPoolStatus(executors=ExecutorsStatus(current=previous, target=target)))
        state, asked = await scaling.realize(runtime, target)
    except RuntimeUnreachable as error:
        return set_condition(conditions, "Scaled", False, "RuntimeUnreachable",
                             f"cannot reach the runtime at {runtime.url} ({error}); retrying.", now_rfc3339(), generation)
    except RuntimeRefused as refused:
        return set_condition(conditions, "Scaled", False, "ExecutorTargetRejected",
                             f"the runtime refused a target of {target} executors: {refused.message}",
                             now_rfc3339(), generation)
    if asked:
        kopf.info(body, reason="Scaling", message=f"asked the runtime for {target} executors.")
    status.write(patch, StreamingPoolStatus(executors=ExecutorsStatus(current=state.current, target=target)))
    metrics.executors(name, state.current, target)
    done = state.current == target
    return set_condition(conditions, "Scaled", done, "AtTarget" if done else "Scaling",
                         f"{state.current} of {target} executors running; {chosen.why}", now_rfc3339(), generation)
