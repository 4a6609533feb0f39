"""The scheduler core in-process, for the local runner: same calls as SchedulerClient, no HTTP.

Thread-safe: Spark's foreachBatch threads block on a condition until their batch is granted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from .bands import DEFAULT_BAND
from .core import Completion, Grant, Scheduler
from .policies import BatchRequest, QuerySpec


def _released(request: BatchRequest) -> Grant:
    """The query is not (or no longer) registered: run at once, ungated, in the default pool."""
    return Grant(request.query, request.batch_id, DEFAULT_BAND, 1, 0.0, 0.0, 0.0, fail_open=True)


class LocalScheduler:
    mode = "gated"

    def __init__(self, core: Scheduler, clock: Callable[[], float] = time.time, wait: float = 1.0) -> None:
        self.core = core
        self.clock = clock
        self.wait = wait
        self._cond = threading.Condition()
        self._granted: dict[tuple[str, int], Grant] = {}

    def _pump(self, wake: bool = False) -> None:
        """Dispatch, and wake the waiting threads only if a batch was granted (or `wake`): a waiter
        woken for nothing pumps again, and with every wake-up waking all the others, two held
        batches kept each other spinning (most of a core with ten queries)."""
        granted = self.core.dispatch(self.clock())
        for grant in granted:
            self._granted[(grant.query, grant.batch_id)] = grant
        if granted or wake:
            self._cond.notify_all()

    def register(self, spec: QuerySpec) -> bool:
        with self._cond:
            self.core.register(spec)
        return True

    def unregister(self, key: str) -> bool:
        with self._cond:
            self.core.unregister(key)
            for pending in [k for k in self._granted if k[0] == key]:
                del self._granted[pending]
            self._pump(wake=True)  # its own waiting batch must see that it is gone
        return True

    def dispatch(self, request: BatchRequest, completed: Sequence[Completion] = ()) -> Grant:
        key = (request.query, request.batch_id)
        with self._cond:
            for done in completed:
                self.core.complete(done)
            if request.query not in self.core.queries:
                return _released(request)
            self.core.submit(request, self.clock())
            self._pump()
            while key not in self._granted:
                if request.query not in self.core.queries:  # unregistered while waiting (stop)
                    return _released(request)
                self._cond.wait(self.core.next_look(self.clock(), self.wait))
                self._pump()  # aging and leases move with time even when nobody calls
            return self._granted.pop(key)

    def complete(self, query: str, completed: Sequence[Completion]) -> bool:
        with self._cond:
            for done in completed:
                self.core.complete(done)
            self._pump()
        return True
