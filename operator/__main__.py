"""`python -m sluice.operator`: run the Sluice operator (kopf).

Settings come from the environment; `sluice.operator.settings` lists the variables.
"""

from __future__ import annotations

import logging
import sys

import kopf

from . import settings


def main() -> None:
    try:
        config = settings.current()
    except settings.SettingsError as error:
        sys.exit(str(error))
    logging.basicConfig(level=config.logging_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from . import handlers

    assert handlers.HANDLERS  # the handlers register on import
    watch = list(config.watch_namespaces)
    liveness = f"http://0.0.0.0:{config.health_port}/healthz" if config.health_port >= 0 else None
    kopf.run(clusterwide=not watch, namespaces=watch, standalone=not config.peering, liveness_endpoint=liveness,
             peering_name=config.peering_name if config.peering else None, priority=config.peering_priority)


if __name__ == "__main__":
    main()
