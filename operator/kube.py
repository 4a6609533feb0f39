"""Kubernetes access for the handlers: the API client, server-side apply, and the few reads they need.

Synchronous (the official client); the handlers call these through `asyncio.to_thread`.
Server-side apply with a fixed field manager makes every write idempotent: a rerun after a
crash creates nothing twice.
"""

from __future__ import annotations

import base64
from typing import Any

from sluice.api.constants import GROUP, POOLS, QUERIES, VERSION

from . import settings
from .builders import base_name

FIELD_MANAGER = "sluice-operator"
_api: Any = None


def api() -> Any:
    """The API client: the pod's service account, else the kubeconfig the settings name."""
    global _api
    if _api is None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config(config_file=settings.current().kubeconfig)
        _api = client.ApiClient()
    return _api


def apply(objects: list[dict[str, Any]]) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api())
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        dynamic.server_side_apply(resource, body=obj, namespace=obj["metadata"].get("namespace"),
                                  field_manager=FIELD_MANAGER, force_conflicts=True)


def _absent_is_none(read: Any, *args: Any) -> Any:
    from kubernetes.client.exceptions import ApiException

    try:
        return read(*args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def read_token(pool: str) -> str | None:
    """The pool's control API token, from its Secret in the operator's namespace; None if absent."""
    from kubernetes import client

    secret = _absent_is_none(client.CoreV1Api(api()).read_namespaced_secret, f"{base_name(pool)}-token",
                             settings.current().namespace)
    data = ((secret.data if secret else None) or {}).get("token")
    return base64.b64decode(data).decode() if data else None


def get_pool(name: str) -> dict[str, Any] | None:
    from kubernetes import client

    body: dict[str, Any] | None = _absent_is_none(client.CustomObjectsApi(api()).get_cluster_custom_object,
                                                  GROUP, VERSION, POOLS, name)
    return body


def list_queries(namespace: str | None = None) -> list[dict[str, Any]]:
    """StreamingQueries of one namespace, or of all."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api())
    if namespace:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, QUERIES)["items"]
    else:
        items = custom.list_cluster_custom_object(GROUP, VERSION, QUERIES)["items"]
    return list(items)
