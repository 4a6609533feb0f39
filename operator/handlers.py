"""kopf handlers: StreamingPools become runtimes, StreamingQueries become registrations on them.

Thin shells over the pure parts (builders, admission): read what is there, decide, apply
idempotently (server-side apply with a fixed field manager, so a rerun after a crash creates
nothing twice), and write status through the status subresource.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
from pydantic import ValidationError

from sluice.api.manifest import ManifestErrors, load_query
from sluice.api.pool import StreamingPool

from . import metrics
from .admission import admit, is_admitted, set_condition
from .autoscaler import Bounds, QueryLoad, decide
from .builders import base_name, pool_objects, runtime_url

GROUP, VERSION = "sluice.dev", "v1alpha1"
QUERIES, POOLS = "streamingqueries", "streamingpools"
FIELD_MANAGER = "sluice-operator"
log = logging.getLogger("sluice.operator")


def operator_namespace() -> str:
    """The operator's own namespace, where pools' runtimes live."""
    return os.environ.get("SLUICE_NAMESPACE", "sluice-system")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- Kubernetes access (sync client in threads)

_api: Any = None


def api() -> Any:
    global _api
    if _api is None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
        except config.ConfigException:
            # KUBECONFIG is read now, not when the client library was imported
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        _api = client.ApiClient()
    return _api


def _apply(objects: list[dict[str, Any]]) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api())
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        dynamic.server_side_apply(resource, body=obj, namespace=obj["metadata"].get("namespace"),
                                  field_manager=FIELD_MANAGER, force_conflicts=True)


def _read_token(pool: str) -> str | None:
    import base64

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        secret = client.CoreV1Api(api()).read_namespaced_secret(f"{base_name(pool)}-token", operator_namespace())
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    data = (secret.data or {}).get("token")
    return base64.b64decode(data).decode() if data else None


def _get_pool(name: str) -> dict[str, Any] | None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        body: dict[str, Any] = client.CustomObjectsApi(api()).get_cluster_custom_object(GROUP, VERSION, POOLS, name)
        return body
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _queries(namespace_: str | None = None) -> list[dict[str, Any]]:
    from kubernetes import client

    custom = client.CustomObjectsApi(api())
    if namespace_:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace_, QUERIES)["items"]
    else:
        items = custom.list_cluster_custom_object(GROUP, VERSION, QUERIES)["items"]
    return list(items)


# ---------------------------------------------------------------- the runtime's control API

class RuntimeUnreachable(Exception):
    pass


async def _runtime(method: str, url: str, token: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    timeout = aiohttp.ClientTimeout(total=120, connect=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
            method, url, json=body, headers={"Authorization": f"Bearer {token}"}
        ) as response:
            answer: dict[str, Any] = await response.json(content_type=None)
            return response.status, answer
    except (aiohttp.ClientError, TimeoutError) as error:
        raise RuntimeUnreachable(f"{type(error).__name__}: {error}") from None


async def _healthy(url: str) -> bool:
    try:
        timeout = aiohttp.ClientTimeout(total=3)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(f"{url}/healthz") as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


# ---------------------------------------------------------------- settings

@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account; elsewhere: the kubeconfig KUBECONFIG names at start-up."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)



@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = "sluice.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sluice.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sluice.dev", key="last-handled-configuration")
    settings.peering.name = "sluice.dev"
    settings.peering.standalone = os.environ.get("SLUICE_PEERING", "false").lower() != "true"
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 120
    port = int(os.environ.get("SLUICE_METRICS_PORT", "8080"))
    if port >= 0:
        await metrics.serve(port)


@kopf.on.cleanup()
async def shutdown(**_: Any) -> None:
    await metrics.close()


# ---------------------------------------------------------------- pools

def _pool_model(body: Any) -> StreamingPool:
    try:
        return StreamingPool.model_validate({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})
    except ValidationError as error:
        first = error.errors()[0]
        raise kopf.PermanentError(f"spec.{'.'.join(str(p) for p in first['loc'][1:])}: {first['msg']}") from None


@kopf.on.resume(GROUP, VERSION, POOLS)
@kopf.on.create(GROUP, VERSION, POOLS)
@kopf.on.update(GROUP, VERSION, POOLS)
async def reconcile_pool(body: kopf.Body, name: str, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    started = time.perf_counter()
    with metrics.reconcile("StreamingPool"):
        model = _pool_model(body)
        token = await asyncio.to_thread(_read_token, name) or secrets.token_urlsafe(32)
        objects = pool_objects(dict(body), model, operator_namespace(), token)
        await asyncio.to_thread(_apply, objects)
        url = runtime_url(dict(body), operator_namespace())
        healthy = await _healthy(url)
        conditions = list((body.get("status") or {}).get("conditions") or [])
        conditions = set_condition(conditions, "Ready", healthy, "RuntimeReady" if healthy else "RuntimeStarting",
                                   f"the runtime answers at {url}." if healthy else f"waiting for the runtime at {url}.",
                                   _now(), meta.get("generation"))
        patch.status["phase"] = "Running" if healthy else "Pending"
        patch.status["conditions"] = conditions
        patch.status["observedGeneration"] = meta.get("generation")
        patch.status["policy"] = model.spec.policy
        if healthy:
            conditions = await _scale(body, name, model, token, url, conditions, meta.get("generation"), patch)
        patch.status["conditions"] = conditions
        kopf.info(body, reason="Reconciled", message=f"runtime objects applied in {operator_namespace()} ({len(objects)} objects).")
    log.info("pool %s reconciled in %.2fs", name, time.perf_counter() - started)


@kopf.timer(GROUP, VERSION, POOLS, interval=float(os.environ.get("SLUICE_POOL_SYNC_INTERVAL", "15")), initial_delay=5)
async def sync_pool(body: kopf.Body, name: str, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    url = runtime_url(dict(body), operator_namespace())
    healthy = await _healthy(url)
    hosted = [q for q in await asyncio.to_thread(_queries) if q["spec"].get("pool") == name and is_admitted(q)]
    patch.status["phase"] = "Running" if healthy else "Pending"
    patch.status["queries"] = len(hosted)
    token = await asyncio.to_thread(_read_token, name)
    if healthy and token:
        conditions = list((body.get("status") or {}).get("conditions") or [])
        patch.status["conditions"] = await _scale(body, name, _pool_model(body), token, url, conditions,
                                                  meta.get("generation"), patch)


def _setting(name: str, default: str, ok: Callable[[float], bool], fix: str) -> float:
    raw = os.environ.get(name, default)
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")  # fails every check below
    if not ok(value):
        raise ValueError(f"{name} is {raw!r}; set {fix}")
    return value


def ds2_settings() -> tuple[float, float]:
    """(utilization, cooldown seconds) from SLUICE_DS2_UTILIZATION / SLUICE_DS2_COOLDOWN."""
    utilization = _setting("SLUICE_DS2_UTILIZATION", "0.7", lambda v: 0 < v <= 1,
                           "a number above 0 and at most 1, such as 0.7")
    cooldown = _setting("SLUICE_DS2_COOLDOWN", "120", lambda v: 0 <= v < float("inf"),
                        "a number of seconds, 0 or more, such as 120")
    return utilization, cooldown


def _bounds(model: StreamingPool) -> Bounds:
    utilization, cooldown = ds2_settings()
    return Bounds(model.spec.minExecutors, model.spec.maxExecutors, model.spec.executor.cores,
                  utilization=utilization, cooldown=cooldown)


def _loads(queries: dict[str, Any]) -> list[QueryLoad]:
    """The runtime's per-query input rates and measured useful task time, as DS2's observations."""
    out = []
    for key, status in queries.items():
        load = status.get("load") or {}
        out.append(QueryLoad(key, float(status.get("input_rate") or 0.0), float(load.get("rows") or 0.0),
                             float(load.get("usefulSeconds") or 0.0)))
    return out


async def _target(body: kopf.Body, model: StreamingPool, url: str, token: str, patch: kopf.Patch) -> tuple[int, str]:
    """The executor target: `spec.executors` if set (kubectl scale), else DS2's decision; and why."""
    if model.spec.executors is not None:
        return model.spec.executors, "spec.executors is set."
    status = body.get("status") or {}
    current = int((status.get("executors") or {}).get("target") or model.spec.minExecutors)
    code, answer = await _runtime("GET", f"{url}/v1/queries", token)
    if code != 200:
        return current, f"no measurements from the runtime (HTTP {code}); keeping {current}."
    last = (status.get("lastScalingDecision") or {}).get("time")
    last_change = datetime.fromisoformat(last).timestamp() if last else None
    decision = decide(_loads(answer.get("queries") or {}), current, _bounds(model), time.time(), last_change)
    if decision.changes(current):
        patch.status["lastScalingDecision"] = {"time": _now(), "fromExecutors": current, "toExecutors": decision.target,
                                               "reason": decision.reason}
        kopf.info(body, reason="Autoscaled", message=f"DS2: {decision.reason}")
    return decision.target, f"DS2: {decision.reason}"


async def _scale(body: kopf.Body, name: str, model: StreamingPool, token: str, url: str,
                 conditions: list[dict[str, Any]], generation: int | None, patch: kopf.Patch) -> list[dict[str, Any]]:
    """Bring the runtime's executor target to the pool's, without restarting it; report current/target."""
    previous = ((body.get("status") or {}).get("executors") or {}).get("current", 0)
    try:
        target, why = await _target(body, model, url, token, patch)
        patch.status["executors"] = {"current": previous, "target": target}
        code, answer = await _runtime("GET", f"{url}/v1/executors", token)
        if code == 200 and answer.get("target") != target:
            code, answer = await _runtime("PUT", f"{url}/v1/executors", token, {"target": target})
            if code == 202:
                kopf.info(body, reason="Scaling", message=f"asked the runtime for {target} executors.")
                code, answer = await _runtime("GET", f"{url}/v1/executors", token)
    except RuntimeUnreachable as error:
        return set_condition(conditions, "Scaled", False, "RuntimeUnreachable",
                             f"cannot reach the runtime at {url} ({error}); retrying.", _now(), generation)
    if code not in (200, 202):
        return set_condition(conditions, "Scaled", False, "ExecutorTargetRejected",
                             f"the runtime refused a target of {target} executors: {answer.get('error', f'HTTP {code}')}",
                             _now(), generation)
    current = int(answer.get("current", previous))
    patch.status["executors"] = {"current": current, "target": target}
    metrics.executors(name, current, target)
    done = current == target
    return set_condition(conditions, "Scaled", done, "AtTarget" if done else "Scaling",
                         f"{current} of {target} executors running; {why}", _now(), generation)


# ---------------------------------------------------------------- queries

async def _admission(body: kopf.Body, name: str, ns: str) -> tuple[Any, dict[str, Any] | None, Any]:
    try:
        query = load_query({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})
    except ManifestErrors as errors:
        raise kopf.PermanentError(" ".join(str(e) for e in errors.errors)) from None
    pool_body = await asyncio.to_thread(_get_pool, query.spec.pool)
    pool = _pool_model(pool_body) if pool_body else None
    others = [q for q in await asyncio.to_thread(_queries, ns)
              if q["metadata"]["name"] != name and q["spec"].get("pool") == query.spec.pool and is_admitted(q)]
    return query, pool_body, admit(query, pool, len(others))


@kopf.on.resume(GROUP, VERSION, QUERIES)
@kopf.on.create(GROUP, VERSION, QUERIES)
@kopf.on.update(GROUP, VERSION, QUERIES)
async def reconcile_query(body: kopf.Body, name: str, namespace: str | None, meta: kopf.Meta, patch: kopf.Patch,
                          retry: int, **_: Any) -> None:
    namespace = namespace or "default"
    with metrics.reconcile("StreamingQuery"):
        query, pool_body, decision = await _admission(body, name, namespace)
        conditions = list((body.get("status") or {}).get("conditions") or [])
        generation = meta.get("generation")
        conditions = set_condition(conditions, "Admitted", decision.admitted, decision.reason, decision.message, _now(), generation)
        patch.status["conditions"] = conditions
        patch.status["observedGeneration"] = generation
        if not decision.admitted or pool_body is None:
            patch.status["phase"] = "Pending"
            patch.status["message"] = decision.message
            if retry == 0:
                kopf.warn(body, reason=decision.reason, message=decision.message)
            if decision.retry:
                raise kopf.TemporaryError(decision.message, delay=10)
            raise kopf.PermanentError(decision.message)
        token = await asyncio.to_thread(_read_token, query.spec.pool)
        url = runtime_url(pool_body, operator_namespace())
        manifest = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        manifest["metadata"] = {"name": name, "namespace": namespace}
        try:
            if token is None:
                raise RuntimeUnreachable("the pool's token Secret does not exist yet")
            status, answer = await _runtime("PUT", f"{url}/v1/queries/{namespace}/{name}", token, manifest)
        except RuntimeUnreachable as error:
            message = f"cannot reach pool '{query.spec.pool}' runtime at {url} ({error}); retrying."
            patch.status["conditions"] = set_condition(conditions, "Registered", False, "RuntimeUnreachable", message, _now(), generation)
            patch.status["phase"] = "Pending"
            patch.status["message"] = message
            raise kopf.TemporaryError(message, delay=5) from None
        registered = status in (200, 422)
        message = answer.get("message") or answer.get("error") or ""
        patch.status["conditions"] = set_condition(
            conditions, "Registered", registered, "Registered" if registered else "Rejected",
            f"registered on pool '{query.spec.pool}'." if registered else message, _now(), generation)
        patch.status["phase"] = answer.get("phase", "Failed") if registered else "Failed"
        patch.status["message"] = message
        if registered:
            kopf.info(body, reason="Registered", message=f"running on pool '{query.spec.pool}' ({patch.status['phase']}).")
        else:
            kopf.warn(body, reason="Rejected", message=message)


async def _pool_runtime(pool: str) -> tuple[str, str] | None:
    """(control API URL, token) of a pool's runtime, or None if the pool or its token is gone."""
    pool_body = await asyncio.to_thread(_get_pool, pool)
    token = await asyncio.to_thread(_read_token, pool) if pool_body else None
    if pool_body is None or token is None:
        return None
    return runtime_url(pool_body, operator_namespace()), token


@kopf.on.delete(GROUP, VERSION, QUERIES)
async def deregister_query(body: kopf.Body, name: str, namespace: str | None, retry: int, **_: Any) -> None:
    namespace = namespace or "default"
    if not is_admitted(dict(body)):
        return
    pool = body["spec"].get("pool")
    found = await _pool_runtime(pool)
    if found is None:
        return  # nothing left to deregister from
    url, token = found
    try:
        status, _ = await _runtime("DELETE", f"{url}/v1/queries/{namespace}/{name}", token)
    except RuntimeUnreachable as error:
        if retry < 5:
            raise kopf.TemporaryError(f"cannot reach the runtime at {url} to deregister ({error}); retrying.", delay=5) from None
        kopf.warn(body, reason="DeregisterSkipped", message=f"the runtime at {url} did not answer; the query was removed anyway.")
        return
    metrics.forget_query(namespace, name)
    kopf.info(body, reason="Deregistered", message=f"removed from pool '{pool}' (HTTP {status}).")


@kopf.timer(GROUP, VERSION, QUERIES, interval=float(os.environ.get("SLUICE_STATUS_INTERVAL", "10")), initial_delay=2)
async def sync_query(body: kopf.Body, name: str, namespace: str | None, patch: kopf.Patch, **_: Any) -> None:
    """Copy latency, attainment and rates from the runtime into status."""
    namespace = namespace or "default"
    if not is_admitted(dict(body)):
        return
    found = await _pool_runtime(body["spec"].get("pool"))
    if found is None:
        return
    url, token = found
    try:
        status, answer = await _runtime("GET", f"{url}/v1/queries/{namespace}/{name}", token)
    except RuntimeUnreachable:
        patch.status["schedulerMode"] = "unknown"
        return
    if status != 200:
        return
    patch.status["phase"] = answer["phase"]
    patch.status["message"] = answer.get("message", "")
    if answer.get("p99_ms") is not None:
        patch.status["latency"] = {"p50Ms": answer["p50_ms"], "p99Ms": answer["p99_ms"]}
    if answer.get("attainment") is not None:
        patch.status["slaAttainment"] = round(answer["attainment"], 4)
        metrics.attainment(namespace, name, answer["attainment"])
    patch.status["inputRate"] = round(answer.get("input_rate") or 0.0, 2)
    patch.status["processingRate"] = round(answer.get("processing_rate") or 0.0, 2)
    patch.status["batches"] = answer.get("batches", 0)
    patch.status["rows"] = answer.get("rows", 0)
    patch.status["schedulerMode"] = answer.get("scheduler", "")
    patch.status["bottleneck"] = answer.get("bottleneck", "")
    metrics.phase(namespace, name, answer["phase"])
