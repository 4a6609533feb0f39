"""Child processes that never outlive a killed test run.

Each started process gets a pidfile `RUN_DIR/<name>-<pid>.pid` holding "<pid> <owner pid>". A
process whose owner (the run that started it) is gone is a leftover: the next run reaps it. A
process whose owner still runs belongs to a concurrent run and is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

RUN_DIR = Path(os.environ.get("SLUICE_CACHE", Path.home() / ".cache" / "sluice")) / "run"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def spawn(name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None,
          owner: int | None = None) -> subprocess.Popen[bytes]:
    """Start a process in its own session, logging to `log`, with an owner-stamped pidfile.

    `owner` defaults to this process; a long-lived cluster (`sluice dev cluster up`) passes 1,
    so no later run reaps it."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        proc = subprocess.Popen(list(args), stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    (RUN_DIR / f"{name}-{proc.pid}.pid").write_text(f"{proc.pid} {owner or os.getpid()}")
    return proc


def stop(name: str, proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM the process group, SIGKILL after `timeout`, forget the pidfile."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
    (RUN_DIR / f"{name}-{proc.pid}.pid").unlink(missing_ok=True)


def reap_leftovers(markers: Sequence[str]) -> list[int]:
    """Kill leftovers of dead runs whose command line contains one of `markers`; returns their pids."""
    reaped: list[int] = []
    if not RUN_DIR.exists():
        return reaped
    for pidfile in RUN_DIR.glob("*.pid"):
        try:
            pid, owner = (int(x) for x in pidfile.read_text().split())
        except ValueError:
            pidfile.unlink(missing_ok=True)
            continue
        if alive(owner):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if any(marker in cmdline for marker in markers):
                os.killpg(pid, signal.SIGKILL)
                reaped.append(pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
        pidfile.unlink(missing_ok=True)
    return reaped


class Service(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Service)


@contextlib.contextmanager
def running(service: S, unavailable: type[Exception]) -> Iterator[S]:
    """A test fixture's service: started, yielded, stopped (also if the session is interrupted).

    A start that raises `unavailable` fails the test with its one sentence: never a silent skip."""
    import atexit

    import pytest

    atexit.register(service.stop)
    try:
        service.start()
    except unavailable as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield service
    finally:
        service.stop()
