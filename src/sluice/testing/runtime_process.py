"""The pool runtime as its own process (`python -m sluice.runtime`, local Spark), as its pod runs
it: one process group (Python and Spark's JVM) on one work directory, reached through its
control API with a token. The chaos tier kills and restarts it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from sluice.api.constants import CRITICAL_LANE, RUNTIME_CAPACITY
from sluice.api.wire import QueryStatus
from sluice.operator.runtime_client import RuntimeClient, RuntimeUnreachable, healthy

from .load import EVENT_SCHEMA
from .processes import spawn, stop
from .waiting import wait_for

TOKEN = "test-token"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RuntimeProcess:
    def __init__(self, workdir: Path, master: str = "local[2]", conf: tuple[str, ...] = (),
                 capacity: int = RUNTIME_CAPACITY, critical_lane: int = CRITICAL_LANE, timeout: float = 60) -> None:
        self.workdir = workdir
        self.master = master
        self.capacity = capacity  # the in-process scheduler's: batches granted at once
        self.critical_lane = critical_lane  # and its slots beyond it for critical queries' batches
        self.conf = conf  # Spark settings (KEY=VALUE), each passed as `--conf`
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = RuntimeClient(self.url, TOKEN, timeout=timeout)  # a call's answer, at most (seconds)
        self.proc: Any = None
        self.starts = 0

    def start(self, timeout: float = 120) -> None:
        self.starts += 1
        log = self.workdir / f"runtime-{self.starts}.log"
        env = {**os.environ, "SLUICE_CONTROL_TOKEN": TOKEN}
        self.proc = spawn("runtime", [sys.executable, "-m", "sluice.runtime", "--master", self.master,
                                      "--host", "127.0.0.1", "--port", str(self.port), "--workdir", str(self.workdir),
                                      "--scheduler", "inprocess", "--policy", "cameo", "--capacity", str(self.capacity),
                                      "--critical-lane", str(self.critical_lane),
                                      *(a for c in self.conf for a in ("--conf", c))], log, env=env)
        wait_for(lambda: self.proc.poll() is None and asyncio.run(healthy(self.url)), timeout,
                 f"the runtime's control API (log: {log})", every=0.5)

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown hook, no stop of a query, no flush."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        stop("runtime", self.proc)  # forgets the pidfile

    def kill_driver(self) -> int:
        """SIGKILL the Spark driver's JVM alone (the runtime's Python lives on), as the kernel's OOM
        killer or a JVM crash would; returns its pid."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        java = [int(c) for c in children if Path(f"/proc/{c}/comm").read_text().strip() == "java"]
        assert len(java) == 1, f"the runtime's children {children}: expected one JVM"
        os.kill(java[0], signal.SIGKILL)
        return java[0]

    def kill_executor(self, rng: Any) -> int:
        """SIGKILL one of the runtime's executor JVMs (local-cluster mode: a JVM apart from the
        driver's, Spark's CoarseGrainedExecutorBackend), picked by `rng`; returns its pid."""
        executors = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if b"CoarseGrainedExecutorBackend" in (proc / "cmdline").read_bytes() and self._descends(int(proc.name)):
                    executors.append(int(proc.name))
            except OSError:
                continue
        assert executors, f"the runtime ({self.master}) has no executor JVM of its own"
        pid = rng.choice(sorted(executors))
        os.kill(pid, signal.SIGKILL)
        return int(pid)

    def _descends(self, pid: int) -> bool:
        while pid > 1:
            if pid == self.proc.pid:
                return True
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return False

    def stop(self) -> None:
        if self.proc is not None:
            stop("runtime", self.proc)

    def register(self, manifest: dict[str, Any]) -> None:
        asyncio.run(self.client.register(manifest))

    def status(self, namespace: str, name: str) -> QueryStatus | None:
        try:
            return asyncio.run(self.client.status(namespace, name))
        except RuntimeUnreachable:
            return None


def kafka_to_files(bootstrap: str, topic: str, out: Path) -> dict[str, Any]:
    """A Kafka-to-files query (the files sink is exactly-once: each batch overwrites its own
    `batch_id=N/` directory, so a replay after a crash never duplicates rows)."""
    return {
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery",
        "metadata": {"name": "orders", "namespace": "chaos"},
        "spec": {"pool": "p", "sla": {"latencyTarget": "5s"}, "trigger": {"interval": "300ms"},
                 "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "schema": EVENT_SCHEMA,
                            "startingOffsets": "earliest"},
                 "pipeline": [{"select": ["key", "seq", "amount"]}],
                 "sink": {"type": "files", "format": "json", "path": str(out)},
                 "resources": {"shufflePartitions": 2}},
    }


def sink_seqs(out: Path) -> list[int]:
    """Every row the sink holds: the files of each finished `batch_id=N/` directory (one with
    Spark's `_SUCCESS`; a killed write leaves none, or files under `_temporary`, and its replay
    overwrites the directory)."""
    seqs = []
    for done in sorted(out.glob("batch_id=*/_SUCCESS")):
        for part in sorted(done.parent.glob("part-*.json")):
            seqs += [json.loads(line)["seq"] for line in part.read_text().splitlines() if line.strip()]
    return seqs
