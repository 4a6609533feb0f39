"""The operator's settings: its environment, read once into one typed object.

  SLUICE_NAMESPACE            where pools' runtimes live (default sluice-system)
  SLUICE_WATCH_NAMESPACES     comma-separated namespaces to watch; empty: all
  SLUICE_METRICS_PORT         the operator's /metrics and /healthz (readiness); -1: none
  SLUICE_HEALTH_PORT          kopf's liveness endpoint /healthz (fails when the operator does); -1: none
  SLUICE_PEERING              true: several replicas, one active (kopf peering)
  SLUICE_PEERING_NAME         the ClusterKopfPeering the replicas share (default sluice.dev)
  SLUICE_PEERING_PRIORITY     this replica's peering priority (default: from its host name, so
                              replicas differ: kopf freezes every peer of equal priority)
  SLUICE_PEERING_LIFETIME     seconds a silent peer counts as alive (a standby takes over after it)
  SLUICE_LOG_LEVEL            debug, info, warning, error
  SLUICE_STATUS_INTERVAL      seconds between a query's status syncs
  SLUICE_POOL_SYNC_INTERVAL   seconds between a pool's syncs (and DS2 decisions)
  SLUICE_RUNTIME_IMAGE        the image of pools without spec.image
  SLUICE_METRICS_FROM         comma-separated namespaces whose pods may scrape pools' metrics ports
                              (unset: METRICS_FROM_NAMESPACES; empty: none but the operator)
  KUBECONFIG                  outside a pod: the kubeconfig to use

`current()` parses the environment the first time it is asked; a bad value raises
`SettingsError` with one sentence naming the variable and the fix.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sluice.api.constants import (
    METRICS_FROM_NAMESPACES,
    OPERATOR_HEALTH_PORT,
    OPERATOR_METRICS_PORT,
    RUNTIME_IMAGE,
)


class SettingsError(ValueError):
    pass


DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str = "sluice-system"
    watch_namespaces: tuple[str, ...] = ()
    metrics_port: int = OPERATOR_METRICS_PORT
    health_port: int = OPERATOR_HEALTH_PORT
    peering: bool = False
    log_level: str = "INFO"
    status_interval: float = 10.0
    pool_sync_interval: float = 15.0
    kubeconfig: str | None = None
    runtime_image: str = RUNTIME_IMAGE
    metrics_from: tuple[str, ...] = METRICS_FROM_NAMESPACES
    peering_name: str = "sluice.dev"
    peering_priority: int = field(default_factory=lambda: peering_priority(socket.gethostname()))
    peering_lifetime: int = 60

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        def number(name: str, default: float, ok: Callable[[float], bool], fix: str) -> float:
            raw = env.get(name, "")
            if raw == "":
                return default
            try:
                value = float(raw)
            except ValueError:
                value = math.nan  # fails every check
            if not ok(value):
                raise SettingsError(f"{name} is {raw!r}; set {fix}")
            return value

        seconds = "a number of seconds above 0, such as 10"
        level = env.get("SLUICE_LOG_LEVEL", "info").upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise SettingsError(f"SLUICE_LOG_LEVEL is {level.lower()!r}; set debug, info, warning or error")
        def namespaces(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
            if name not in env:
                return default
            names = tuple(n.strip() for n in env[name].split(",") if n.strip())
            bad = [n for n in names if not DNS_LABEL.fullmatch(n)]
            if bad:
                raise SettingsError(f"{name} names {bad[0]!r}, not a namespace; set comma-separated namespace names "
                                    "such as monitoring, or nothing for none")
            return names

        def port(name: str, default: int) -> int:
            return int(number(name, default, lambda v: v == -1 or (0 <= v < 65536 and v == int(v)),
                              "a TCP port (0 picks a free one) or -1 for none"))

        return cls(
            namespace=env.get("SLUICE_NAMESPACE") or _DEFAULT.namespace,
            watch_namespaces=tuple(n.strip() for n in env.get("SLUICE_WATCH_NAMESPACES", "").split(",") if n.strip()),
            metrics_port=port("SLUICE_METRICS_PORT", OPERATOR_METRICS_PORT),
            health_port=port("SLUICE_HEALTH_PORT", OPERATOR_HEALTH_PORT),
            peering=env.get("SLUICE_PEERING", "false").lower() == "true",
            log_level=level,
            status_interval=number("SLUICE_STATUS_INTERVAL", _DEFAULT.status_interval, lambda v: 0 < v < math.inf, seconds),
            pool_sync_interval=number("SLUICE_POOL_SYNC_INTERVAL", _DEFAULT.pool_sync_interval, lambda v: 0 < v < math.inf,
                                      seconds),
            kubeconfig=env.get("KUBECONFIG") or None,
            runtime_image=env.get("SLUICE_RUNTIME_IMAGE") or RUNTIME_IMAGE,
            metrics_from=namespaces("SLUICE_METRICS_FROM", METRICS_FROM_NAMESPACES),
            peering_name=env.get("SLUICE_PEERING_NAME") or _DEFAULT.peering_name,
            peering_priority=int(number("SLUICE_PEERING_PRIORITY", peering_priority(env.get("HOSTNAME") or socket.gethostname()),
                                        lambda v: math.isfinite(v) and v == int(v) and 0 <= v < 2**31, "a whole number from 0 to 2147483647")),
            peering_lifetime=int(number("SLUICE_PEERING_LIFETIME", _DEFAULT.peering_lifetime,
                                        lambda v: math.isfinite(v) and v == int(v) and 5 <= v <= 3600, "whole seconds from 5 to 3600, such as 60")),
        )

    @property
    def logging_level(self) -> int:
        return int(getattr(logging, self.log_level))


def peering_priority(hostname: str) -> int:
    """A replica's kopf peering priority from its pod's host name: distinct replicas get distinct
    priorities (almost surely; 1 in a million collide), so exactly one acts and the others stand by."""
    return zlib.crc32(hostname.encode()) % 1_000_000 + 1


_DEFAULT = Settings()
_current: Settings | None = None


def current() -> Settings:
    """The operator's settings (the environment, parsed the first time)."""
    global _current
    if _current is None:
        _current = Settings.from_env(os.environ)
    return _current


def use(settings: Settings | None) -> None:
    """Replace the settings (None: parse the environment again on the next `current()`)."""
    global _current
    _current = settings
