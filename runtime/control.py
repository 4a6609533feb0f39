"""The runtime's control API (HTTP, bearer token): the operator's way to drive a pool's runtime.

  PUT    /v1/queries/{namespace}/{name}          add or update (body: the StreamingQuery as JSON; optional
                                                  ?weight=W, the tenant's quota weight, default 1) -> Registration
  DELETE /v1/queries/{namespace}/{name}          remove (checkpoint kept) -> Removed
  POST   /v1/queries/{namespace}/{name}/suspend  Suspend -> QueryStatus
  GET    /v1/queries[/{namespace}/{name}]        QueryList / QueryStatus
  GET    /v1/queries/{namespace}/{name}/batches  BatchList: measured batches committed after ?since=T
                                                  (epoch seconds, default 0) still in the latency window
  GET    /v1/executors                           ExecutorState
  PUT    /v1/executors                           ExecutorTarget: request N; surplus executors drain (202 TargetAccepted)
  GET    /healthz, /metrics                      no token needed
The bodies are the models of `sluice.api.wire`. Lifecycle work goes to the host's lifecycle
thread and other Spark calls to worker threads, so the event loop never calls Spark; status
reads only copy what the host holds. Bad input gets a 4xx `Problem` with one sentence.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ValidationError

from sluice.api.common import shown
from sluice.api.manifest import ManifestErrors, load_query
from sluice.api.wire import (
    ExecutorTarget,
    Health,
    Problem,
    QueryList,
    Registration,
    Removed,
    Suspend,
    TargetAccepted,
)

from .executors import ExecutorScaler, ExecutorTargetError
from .host import QueryHost

HOST = web.AppKey("host", QueryHost)
OPEN_PATHS = ("/healthz", "/metrics")
M = TypeVar("M", bound=BaseModel)


def _answer(model: BaseModel, status: int = 200) -> web.Response:
    return web.json_response(model.model_dump(mode="json"), status=status)


def _error(message: str, status: int) -> web.Response:
    return _answer(Problem(error=message), status)


class BadBody(Exception):
    pass


async def _body(request: web.Request, model: type[M], shape: str) -> M:
    """The request's JSON body as `model`; BadBody with one sentence naming `shape` if it is not."""
    try:
        return model.model_validate_json(await request.read())
    except ValidationError:
        raise BadBody(f"the body must be {shape}") from None


def _weight(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _since(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def open_routes(host: QueryHost, registry: CollectorRegistry = REGISTRY,
                scheduler_metrics: str | None = None) -> list[web.RouteDef]:
    """GET /healthz and /metrics (no token): on the control port, and alone on the metrics port."""

    async def healthz(request: web.Request) -> web.Response:
        if host.broken is not None:  # the kubelet's liveness probe restarts the pod
            return _answer(Health(ok=False, queries=len(host.queries), error=host.broken), 503)
        return _answer(Health(ok=True, queries=len(host.queries)))

    async def sidecar() -> bytes:
        if scheduler_metrics is None:
            return b""
        try:
            timeout = aiohttp.ClientTimeout(total=2)
            async with aiohttp.ClientSession(timeout=timeout) as session, session.get(scheduler_metrics) as response:
                return await response.read() if response.status == 200 else b""
        except (aiohttp.ClientError, TimeoutError):
            return b""  # the sidecar is down: its series go missing (absent() alerts on that)

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(registry) + generate_latest(host.metrics.registry) + await sidecar()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return [web.get("/healthz", healthz), web.get("/metrics", metrics)]


def make_metrics_app(host: QueryHost, registry: CollectorRegistry = REGISTRY,
                     scheduler_metrics: str | None = None) -> web.Application:
    """Only /healthz and /metrics: the pool pod's metrics port, which its NetworkPolicy opens to
    Prometheus and the kubelet while the control port stays the operator's alone."""
    app = web.Application()
    app.add_routes(open_routes(host, registry, scheduler_metrics))
    return app


def make_control_app(host: QueryHost, token: str, registry: CollectorRegistry = REGISTRY,
                     executors: ExecutorScaler | None = None, scheduler_metrics: str | None = None) -> web.Application:
    """`scheduler_metrics`: the sidecar's /metrics URL (on loopback in the pool pod); the runtime's
    /metrics serves its series too, so one scrape of the pod sees the runtime and the scheduler."""
    scaler = executors or ExecutorScaler(host.spark, stateful=host.stateful_batches)

    @web.middleware
    async def auth(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return _error("a valid bearer token is required (Authorization: Bearer <token>)", 401)
        try:
            return await handler(request)
        except BadBody as error:
            return _error(str(error), 400)
        except web.HTTPException as error:
            if error.status >= 400:
                return _error(f"{request.method} {shown(request.path)}: {error.reason.lower()}", error.status)
            raise

    async def blocking(fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    def key_of(request: web.Request) -> str:
        return f"{request.match_info['namespace']}/{request.match_info['name']}"

    def not_hosted(key: str) -> web.Response:
        return _error(f"query {shown(key)} is not hosted here", 404)

    async def put_query(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error("the body is not valid JSON; send the StreamingQuery manifest as JSON", 400)
        try:
            query = load_query(body)
        except ManifestErrors as errors:
            return _error(" ".join(f"{e.path}: {e.message}" if e.path else e.message for e in errors.errors), 400)
        if query.key != key_of(request):
            return _error(f"the manifest is {query.key} but the path names {shown(key_of(request))}; make them agree", 400)
        weight = _weight(request.query.get("weight", "1"))
        if weight is None:
            return _error("weight must be a number above zero (the tenant's quota weight), e.g. ?weight=2", 400)
        await asyncio.wrap_future(host.post_add(query, weight))
        status = host.status(query.key)
        return _answer(Registration(query=query.key, phase=status.phase, message=status.message, status=status))

    async def delete_query(request: web.Request) -> web.Response:
        key = key_of(request)
        if not await asyncio.wrap_future(host.post_remove(key)):
            return not_hosted(key)
        return _answer(Removed(query=key, deleted=True))

    async def suspend_query(request: web.Request) -> web.Response:
        key = key_of(request)
        body = await _body(request, Suspend, '{"suspend": true} or {"suspend": false}')
        if not await asyncio.wrap_future(host.post_suspend(key, body.suspend)):
            return not_hosted(key)
        return _answer(host.status(key))

    async def get_queries(request: web.Request) -> web.Response:
        return _answer(QueryList(queries=host.statuses()))

    async def get_query(request: web.Request) -> web.Response:
        key = key_of(request)
        try:
            return _answer(host.status(key))
        except KeyError:
            return not_hosted(key)

    async def get_batches(request: web.Request) -> web.Response:
        key = key_of(request)
        since = _since(request.query.get("since", "0"))
        if since is None:
            return _error("since must be a time in epoch seconds (a number, 0 or more), e.g. ?since=1764300000.5", 400)
        try:
            return _answer(host.reads.batches(key, since))
        except KeyError:
            return not_hosted(key)

    async def get_executors(request: web.Request) -> web.Response:
        try:
            return _answer(await blocking(scaler.state))
        except (ExecutorTargetError, OSError) as error:
            return _error(f"cannot list executors: {error}", 503)

    async def put_executors(request: web.Request) -> web.Response:
        body = await _body(request, ExecutorTarget, '{"target": N} with N a whole number of executors, 0 or more')
        try:
            accepted = await blocking(lambda: scaler.set_target(body.target))
        except ExecutorTargetError as error:
            return _error(str(error), 409)
        # 202: Spark starts executors, and surplus ones drain, in the background (GET shows progress)
        return _answer(TargetAccepted(target=body.target, accepted=accepted), 202)

    app = web.Application(middlewares=[auth], client_max_size=1 << 20)
    app.add_routes([
        web.put("/v1/queries/{namespace}/{name}", put_query),
        web.delete("/v1/queries/{namespace}/{name}", delete_query),
        web.post("/v1/queries/{namespace}/{name}/suspend", suspend_query),
        web.get("/v1/queries", get_queries),
        web.get("/v1/queries/{namespace}/{name}", get_query),
        web.get("/v1/queries/{namespace}/{name}/batches", get_batches),
        web.get("/v1/executors", get_executors),
        web.put("/v1/executors", put_executors),
        *open_routes(host, registry, scheduler_metrics),
    ])
    app[HOST] = host

    async def stop_scaler(app: web.Application) -> None:
        scaler.stop()

    app.on_cleanup.append(stop_scaler)
    return app
