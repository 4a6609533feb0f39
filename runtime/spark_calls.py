"""Talking to Spark's driver through py4j: its errors in one line, a lost driver, a query between batches."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from typing import Any

from .session import exit_text

log = logging.getLogger("sluice.runtime")


def driver_gone(error: BaseException) -> bool:
    """The JVM behind the session no longer answers: py4j lost its connection (the driver exited, or
    its gateway died with it), as opposed to a call that failed inside a live driver."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(error, Py4JNetworkError | ConnectionError) or "stopped SparkContext" in str(error)


def one_line(error: BaseException) -> str:
    """One line of an exception from Spark (its first meaningful line)."""
    text = str(getattr(error, "desc", None) or error).strip()
    lines = [ln.strip().removeprefix(": ") for ln in text.splitlines() if ln.strip()]
    # py4j's first line only names the call ("An error occurred while calling o225.start."): skip it
    meaningful = [ln for ln in lines if not ln.startswith("An error occurred while calling")]
    return (meaningful or lines or [type(error).__name__])[0][:500]


def between_batches(handle: Any, timeout: float = 5.0) -> bool:
    """Wait (a little) for the batch in flight to commit: stopping a query mid-batch makes Spark
    abort its write and log two ERROR lines for what is a normal stop, and replays the batch on
    restart (a Kafka sink then holds its rows twice). True if no batch is in flight."""
    deadline = time.monotonic() + timeout
    try:
        while handle.isActive and handle.status.get("isTriggerActive"):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
    except Exception:  # a query that failed meanwhile: stop it anyway
        return True
    return True




class DriverWatch:
    """Notices that the driver JVM behind the session is gone: its process exited, or py4j lost it.
    Then `broken` holds one sentence and each `on_broken` callback runs once (the runtime exits)."""

    def __init__(self, process: subprocess.Popen[bytes] | None) -> None:
        self.process = process
        """The driver JVM's process (None if this Python did not start it): its exit is noticed at once."""
        self.broken: str | None = None
        self.on_broken: list[Callable[[], None]] = []

    def exited(self) -> bool:
        """True (and broken) once the driver's process has exited."""
        if self.process is not None and (code := self.process.poll()) is not None:
            self._break(f"exited ({exit_text(code)})")
        return self.broken is not None

    def lost(self, error: BaseException) -> bool:
        """True (and broken) if `error` says the driver no longer answers."""
        if driver_gone(error):
            self._break(f"stopped answering ({one_line(error)})")
        return self.broken is not None

    def _break(self, what: str) -> None:
        self.broken = f"the Spark driver {what}; every query of this runtime has stopped, so the runtime must restart"
        log.error("%s", self.broken)
        for callback in self.on_broken:
            callback()
