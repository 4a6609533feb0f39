"""Admission of a query to a pool, and Kubernetes condition bookkeeping (pure: data in, decisions out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.api.pool import StreamingPool
from sluice.api.query import StreamingQuery


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    message: str
    retry: bool = False
    """Worth retrying without a change to the query (the pool may appear, a slot may free)."""


def admit(query: StreamingQuery, pool: StreamingPool | None, others_admitted: int) -> Admission:
    """May `query` run on its pool? `others_admitted`: admitted queries of its namespace on that pool."""
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
