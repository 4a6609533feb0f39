"""The runtime's control API (HTTP, bearer token): the operator's way to drive a pool's runtime.

  PUT    /v1/queries/{namespace}/{name}          add or update (body: the StreamingQuery as JSON)
  DELETE /v1/queries/{namespace}/{name}          remove (checkpoint kept)
  POST   /v1/queries/{namespace}/{name}/suspend  {"suspend": true|false}
  GET    /v1/queries[/{namespace}/{name}]        status
  GET    /v1/executors                           {"current", "target", "removing", "removed", "executors": [...]}
  PUT    /v1/executors                           {"target": N}: request N; surplus executors drain (202)
  GET    /healthz, /metrics                      no token needed
Spark calls block, so they run in a worker thread; bad input gets a 4xx with one sentence.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from sluice.api.manifest import ManifestErrors, load_query

from .executors import ExecutorScaler, ExecutorTargetError
from .host import QueryHost

HOST = web.AppKey("host", QueryHost)
OPEN_PATHS = ("/healthz", "/metrics")


def _error(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)


def make_control_app(host: QueryHost, token: str, registry: CollectorRegistry = REGISTRY,
                     executors: ExecutorScaler | None = None) -> web.Application:
    executors = executors or ExecutorScaler(host.spark, stateful=host.stateful_batches)

    @web.middleware
    async def auth(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return _error("a valid bearer token is required (Authorization: Bearer <token>)", 401)
        try:
            return await handler(request)
        except web.HTTPException as error:
            if error.status >= 400:
                return _error(f"{request.method} {request.path}: {error.reason.lower()}", error.status)
            raise

    async def blocking(fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    def key_of(request: web.Request) -> str:
        return f"{request.match_info['namespace']}/{request.match_info['name']}"

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
            return _error(f"the manifest is {query.key} but the path names {key_of(request)}; make them agree", 400)
        hosted = await blocking(lambda: host.add(query))
        return web.json_response({"query": query.key, **host.status(query.key)}, status=200 if hosted.phase != "Failed" else 422)

    async def delete_query(request: web.Request) -> web.Response:
        key = key_of(request)
        if key not in host.queries:
            return _error(f"query {key} is not hosted here", 404)
        await blocking(lambda: host.remove(key))
        return web.json_response({"query": key, "deleted": True})

    async def suspend_query(request: web.Request) -> web.Response:
        key = key_of(request)
        if key not in host.queries:
            return _error(f"query {key} is not hosted here", 404)
        try:
            flag = json.loads(await request.read())["suspend"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            return _error('the body must be {"suspend": true} or {"suspend": false}', 400)
        if not isinstance(flag, bool):
            return _error('suspend must be true or false', 400)
        await blocking(lambda: host.suspend(key, flag))
        return web.json_response({"query": key, **host.status(key)})

    async def get_queries(request: web.Request) -> web.Response:
        return web.json_response({"queries": await blocking(host.statuses)})

    async def get_query(request: web.Request) -> web.Response:
        key = key_of(request)
        if key not in host.queries:
            return _error(f"query {key} is not hosted here", 404)
        host.refresh()
        return web.json_response({"query": key, **host.status(key)})

    async def get_executors(request: web.Request) -> web.Response:
        try:
            return web.json_response(await blocking(executors.state))
        except (ExecutorTargetError, OSError) as error:
            return _error(f"cannot list executors: {error}", 503)

    async def put_executors(request: web.Request) -> web.Response:
        try:
            target = json.loads(await request.read())["target"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            return _error('the body must be {"target": N} with N a whole number of executors', 400)
        if not isinstance(target, int) or isinstance(target, bool) or target < 0:
            return _error("target must be a whole number of executors, 0 or more", 400)
        try:
            accepted = await blocking(lambda: executors.set_target(target))
        except ExecutorTargetError as error:
            return _error(str(error), 409)
        # 202: Spark starts executors, and surplus ones drain, in the background (GET shows progress)
        return web.json_response({"target": target, "accepted": accepted}, status=202)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "queries": len(host.queries)})

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(registry) + generate_latest(host.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=[auth], client_max_size=1 << 20)
    app.add_routes([
        web.put("/v1/queries/{namespace}/{name}", put_query),
        web.delete("/v1/queries/{namespace}/{name}", delete_query),
        web.post("/v1/queries/{namespace}/{name}/suspend", suspend_query),
        web.get("/v1/queries", get_queries),
        web.get("/v1/queries/{namespace}/{name}", get_query),
        web.get("/v1/executors", get_executors),
        web.put("/v1/executors", put_executors),
        web.get("/healthz", healthz),
        web.get("/metrics", metrics),
    ])
    app[HOST] = host

    async def stop_scaler(app: web.Application) -> None:
        executors.stop()

    app.on_cleanup.append(stop_scaler)
    return app
