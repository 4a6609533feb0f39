"""The operator's kopf handlers, all registered by importing this module.

`kopf run -m sluice.operator.handlers` (or `python -m sluice.operator`) loads:
- this module's start-up and login handlers (settings, metrics server);
- `sluice.operator.pools`: StreamingPools become runtimes whose executors DS2 sizes;
- `sluice.operator.queries`: StreamingQueries are admitted, registered and kept in status.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from sluice.api.constants import GROUP

from . import metrics, pools, queries
from .settings import current

HANDLERS = (pools.reconcile_pool, pools.sync_pool, queries.reconcile_query, queries.deregister_query,
            queries.sync_query)
"""Every resource handler (they register on import)."""


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account; elsewhere: the kubeconfig the settings name."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    config = current()
    queries.start_admissions()
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    settings.peering.name = config.peering_name
    settings.peering.standalone = not config.peering
    if config.peering:  # one replica acts, the rest stand by until its record goes stale
        settings.peering.mandatory = True
        settings.peering.clusterwide = True  # one ClusterKopfPeering per release, whatever it watches
        settings.peering.priority = config.peering_priority
        settings.peering.lifetime = config.peering_lifetime
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 120
    if config.metrics_port >= 0:
        await metrics.serve(config.metrics_port)


@kopf.on.cleanup()
async def shutdown(**_: Any) -> None:
    await metrics.close()
