"""`sluice bench scheduler`: grants per second and round-trip latency of the real sidecar.

The sidecar runs as its own process (`python -m sluice.scheduler`) on loopback; N client processes
each run the runtime's real SchedulerClient in a loop of request -> grant -> (next request carrying
the completion), i.e. one round trip per batch. Clients and server share the machine. The pure
core is measured apart: one decision (submit + dispatch + complete) with many registered queries.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from sluice.scheduler.core import Completion, Scheduler
from sluice.scheduler.policies import BatchRequest, QuerySpec


@dataclass
class Result:
    clients: int
    seconds: float
    grants: int
    grants_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    core_decision_us: float
    core_queries: int

    def json(self) -> dict[str, float | int]:
        return asdict(self)


def _client(url: str, index: int, seconds: float, start_at: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from sluice.scheduler.client import SchedulerClient

    client = SchedulerClient(url, timeout=5.0)
    key = f"bench/q{index}"
    client.register(QuerySpec(key, "bench", 1.0))
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []
    done: list[Completion] = []
    batch = 0
    while time.perf_counter() < deadline:
        begin = time.perf_counter()
        grant = client.dispatch(BatchRequest(key, batch, rows=1), done)
        latencies.append(time.perf_counter() - begin)
        if grant.fail_open:
            out.put(("error", "the sidecar stopped answering during the benchmark"))
            return
        done = [Completion(key, batch, seconds=0.0, rows=1)]
        batch += 1
    client.complete(key, done)
    out.put(("ok", latencies))


def core_decision_seconds(queries: int = 10_000, rounds: int = 20_000) -> float:
    """Median seconds of one decision in the pure core with `queries` registered and pending."""
    core = Scheduler("cameo", capacity=1)
    for i in range(queries):
        core.register(QuerySpec(f"t{i % 100}/q{i}", f"t{i % 100}", 0.1 + (i % 50) * 0.1))
        core.submit(BatchRequest(f"t{i % 100}/q{i}", 0, rows=100, oldest_event=1e9 + i * 1e-3), 1e9)
    samples = []
    now = 1e9
    timer = time.perf_counter
    for r in range(rounds):
        now += 0.001
        begin = timer()
        (grant,) = core.dispatch(now)
        core.complete(Completion(grant.query, grant.batch_id, seconds=0.05, rows=100))
        core.submit(BatchRequest(grant.query, grant.batch_id + 1, rows=100, oldest_event=now), now)
        samples.append(timer() - begin)
        if r % 1000 == 0:
            samples = samples[-1000:] if len(samples) > 5000 else samples
    return statistics.median(samples)


def run(clients: int, seconds: float, core_queries: int = 10_000) -> Result:
    server = subprocess.Popen(
        [sys.executable, "-m", "sluice.scheduler", "--port", "0", "--capacity", str(max(clients, 1))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        match = re.search(r"listening on (\S+)", line)
        if not match:
            raise RuntimeError(f"the scheduler sidecar did not start: {line.strip() or 'no output'}")
        url = match.group(1)
        ctx = mp.get_context("spawn")
        queue: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        start_at = time.time() + 1.5 + 0.2 * clients  # all processes begin together
        procs = [ctx.Process(target=_client, args=(url, i, seconds, start_at, queue)) for i in range(clients)]
        for p in procs:
            p.start()
        latencies: list[float] = []
        for _ in procs:
            kind, payload = queue.get(timeout=seconds + 120)
            if kind != "ok":
                raise RuntimeError(str(payload))
            latencies.extend(payload)
        for p in procs:
            p.join(30)
    finally:
        server.terminate()
        server.wait(10)
    latencies.sort()
    quant = statistics.quantiles(latencies, n=100, method="inclusive")
    decision = core_decision_seconds(core_queries)
    return Result(
        clients=clients, seconds=seconds, grants=len(latencies), grants_per_s=round(len(latencies) / seconds, 1),
        p50_ms=round(quant[49] * 1000, 3), p99_ms=round(quant[98] * 1000, 3), max_ms=round(latencies[-1] * 1000, 3),
        core_decision_us=round(decision * 1e6, 2), core_queries=core_queries,
    )


def table(results: list[Result]) -> str:
    head = f"{'clients':>7} {'grants/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'core µs':>8}"
    rows = [
        f"{r.clients:>7} {r.grants_per_s:>10.0f} {r.p50_ms:>8.3f} {r.p99_ms:>8.3f} {r.max_ms:>8.2f} {r.core_decision_us:>8.2f}"
        for r in results
    ]
    return "\n".join([head, *rows])
