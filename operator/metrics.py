"""The operator's Prometheus metrics and its /metrics + /healthz server."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

RECONCILES = Counter("sluice_operator_reconciles_total", "Reconciliations.", ["kind", "result"])
DURATION = Histogram("sluice_operator_reconcile_seconds", "Reconciliation time.", ["kind"])
PHASES = Gauge("sluice_operator_query_phase", "1 for the phase each query is in.", ["tenant", "query", "phase"])
ATTAINMENT = Gauge("sluice_operator_query_sla_attainment_ratio", "SLA attainment per query (from its runtime).", ["tenant", "query"])
EXECUTORS = Gauge("sluice_operator_pool_executors", "Executors per pool: running now (current) and asked for (target).",
                  ["pool", "state"])
OVERLOADED = Gauge("sluice_operator_pool_overloaded", "1 while a pool's measured demand needs more executors than it has.",
                   ["pool"])
OVERLOADS = Counter("sluice_operator_pool_overloads_total", "Times a pool became overloaded (demand above its executors).",
                    ["pool"])
PHASE_NAMES = ("Pending", "Running", "Suspended", "Failed")

_runner: web.AppRunner | None = None


@contextlib.contextmanager
def reconcile(kind: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    except Exception:
        RECONCILES.labels(kind, "error").inc()
        raise
    else:
        RECONCILES.labels(kind, "ok").inc()
    finally:
        DURATION.labels(kind).observe(time.perf_counter() - started)


def phase(tenant: str, query: str, current: str) -> None:
    for name in PHASE_NAMES:
        PHASES.labels(tenant, query, name).set(1 if name == current else 0)


def attainment(tenant: str, query: str, value: float) -> None:
    ATTAINMENT.labels(tenant, query).set(value)


def executors(pool: str, current: int, target: int) -> None:
    EXECUTORS.labels(pool, "current").set(current)
    EXECUTORS.labels(pool, "target").set(target)


def overloaded(pool: str, now: bool) -> None:
    OVERLOADED.labels(pool).set(1 if now else 0)


def forget_query(tenant: str, query: str) -> None:
    for name in PHASE_NAMES:
        with contextlib.suppress(KeyError):
            PHASES.remove(tenant, query, name)
    with contextlib.suppress(KeyError):
        ATTAINMENT.remove(tenant, query)


async def serve(port: int, host: str = "0.0.0.0") -> int:
    """Serve /metrics and /healthz; returns the bound port (0 picks one)."""
    global _runner

    async def metrics_handler(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.get("/metrics", metrics_handler), web.get("/healthz", healthz)])
    _runner = web.AppRunner(app, access_log=None)
    await _runner.setup()
    site = web.TCPSite(_runner, host, port)
    await site.start()
    server = getattr(site, "_server", None)
    return int(server.sockets[0].getsockname()[1]) if server and server.sockets else port


async def close() -> None:
    global _runner
    if _runner is not None:
        await _runner.cleanup()
        _runner = None
