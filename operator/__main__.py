"""`python -m sluice.operator`: run the Sluice operator (kopf).

Settings come from the environment: SLUICE_NAMESPACE (where pools' runtimes live),
SLUICE_WATCH_NAMESPACES (comma-separated; empty: all namespaces), SLUICE_METRICS_PORT,
SLUICE_PEERING=true (several replicas, one active), SLUICE_LOG_LEVEL, SLUICE_STATUS_INTERVAL,
SLUICE_POOL_SYNC_INTERVAL, SLUICE_DS2_UTILIZATION, SLUICE_DS2_COOLDOWN.
"""

from __future__ import annotations

import logging
import os
import sys

import kopf

from . import handlers


def main() -> None:
    level = os.environ.get("SLUICE_LOG_LEVEL", "info").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    watch = [n.strip() for n in os.environ.get("SLUICE_WATCH_NAMESPACES", "").split(",") if n.strip()]
    assert handlers.reconcile_query  # the handlers register on import
    try:
        handlers.ds2_settings()
    except ValueError as error:
        sys.exit(str(error))
    kopf.run(clusterwide=not watch, namespaces=watch, standalone=os.environ.get("SLUICE_PEERING", "false").lower() != "true")


if __name__ == "__main__":
    main()
