"""The scheduler sidecar: the pure core behind a small asyncio HTTP service (aiohttp).

Endpoints (JSON; the bodies are `sluice.api.wire`'s):
  PUT    /v1/queries/{tenant}/{name}   register or update a query
  DELETE /v1/queries/{tenant}/{name}   unregister it
  POST   /v1/dispatch                  ask for a grant (long-polls); may carry earlier completions
  POST   /v1/complete                  report completions without asking for a grant
  GET    /v1/state, /v1/overload       what the scheduler knows
  GET    /healthz, /metrics            liveness and Prometheus metrics
Malformed requests get a 4xx with one sentence in {"error": ...}; nothing is ever a 500 for bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import ValidationError

from sluice.api.common import query_labels
from sluice.api.wire import Complete, Completed, Dispatch, GrantOut, Register

from .core import Grant, Scheduler, SchedulerError
from .wire import completion_of, grant_out_of, request_of, spec_of

log = logging.getLogger("sluice.scheduler")


class Metrics:
    """The sidecar's metrics, in their own registry (one per server)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("sluice_scheduler_queue_depth", "Batches waiting for a grant.", registry=r)
        self.in_flight = Gauge("sluice_scheduler_in_flight", "Granted slots not yet completed.", registry=r)
        self.queries = Gauge("sluice_scheduler_queries", "Registered queries.", registry=r)
        self.grants = Counter("sluice_scheduler_grants_total", "Dispatch grants.", ["tenant", "query"], registry=r)
        self.aged = Counter("sluice_scheduler_aged_grants_total", "Grants given ahead of policy order by aging.", registry=r)
        self.wait = Histogram(
            "sluice_scheduler_wait_seconds", "Time a batch waited for its grant.", registry=r,
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.slack = Histogram(
            "sluice_scheduler_slack_seconds", "Start deadline minus grant time (negative: late).", registry=r,
            buckets=(-10, -1, -0.5, -0.1, 0, 0.1, 0.25, 0.5, 1, 2, 5, 15, 60),
        )
        self.violations = Counter(
            "sluice_scheduler_sla_violations_total", "Batches reported with latency above the target.",
            ["tenant", "query"], registry=r,
        )
        self.group_size = Gauge("sluice_scheduler_group_size", "Batches per grant (Drizzle k).", ["tenant", "query"], registry=r)
        self.bad_requests = Counter("sluice_scheduler_bad_requests_total", "Requests refused with a 4xx.", registry=r)

    def forget(self, tenant: str, query: str) -> None:
        for metric in (self.grants, self.violations, self.group_size):
            with contextlib.suppress(KeyError):
                metric.remove(tenant, query)


def _bad(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _explain(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"{where}: {first['msg'][0].lower()}{first['msg'][1:]}."


@dataclass
class SchedulerService:
    """The core plus what the shell needs: waiting requests and metrics."""

    core: Scheduler
    clock: Callable[[], float] = time.time
    metrics: Metrics = field(default_factory=Metrics)
    waiting: dict[tuple[str, int], asyncio.Future[Grant]] = field(default_factory=dict)
    unclaimed: dict[tuple[str, int], tuple[Grant, float]] = field(default_factory=dict)
    """Grants made while their requester was between two long polls: kept for its next ask until
    the given time, then handed back (a requester that never asks again has gone)."""
    reclaim: float = 5.0
    """Seconds an unclaimed grant is kept."""
    _wake: asyncio.TimerHandle | None = None
    """Pumps again when the earliest held batch should be looked at."""

    # ---- core calls, followed by a pump that resolves whoever was granted

    def pump(self) -> None:
        now = self.clock()
        for grant in self.core.dispatch(now):
            future = self.waiting.pop((grant.query, grant.batch_id), None)
            labels = query_labels(grant.query)
            self.metrics.grants.labels(*labels).inc()
            self.metrics.group_size.labels(*labels).set(grant.k)
            self.metrics.wait.observe(grant.waited)
            self.metrics.slack.observe(grant.slack)
            if grant.aged:
                self.metrics.aged.inc()
            if future is None or future.done():
                # its requester is between two polls: keep the grant for the next ask
                self.unclaimed[(grant.query, grant.batch_id)] = (grant, now + self.reclaim)
                continue
            future.set_result(grant)
        for key, (_, until) in list(self.unclaimed.items()):
            if now >= until:  # nobody came back for it: hand the slot back
                del self.unclaimed[key]
                self.core.release(*key)
        self.metrics.queue_depth.set(self.core.pending_count())
        self.metrics.in_flight.set(self.core.in_flight)
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if self.core.hold_until is not None:
            with contextlib.suppress(RuntimeError):  # no running loop: the ticker looks again
                self._wake = asyncio.get_running_loop().call_later(self.core.next_look(now, 1.0), self.pump)

    def complete(self, query: str, completed: list[Completed]) -> None:
        state = self.core.queries.get(query)
        for item in completed:
            done = completion_of(item, query)
            self.core.complete(done)
            if state and done.latency is not None and done.latency > state.spec.latency_target:
                self.metrics.violations.labels(*query_labels(query)).inc()

    # ---- handlers

    async def put_query(self, request: web.Request) -> web.Response:
        tenant, name = request.match_info["tenant"], request.match_info["name"]
        body = Register.model_validate_json(await request.read())  # a bad body: 400 (middleware)
        try:
            self.core.register(spec_of(body, f"{tenant}/{name}", tenant))
        except SchedulerError as error:
            self.metrics.bad_requests.inc()
            return _bad(str(error))
        self.metrics.queries.set(len(self.core.queries))
        return web.json_response({"query": f"{tenant}/{name}"})

    async def delete_query(self, request: web.Request) -> web.Response:
        tenant, name = request.match_info["tenant"], request.match_info["name"]
        key = f"{tenant}/{name}"
        if key not in self.core.queries:
            return _bad(f"query {key} is not registered", 404)
        self.core.unregister(key)
        for held in [k for k in self.unclaimed if k[0] == key]:
            del self.unclaimed[held]
        for (query, batch), future in list(self.waiting.items()):
            if query == key:  # release whoever waits: the runtime stops this query
                future.cancel()
                del self.waiting[(query, batch)]
        self.metrics.forget(tenant, key)
        self.metrics.queries.set(len(self.core.queries))
        self.pump()
        return web.json_response({"query": key, "deleted": True})

    async def dispatch(self, request: web.Request) -> web.Response:
        body = Dispatch.model_validate_json(await request.read())
        if body.query not in self.core.queries:
            self.metrics.bad_requests.inc()
            return _bad(f"query {body.query} is not registered; PUT /v1/queries/{body.query} first", 404)
        self.complete(body.query, body.completed)
        key = (body.query, body.batchId)
        kept = self.unclaimed.pop(key, None)
        if kept is not None:  # granted while the requester was between two polls
            return web.Response(body=grant_out_of(kept[0]).model_dump_json(), content_type="application/json")
        try:
            self.core.submit(request_of(body), self.clock())
        except SchedulerError as error:
            self.metrics.bad_requests.inc()
            return _bad(str(error), 409)
        future = self.waiting.get(key)
        if future is None or future.done():
            future = self.waiting[key] = asyncio.get_running_loop().create_future()
        self.pump()
        if future.done():  # granted at once: the common case, no timer needed
            return web.Response(body=grant_out_of(future.result()).model_dump_json(), content_type="application/json")
        try:
            grant = await asyncio.wait_for(asyncio.shield(future), body.waitMs / 1000)
        except TimeoutError:
            # no grant within waitMs: the requester asks again at once. Its batch keeps its place
            # (and its enqueue time, and under fair is charged once); a grant made meanwhile waits
            # for it in `unclaimed`
            self.waiting.pop(key, None)
            return web.json_response(GrantOut(granted=False).model_dump())
        except asyncio.CancelledError:
            if future.cancelled() and body.query not in self.core.queries:
                # unregistered while waiting: tell the client to go ahead ungated
                return web.json_response(GrantOut(granted=False, released=True).model_dump())
            if not future.done():
                self.waiting.pop(key, None)
                self.core.cancel(*key)
            raise
        return web.Response(body=grant_out_of(grant).model_dump_json(), content_type="application/json")

    async def complete_batches(self, request: web.Request) -> web.Response:
        body = Complete.model_validate_json(await request.read())
        self.complete(body.query, body.completed)
        self.pump()
        return web.json_response({"completed": len(body.completed)})

    async def state(self, request: web.Request) -> web.Response:
        return web.json_response(self.core.snapshot(self.clock()))

    async def overload(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"violations": [
                {"query": v.query, "tenant": v.tenant, "lateByMs": round(v.late_by * 1000, 3), "predicted": v.predicted}
                for v in self.core.overload(self.clock())
            ]}
        )

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "policy": self.core.policy.name, "queries": len(self.core.queries)})

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _ticker(self, app: web.Application) -> AsyncIterator[None]:
        """Expire leases of crashed holders and serve aged batches even when nothing else happens."""

        async def tick() -> None:
            while True:
                await asyncio.sleep(1.0)
                self.pump()

        task = asyncio.create_task(tick())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@web.middleware
async def _json_errors(request: web.Request, handler: Callable[[web.Request], object]) -> web.StreamResponse:
    try:
        return await handler(request)  # type: ignore[misc,no-any-return]
    except web.HTTPException as error:
        if error.status >= 400:
            return _bad(f"{request.method} {request.path}: {error.reason.lower()}", error.status)
        raise
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _bad("the body is not valid JSON")
    except ValidationError as error:  # a body that is not the wire format: one sentence naming the field
        request.app[SERVICE].metrics.bad_requests.inc()
        return _bad(_explain(error))


SERVICE = web.AppKey("service", SchedulerService)


def make_app(service: SchedulerService) -> web.Application:
    app = web.Application(middlewares=[_json_errors], client_max_size=1 << 20)
    app.add_routes([
        web.put("/v1/queries/{tenant}/{name}", service.put_query),
        web.delete("/v1/queries/{tenant}/{name}", service.delete_query),
        web.post("/v1/dispatch", service.dispatch),
        web.post("/v1/complete", service.complete_batches),
        web.get("/v1/state", service.state),
        web.get("/v1/overload", service.overload),
        web.get("/healthz", service.healthz),
        web.get("/metrics", service.metrics_endpoint),
    ])
    app.cleanup_ctx.append(service._ticker)
    app[SERVICE] = service
    return app


def reserve(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port now, listening only once a ServerThread serves it (until
    then a connection is refused, as with no server): a process that reserves its API's port
    before it starts Spark keeps that port from the ephemeral ports Spark and py4j take while
    starting, and learns at once that the port is taken. OSError names the address."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


class ServerThread:
    """Serve an app on a real socket from a background thread (local runner, tests): on host:port,
    on a unix socket, or on a socket bound beforehand (`reserve`)."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0, unix: str | None = None,
                 sock: socket.socket | None = None) -> None:
        import threading

        self.app = app
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(host, port, unix, sock), name="sluice-http", daemon=True)

    def _run(self, host: str, port: int, unix: str | None, sock: socket.socket | None) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start(host, port, unix, sock))
        except BaseException as error:  # reported to start()
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _start(self, host: str, port: int, unix: str | None, sock: socket.socket | None) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        if unix:
            await web.UnixSite(self._runner, unix).start()
            self.url = f"unix:{unix}"
            return
        if sock is not None:
            await web.SockSite(self._runner, sock).start()
            bound_host, bound = sock.getsockname()[:2]
            self.url = f"http://[{bound_host}]:{bound}" if ":" in bound_host else f"http://{bound_host}:{bound}"
            return
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = getattr(site, "_server", None)
        bound = server.sockets[0].getsockname()[1] if server and server.sockets else port
        self.url = f"http://{host}:{bound}"

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], object]) -> None:
        """Run fn on the server's loop (e.g. to inspect the core safely)."""
        self._loop.call_soon_threadsafe(fn)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
