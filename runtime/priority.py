"""Which CPU priority lever the pool's threads have, found by trying (`probe`), and the one in force
(`decide`, pure).

Linux lets a thread without CAP_SYS_NICE raise its own nice value (lower its priority) at will, and
lower it again only down to `20 - RLIMIT_NICE`. RLIMIT_NICE is the node's setting (the container
runtime's own limit, inherited by every container; 0 unless the node raises it) and not in a pod's
spec; Pod Security Standards forbid adding SYS_NICE. So what a pool's threads may do is found by
trying it on a thread of their own, never read from capability bits:

- `threadNice`: a thread went to nice -5 and back to 0 (RLIMIT_NICE 25 or more, or CAP_SYS_NICE):
  urgent tasks' threads run at -5, as on a machine where the runtime has root.
- `bulkNice`: a thread went to nice 4 and back to 0 but not to -5 (RLIMIT_NICE 20-24): bulk tasks'
  threads run at nice 4 while they run and come back to 0 after, urgent ones stay at 0: the same
  ratio of CPU weight between them.
- `podWeight`: no thread may come back from a lower priority (RLIMIT_NICE under 20, no
  CAP_SYS_NICE): on pods the kernel still weighs each pod's cgroup by its CPU request (cgroup v1
  `cpu.shares` = millicores x 1024 / 1000), so the pool's CPU against other pods is what its
  requests say; inside the pool every thread is alike.
- `none`: the policy has no urgent work (fifo, fair), or the lane is off, and no pods to weigh.

The executors' JVMs make the same trial themselves (`UrgentLane.check`, in the Sluice sink jar);
the driver's trial here speaks for the pool's pods, which share the node's limit and the pool's
securityContext.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass

from sluice.api.pool import PoolPriority

URGENT_NICE = -5
"""Nice of an urgent task's thread under `threadNice` (Java priority 10 with ThreadPriorityPolicy=1)."""
BULK_NICE = 4
"""Nice of a bulk task's thread under `bulkNice` (Java priority 1 with ThreadPriorityPolicy=1)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What one thread of this process could do with its own nice value."""

    raise_ok: bool
    """It went to `URGENT_NICE` and back to 0."""
    lower_ok: bool
    """It went to `BULK_NICE` and back to 0."""
    rlimit_nice: int
    """RLIMIT_NICE's soft limit (a thread may go down to nice 20 - it); -1: unlimited."""


def _try(nice: int) -> bool:
    """From a fresh thread at nice 0: whether it reaches `nice` and comes back to 0."""
    done = [False]

    def run() -> None:
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            there = os.getpriority(os.PRIO_PROCESS, tid) == nice
            os.setpriority(os.PRIO_PROCESS, tid, 0)
            done[0] = there and os.getpriority(os.PRIO_PROCESS, tid) == 0
        except OSError:  # EACCES or EPERM: the kernel refused
            done[0] = False

    thread = threading.Thread(target=run, name="sluice-priority-probe", daemon=True)
    thread.start()
    thread.join()
    return done[0]


def probe() -> Probe:
    """Try both levers on threads of this process (each thread ends after its trial)."""
    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    return Probe(raise_ok=_try(URGENT_NICE), lower_ok=_try(BULK_NICE),
                 rlimit_nice=-1 if soft == resource.RLIM_INFINITY else int(soft))


def decide(gated: bool, lane_on: bool, found: Probe, on_pods: bool, requests: str = "") -> PoolPriority:
    """The lever in force for a pool's urgent work, and why in one sentence. `on_pods`: the
    executors run as pods; `requests`: what they ask the node for (a CPU quantity, for the reason)."""
    limit = "unlimited" if found.rlimit_nice < 0 else str(found.rlimit_nice)
    weight = ("the kernel weighs the pool's pods against the node's others by their CPU requests"
              + (f" ({requests} an executor)" if requests else ""))
    if not gated or not lane_on:
        why = "the policy has no gate (fifo and fair run Spark on its own)" if not gated else "the urgent lane is off"
        if on_pods:
            return PoolPriority(mechanism="podWeight", reason=f"{why}; {weight}")
        return PoolPriority(mechanism="none", reason=why)
    if found.raise_ok:
        return PoolPriority(mechanism="threadNice", reason=(
            f"urgent tasks' threads run at nice {URGENT_NICE}: a thread may raise its priority here "
            f"(RLIMIT_NICE {limit}, or CAP_SYS_NICE)"))
    if found.lower_ok:
        return PoolPriority(mechanism="bulkNice", reason=(
            f"bulk tasks' threads run at nice {BULK_NICE} and come back to 0: RLIMIT_NICE {limit} lets a "
            f"thread return to nice 0 but not reach {URGENT_NICE}"))
    lacks = (f"no thread may raise its priority or come back from a lower one (RLIMIT_NICE {limit}, "
             "no CAP_SYS_NICE; a node setting)")
    if on_pods:
        return PoolPriority(mechanism="podWeight", reason=f"{lacks}; {weight}")
    return PoolPriority(mechanism="none", reason=lacks)
