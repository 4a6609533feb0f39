"""One read of a pool's runtime per status interval, shared by all of the pool's queries.

Each query's status timer used to read its pool and token from the API server and its own status
from the runtime: three requests per query per interval, 600 every 10 s for a pool of 200. A
snapshot holds the pool, its client and every hosted query's status (`GET /v1/queries`, one
call); the timers of one pool that fire within `max_age` of each other share it, and concurrent
ones wait for the one read in flight instead of starting their own.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from sluice.api.wire import QueryStatus

from . import kube, settings
from .builders import runtime_url
from .runtime_client import RuntimeClient, RuntimeRefused, RuntimeUnreachable


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: float
    """`time.monotonic()` when it was read."""
    runtime: RuntimeClient
    pool_body: dict[str, Any]
    statuses: dict[str, QueryStatus] | None
    """Every hosted query's status by `namespace/name`; None if the runtime did not answer."""
    refused: bool = False
    """The runtime answered with an error (its sentence is in its own log)."""


def fresh(snapshot: Snapshot | None, now: float, max_age: float) -> bool:
    return snapshot is not None and now - snapshot.at < max_age


_SNAPSHOTS: dict[str, Snapshot | None] = {}
_READING: dict[str, asyncio.Lock] = {}


def reset() -> None:
    """Nothing cached (an operator run starts, on its own event loop)."""
    _SNAPSHOTS.clear()
    _READING.clear()


async def read(pool: str) -> tuple[RuntimeClient, dict[str, Any]] | None:
    """The client of a pool's runtime and the pool, or None if the pool or its token is gone."""
    pool_body = await asyncio.to_thread(kube.get_pool, pool)
    token = await asyncio.to_thread(kube.read_token, pool) if pool_body else None
    if pool_body is None or token is None:
        return None
    return RuntimeClient(runtime_url(pool_body, settings.current().namespace), token), pool_body


async def snapshot(pool: str, max_age: float | None = None) -> Snapshot | None:
    """The pool's snapshot, read again if older than `max_age` (default: half the status interval,
    so each timer sees statuses at most one interval old); None if the pool or its token is gone."""
    limit = settings.current().status_interval / 2 if max_age is None else max_age
    async with _READING.setdefault(pool, asyncio.Lock()):
        cached = _SNAPSHOTS.get(pool)
        if fresh(cached, time.monotonic(), limit):
            return cached
        found = await read(pool)
        if found is None:
            _SNAPSHOTS.pop(pool, None)
            return None
        runtime, pool_body = found
        try:
            current = Snapshot(time.monotonic(), runtime, pool_body, await runtime.queries())
        except RuntimeUnreachable:
            current = Snapshot(time.monotonic(), runtime, pool_body, None)
        except RuntimeRefused:
            current = Snapshot(time.monotonic(), runtime, pool_body, None, refused=True)
        _SNAPSHOTS[pool] = current
        return current
