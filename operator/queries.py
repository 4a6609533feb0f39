"""kopf handlers for StreamingQueries: admission, registration on the pool's runtime, status sync.

Thin: admission is pure (`admission.admit`), the runtime is reached through its typed client, and
status goes through the status subresource. The finalizer deregisters a query before it goes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from sluice.api.constants import GROUP, QUERIES, VERSION
from sluice.api.manifest import ManifestErrors, load_query
from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery, StreamingQueryStatus

from . import kube, metrics, settings, snapshots, status
from .admission import Admission, Held, Ledger, admit, batchings, is_admitted, set_condition
from .builders import runtime_url
from .pools import pool_model
from .runtime_client import RuntimeClient, RuntimeRefused, RuntimeUnreachable
from .timefmt import now_rfc3339

MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec")
LEDGER = Ledger()
"""Admissions this operator made that a query's status may not show yet (see `Ledger`)."""
_ADMITTING: dict[str, asyncio.Lock] = {}
"""One admission at a time per pool: quotas and the driver's density are counted over its queries."""


def start_admissions() -> None:
    """A fresh ledger, locks and pool snapshots for an operator run (its own event loop)."""
    LEDGER.clear()
    _ADMITTING.clear()
    snapshots.reset()


def ready(conditions: list[dict[str, Any]], phase: str, message: str, pool: str, generation: int | None
          ) -> list[dict[str, Any]]:
    """`Ready`, `Stalled` and `Reconciling` for a phase the runtime reports (`status.health`): Ready while
    the query runs on its pool (`kubectl wait --for=condition=Ready sq/NAME`), Stalled when it failed."""
    reason = {"Running": "Running", "Suspended": "Suspended", "Failed": "Failed"}.get(phase, "Starting")
    return status.health(conditions, phase, reason, message, now_rfc3339(), generation,
                         f"running on pool '{pool}'." if phase == "Running" else "")


async def _admission(body: kopf.Body, name: str, ns: str) -> tuple[StreamingQuery, dict[str, Any] | None, Admission]:
    try:
        query = load_query({k: body[k] for k in MANIFEST_KEYS if k in body})
    except ManifestErrors as errors:
        raise kopf.PermanentError(" ".join(str(e) for e in errors.errors)) from None
    pool_body = await asyncio.to_thread(kube.get_pool, query.spec.pool)
    pool: StreamingPool | None = pool_model(pool_body) if pool_body else None
    held = Held.of((pool_body or {}).get("status"), body.get("status"))
    pool_name = query.spec.pool
    async with _ADMITTING.setdefault(pool_name, asyncio.Lock()):
        on_pool = [q for q in await asyncio.to_thread(kube.list_queries) if q["spec"].get("pool") == pool_name]
        listed = {q["metadata"]["name"] for q in on_pool if q["metadata"].get("namespace") == ns and is_admitted(q)}
        ledger = LEDGER.on_pool(pool_name)
        kept = batchings(q for q in on_pool if (q["metadata"].get("namespace"), q["metadata"]["name"]) != (ns, name)
                         and (is_admitted(q) or (q["metadata"].get("namespace"), q["metadata"]["name"]) in ledger))
        decision = admit(query, pool, LEDGER.others(ns, pool_name, name, listed), held, kept, body.get("status"))
        LEDGER.record(ns, pool_name, name, decision.admitted and pool_body is not None)
    return query, pool_body, decision


@kopf.on.resume(GROUP, VERSION, QUERIES)
@kopf.on.create(GROUP, VERSION, QUERIES)
@kopf.on.update(GROUP, VERSION, QUERIES)
async def reconcile_query(body: kopf.Body, name: str, namespace: str | None, meta: kopf.Meta, patch: kopf.Patch,
                          retry: int, **_: Any) -> None:
    namespace = namespace or "default"
    with metrics.reconcile("StreamingQuery"):
        conditions = list((body.get("status") or {}).get("conditions") or [])
        generation = meta.get("generation")
        try:
            query, pool_body, decision = await _admission(body, name, namespace)
        except kopf.PermanentError as invalid:  # the manifest: no retry helps, a person must fix it
            status.write(patch, StreamingQueryStatus.model_validate({
                "phase": "Failed", "message": str(invalid), "observedGeneration": generation,
                "conditions": status.health(conditions, "Failed", "InvalidSpec", str(invalid), now_rfc3339(),
                                            generation)}))
            metrics.phase(namespace, name, "Failed")
            raise
        conditions = set_condition(conditions, "Admitted", decision.admitted, decision.reason, decision.message,
                                   now_rfc3339(), generation)
        status.write(patch, StreamingQueryStatus.model_validate({"conditions": conditions, "observedGeneration": generation}))
        if not decision.admitted or pool_body is None:
            status.write(patch, StreamingQueryStatus.model_validate({
                "phase": "Pending", "message": decision.message, "conditions": status.health(
                    conditions, "Pending", decision.reason, decision.message, now_rfc3339(), generation)}))
            metrics.phase(namespace, name, "Pending")
            if retry == 0:
                kopf.warn(body, reason=decision.reason, message=decision.message)
            if decision.retry:
                raise kopf.TemporaryError(decision.message, delay=10)
            raise kopf.PermanentError(decision.message)
        token = await asyncio.to_thread(kube.read_token, query.spec.pool)
        url = runtime_url(pool_body, settings.current().namespace)
        try:
            if token is None:
                raise RuntimeUnreachable("the pool's token Secret does not exist yet")
            registration = await RuntimeClient(url, token).register(*_registration(body, name, namespace, pool_body))
        except RuntimeUnreachable as error:
            message = f"cannot reach pool '{query.spec.pool}' runtime at {url} ({error}); retrying."
            conditions = set_condition(conditions, "Registered", False, "RuntimeUnreachable", message, now_rfc3339(),
                                       generation)
            status.write(patch, StreamingQueryStatus.model_validate({
                "phase": "Pending", "message": message, "conditions": status.health(
                    conditions, "Pending", "RuntimeUnreachable", message, now_rfc3339(), generation)}))
            metrics.phase(namespace, name, "Pending")
            raise kopf.TemporaryError(message, delay=5) from None
        except RuntimeRefused as refused:
            conditions = set_condition(conditions, "Registered", False, "Rejected", refused.message, now_rfc3339(),
                                       generation)
            status.write(patch, StreamingQueryStatus.model_validate({
                "phase": "Failed", "message": refused.message, "conditions": status.health(
                    conditions, "Failed", "Rejected", refused.message, now_rfc3339(), generation)}))
            metrics.phase(namespace, name, "Failed")
            kopf.warn(body, reason="Rejected", message=refused.message)
            return
        conditions = set_condition(conditions, "Registered", True, "Registered",
                                   f"registered on pool '{query.spec.pool}'.", now_rfc3339(), generation)
        status.write(patch, StreamingQueryStatus.model_validate({
            "phase": registration.phase, "message": registration.message,
            "conditions": ready(conditions, registration.phase, registration.message, query.spec.pool, generation)}))
        metrics.phase(namespace, name, registration.phase)
        kopf.info(body, reason="Registered", message=f"running on pool '{query.spec.pool}' ({registration.phase}).")


@kopf.on.delete(GROUP, VERSION, QUERIES)
async def deregister_query(body: kopf.Body, name: str, namespace: str | None, retry: int, **_: Any) -> None:
    namespace = namespace or "default"
    LEDGER.forget(namespace, name)
    # always asked, admitted or not: an operator killed after registering a query but before its
    # status said Admitted left a registration behind that only this call removes (the chaos tier
    # found it); a query the runtime does not host answers 404, which is done
    pool = body["spec"].get("pool")
    found = await snapshots.read(pool)
    if found is None:
        return  # nothing left to deregister from
    runtime = found[0]
    try:
        hosted = await runtime.deregister(namespace, name)
    except (RuntimeUnreachable, RuntimeRefused) as error:
        if retry < 5 and is_admitted(dict(body)):  # a query never admitted is asked once
            raise kopf.TemporaryError(f"cannot deregister from the runtime at {runtime.url} ({error}); retrying.",
                                      delay=5) from None
        kopf.warn(body, reason="DeregisterSkipped",
                  message=f"the runtime at {runtime.url} did not deregister it ({error}); the query was removed anyway.")
        return
    metrics.forget_query(namespace, name)
    kopf.info(body, reason="Deregistered",
              message=f"removed from pool '{pool}'." if hosted else f"pool '{pool}' no longer hosted it.")


def _registration(body: kopf.Body, name: str, namespace: str, pool_body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """What the runtime is sent for a query: its manifest, and its tenant's quota weight on the pool."""
    manifest: dict[str, Any] = {k: body[k] for k in MANIFEST_KEYS}
    manifest["metadata"] = {"name": name, "namespace": namespace}
    quota = pool_model(pool_body).spec.quotas.get(namespace)
    return manifest, quota.weight if quota else 1.0


async def _reregister(body: kopf.Body, name: str, namespace: str, runtime: RuntimeClient, pool_body: dict[str, Any],
                      patch: kopf.Patch) -> None:
    try:
        registration = await runtime.register(*_registration(body, name, namespace, pool_body))
    except (RuntimeUnreachable, RuntimeRefused) as error:
        status.write(patch, StreamingQueryStatus(
            message=f"the pool's runtime no longer hosts the query and did not take it again ({error})."))
        return
    conditions = list((body.get("status") or {}).get("conditions") or [])
    status.write(patch, StreamingQueryStatus.model_validate({
        "phase": registration.phase, "message": registration.message,
        "conditions": ready(conditions, registration.phase, registration.message, body["spec"].get("pool"),
                            body.get("metadata", {}).get("generation"))}))
    kopf.info(body, reason="Reregistered",
              message=f"pool '{body['spec'].get('pool')}' runtime restarted; registered again, resuming from the checkpoint "
                      f"({registration.phase}).")


@kopf.timer(GROUP, VERSION, QUERIES, interval=settings.current().status_interval, initial_delay=2)
async def sync_query(body: kopf.Body, name: str, namespace: str | None, meta: kopf.Meta, patch: kopf.Patch,
                     **_: Any) -> None:
    """Copy latency, attainment and rates from the runtime into status, and the pool's overload."""
    namespace = namespace or "default"
    if not is_admitted(dict(body)):
        return
    snapshot = await snapshots.snapshot(body["spec"].get("pool"))
    if snapshot is None:
        return
    runtime, pool_body = snapshot.runtime, snapshot.pool_body
    if snapshot.refused:
        return
    if snapshot.statuses is None:
        status.write(patch, StreamingQueryStatus(schedulerMode="unknown"))
        return
    found = snapshot.statuses.get(f"{namespace}/{name}")
    if found is None:
        # not in the pool's snapshot: registered after it was read, or its driver restarted (a new
        # pod, or the old one rescheduled); asked alone, a runtime that does not host it gets it
        # again, and it resumes from its checkpoint
        try:
            found = await runtime.status(namespace, name)
        except (RuntimeUnreachable, RuntimeRefused):
            return
        if found is None:
            await _reregister(body, name, namespace, runtime, pool_body, patch)
            return
    overload = next((c for c in (pool_body.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Overloaded"), None)
    overloaded = overload is not None and overload.get("status") == "True" and found.input_rate > 0
    conditions = list((body.get("status") or {}).get("conditions") or [])
    pool_name = body["spec"].get("pool")
    conditions = set_condition(
        conditions, "Overloaded", overloaded, "PoolOverloaded" if overloaded else "WithinCapacity",
        f"pool '{pool_name}' is overloaded: {overload['message']}" if overloaded and overload else
        f"pool '{pool_name}' carries the measured demand.", now_rfc3339(), meta.get("generation"))
    message = found.message
    if overloaded and overload and not found.message:
        message = f"pool '{pool_name}' is overloaded: {overload['message']}"
    update, cleared = status.query_status(found, ready(conditions, found.phase, found.message, pool_name,
                                                       meta.get("generation")), message)
    update.observedGeneration = meta.get("generation")
    if found.attainment is not None:
        metrics.attainment(namespace, name, found.attainment)
    metrics.phase(namespace, name, found.phase)
    status.write(patch, update, body.get("status") or {}, cleared)
