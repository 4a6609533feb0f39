"""Where a micro-batch's driver CPU goes: N small filter queries in one QueryHost (local[2],
rate sources at 20 rows/s, 1 s trigger, noop sink, cameo gate), then every thread's CPU over a
window, grouped by thread name (the JVM's and Python's), the CPU of the processes the JVM ran,
processes started per batch (the kernel's PID counter: machine-wide, so run it alone) and the
median of Spark's batch phases (durationMs) over the batches Spark keeps (its last 100 a query).

    .venv/bin/python bench/batch_cpu.py [--queries 4] [--warmup 90] [--seconds 60] [--conf KEY=VALUE ...]

`--conf` overrides a session setting, to measure one change against the default (docs/performance.md,
Density: "Per-batch costs"); `SLUICE_DRIVER_JIT=c1` in the environment runs the driver's JVM
with C1 alone (`runtime/session.py`). One fresh process per run; nothing else should run meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sluice.api.constants import API_VERSION
from sluice.api.manifest import load_query
from sluice.bench.procfs import tree
from sluice.runtime.host import QueryHost
from sluice.runtime.session import SessionConfig, build_session
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler

TICK = os.sysconf("SC_CLK_TCK")


def threads() -> dict[tuple[int, str], tuple[str, float]]:
    """CPU seconds of every thread of this process and its descendants, and of their reaped children."""
    out: dict[tuple[int, str], tuple[str, float]] = {}
    for pid in tree(os.getpid()):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out[(pid, "children")] = ("processes it ran", (int(fields[13]) + int(fields[14])) / TICK)
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                raw = (task / "stat").read_text()
            except OSError:
                continue
            fields = raw.rsplit(")", 1)[1].split()
            name = raw[raw.index("(") + 1:raw.rindex(")")]
            out[(pid, task.name)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def last_pid() -> int:
    return int(Path("/proc/sys/kernel/ns_last_pid").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=90.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.conf)
    spark = build_session(SessionConfig(master="local[2]", extra=extra))
    host = QueryHost(spark, Path(tempfile.mkdtemp(prefix="batch-cpu-")) / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    keys = []
    for i in range(args.queries):
        document = {"apiVersion": API_VERSION, "kind": "StreamingQuery",
                    "metadata": {"name": f"q{i}", "namespace": "t"},
                    "spec": {"pool": "p", "source": {"type": "rate", "rowsPerSecond": 20},
                             "pipeline": [{"filter": "value % 3 = 0"}], "sink": {"type": "noop"},
                             "sla": {"latencyTarget": "5s"}, "trigger": {"interval": "1s"}}}
        hosted = host.add(load_query(document))
        if hosted.phase != "Running":
            raise SystemExit(f"q{i} did not start: {hosted.message}")
        keys.append(hosted.query.key)
    time.sleep(args.warmup)
    batches0, before, pid0 = sum(host.status(k).batches for k in keys), threads(), last_pid()
    time.sleep(args.seconds)
    batches = sum(host.status(k).batches for k in keys) - batches0
    after, pids = threads(), last_pid() - pid0
    groups: dict[str, float] = defaultdict(float)
    for key, (name, cpu) in after.items():
        side = "python" if key[0] == os.getpid() and key[1] != "children" else "jvm"
        groups[f"{side}: {re.sub(r'[0-9]+', '#', name)}"] += cpu - before.get(key, (name, 0.0))[1]
    phases: dict[str, list[float]] = defaultdict(list)
    for query in spark.streams.active:
        for progress in query.recentProgress:
            for phase, ms in progress["durationMs"].items():
                phases[phase].append(ms)
    per = max(1, batches)
    result: dict[str, Any] = {
        "conf": extra, "batches": batches, "cores": round(sum(groups.values()) / args.seconds, 3),
        "cpu_ms_per_batch": round(1000 * sum(groups.values()) / per, 1),
        "processes_per_batch": round(pids / per, 1) if pids >= 0 else None,
        "phases_ms_median": {phase: statistics.median(ms) for phase, ms in sorted(phases.items())},
        "threads_ms_per_batch": {g: round(1000 * cpu / per, 1) for g, cpu in sorted(groups.items(), key=lambda kv: -kv[1])
                                 if 1000 * cpu / per >= 1},
    }
    print(json.dumps(result, indent=1), flush=True)
    os._exit(0)  # the JVM's threads and the host's need not wind down


if __name__ == "__main__":
    main()
