"""What the host's intake and reads see of it: its lock, its queries and the parts they write to.

A protocol, so that `host` builds on `intake` and `reads` and they never import it back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from .gate import Gate, Gatekeeper
from .hosted import HostedQuery
from .metrics import Metrics


class HostState(Protocol):
    lock: threading.Lock
    queries: dict[str, HostedQuery]
    by_spark_name: dict[str, HostedQuery]
    metrics: Metrics
    gate: Gate
    scheduler: Gatekeeper | None
    after_stateful_commit: list[Callable[[], None]]
    measure_from: float
    clock: Callable[[], float]
