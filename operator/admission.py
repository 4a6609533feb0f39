"""Admission of a query to a pool, and Kubernetes condition bookkeeping (pure: data in, decisions out)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sluice.api.files import FilesOutsideRoot, confine_query
from sluice.api.manifest import ManifestErrors, load_query
from sluice.api.pool import StreamingPool
from sluice.api.query import KafkaSource, StreamingQuery
from sluice.scheduler.density import Batching, density_problem, sla_interval
from sluice.scheduler.execution import mode_of, reservation_problem, reserved_slots


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    message: str
    retry: bool = False
    """Worth retrying without a change to the query (the pool may appear, a slot may free)."""


class Ledger:
    """The queries this operator admitted, per (namespace, pool), until their status says so.

    A query's Admitted condition reaches the API server only when its handler ends, after it has
    registered on the runtime; two queries of one namespace created together were both admitted
    past a quota of 1, each listing the other before its status was written (the cluster tier
    found it). Admission counts the listed admitted queries together with this ledger, and runs
    under one lock per (namespace, pool)."""

    def __init__(self) -> None:
        self._admitted: dict[tuple[str, str], set[str]] = {}

    def clear(self) -> None:
        self._admitted.clear()

    def others(self, namespace: str, pool: str, name: str, listed: set[str]) -> int:
        """Admitted queries of `namespace` on `pool` besides `name`: those listed as admitted, and
        those this operator admitted whose status may not show it yet."""
        return len((listed | self._admitted.get((namespace, pool), set())) - {name})

    def record(self, namespace: str, pool: str, name: str, admitted: bool) -> None:
        """A decision: the query counts on `pool` if admitted, and on no other pool."""
        self.forget(namespace, name)
        if admitted:
            self._admitted.setdefault((namespace, pool), set()).add(name)

    def on_pool(self, pool: str) -> set[tuple[str, str]]:
        """(namespace, name) of the queries this operator admitted to `pool`."""
        return {(ns, name) for (ns, p), names in self._admitted.items() if p == pool for name in names}

    def forget(self, namespace: str, name: str) -> None:
        """The query is gone (or moved): it no longer counts anywhere."""
        for (ns, _), names in self._admitted.items():
            if ns == namespace:
                names.discard(name)


@dataclass(frozen=True, slots=True)
class Held:
    """Task slots on a pool as its status last showed them (for a Real-time query's reservation)."""

    reserved: int = 0
    """Held by the pool's Real-time queries (`status.reservedSlots`)."""
    micro_batch: int = 1
    """Needed by its micro-batch queries (DS2: `status.autoscaling.recommendation.microBatchSlots`)."""
    own: int = 0
    """Held by the query being admitted (its `status.reservedSlots`): it runs, and keeps them."""

    @classmethod
    def of(cls, pool_status: Mapping[str, Any] | None, query_status: Mapping[str, Any] | None) -> Held:
        pool_status, query_status = pool_status or {}, query_status or {}
        recommendation = (pool_status.get("autoscaling") or {}).get("recommendation") or {}
        return cls(int(pool_status.get("reservedSlots") or 0), int(recommendation.get("microBatchSlots") or 1),
                   int(query_status.get("reservedSlots") or 0))


def batching(query: StreamingQuery, status: Mapping[str, Any] | None = None) -> Batching:
    """How often `query` batches, as its driver sees it: its status' interval once it runs, else
    the predicted one (`density.sla_interval`); 0 for a suspended or Real-time query."""
    status = status or {}
    key = f"{query.tenant}/{query.metadata.name}"
    if query.spec.suspend or (status.get("execution") or mode_of(query).mode) == "realTime":
        return Batching(key, 0.0)
    if status.get("batchIntervalMs"):
        return Batching(key, float(status["batchIntervalMs"]) / 1000)
    spec = query.spec
    trigger = spec.trigger.interval.seconds if spec.trigger is not None else None
    windowed = any(step.window is not None for step in spec.pipeline)
    delay = max((step.watermark.delay.seconds for step in spec.pipeline if step.watermark is not None), default=0.0)
    return Batching(key, sla_interval(spec.sla.latencyTarget.seconds, trigger, delay if windowed else None))


def batchings(bodies: Iterable[Mapping[str, Any]]) -> list[Batching]:
    """`batching` of listed StreamingQuery objects; one that does not parse counts as none (its
    own admission says why)."""
    out = []
    for body in bodies:
        status = body.get("status") or {}
        meta = body.get("metadata") or {}
        if status.get("batchIntervalMs") and not (body.get("spec") or {}).get("suspend") \
                and status.get("execution") != "realTime":  # the common case, without parsing the manifest
            out.append(Batching(f"{meta.get('namespace')}/{meta.get('name')}", float(status["batchIntervalMs"]) / 1000))
            continue
        try:
            query = load_query({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})
        except ManifestErrors:
            continue
        out.append(batching(query, status))
    return out


def admit(query: StreamingQuery, pool: StreamingPool | None, others_admitted: int, held: Held | None = None,
          kept: Iterable[Batching] = (), status: Mapping[str, Any] | None = None) -> Admission:
    """May `query` run on its pool? `others_admitted`: admitted queries of its namespace on that
    pool; `held`: the pool's reserved slots (a Real-time query must leave the micro-batch ones);
    `kept`: the pool's other admitted queries (the driver must carry their batches and this
    one's); `status`: the query's own status (its measured interval, once it runs)."""
    name, namespace = query.spec.pool, query.tenant
    if pool is None:
        return Admission(False, "PoolNotFound",
                         f"StreamingPool '{name}' does not exist; create it or fix spec.pool (retrying).", retry=True)
    if not pool.spec.admits(namespace):
        return Admission(False, "NamespaceNotAllowed",
                         f"StreamingPool '{name}' does not admit namespace '{namespace}'; add it to the pool's allowedNamespaces.")
    quota = pool.spec.quotas.get(namespace)
    if quota is not None and quota.maxQueries is not None and others_admitted >= quota.maxQueries:
        return Admission(False, "QuotaExceeded",
                         f"namespace '{namespace}' already runs {others_admitted} of at most {quota.maxQueries} queries on "
                         f"pool '{name}'; delete one or raise the pool's quotas.{namespace}.maxQueries (retrying).", retry=True)
    try:
        confine_query(query, pool.spec.filesRoot)
    except FilesOutsideRoot as outside:
        return Admission(False, "FilesOutsideRoot", f"{outside} (pool '{name}' sets the root: spec.filesRoot).")
    held = held or Held()
    if mode_of(query).mode == "realTime" and not held.own:  # slots already held stay held
        source = query.spec.source
        wanted = reserved_slots(None, source.minPartitions if isinstance(source, KafkaSource) else None)
        problem = reservation_problem(name, pool.spec.maxExecutors * pool.spec.executor.cores,
                                      held.reserved, wanted, held.micro_batch)
        if problem is not None:
            return Admission(False, "TaskSlotsReserved", f"{problem[0].upper()}{problem[1:-1]} (retrying).", retry=True)
    crowded = density_problem(name, pool.spec.driver.cores, kept, batching(query, status))
    if crowded is not None:
        return Admission(False, "DriverFull", f"{crowded[0].upper()}{crowded[1:-1]} (retrying).", retry=True)
    return Admission(True, "Admitted", f"admitted to pool '{name}'.")


def is_admitted(body: dict[str, Any]) -> bool:
    return any(c.get("type") == "Admitted" and c.get("status") == "True"
               for c in (body.get("status") or {}).get("conditions") or [])


def set_condition(conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str,
                  now: str, generation: int | None) -> list[dict[str, Any]]:
    """A new condition list with `kind` set; lastTransitionTime moves only when the status changes."""
    value = "True" if status else "False"
    out = []
    found = False
    for condition in conditions:
        if condition.get("type") == kind:
            found = True
            moved = condition.get("status") != value
            condition = {**condition, "status": value, "reason": reason, "message": message, "observedGeneration": generation,
                         "lastTransitionTime": now if moved else condition.get("lastTransitionTime", now)}
        out.append(condition)
    if not found:
        out.append({"type": kind, "status": value, "reason": reason, "message": message,
                    "lastTransitionTime": now, "observedGeneration": generation})
    return out
