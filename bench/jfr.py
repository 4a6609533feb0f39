"""A JDK Flight Recorder profile of a running JVM over a benchmark's window, and where its Java
threads spent their samples.

Started and stopped with the JDK's `jcmd` (no launch option: a side's JVM runs as it would
without the profile until its window), read back with the JDK's `jfr print --json`. JFR samples
threads running Java code (`jdk.ExecutionSample`, every 10-20 ms a thread with the `profile`
settings): the JIT compilers and the garbage collector are native threads and are not in it
(`procfs.THREAD_KINDS` counts them). The recording stays in the side's folder; results.json
keeps the summary (`hottest`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from .procfs import tree

RECORDING = "sluice-bench"
SETTINGS = "profile"
TOP = 12
"""Methods kept in a summary (by samples at the top of the stack)."""
AREAS = {
    "janino": ("org.codehaus.janino", "org.codehaus.commons.compiler"),
    "codegen": ("org.apache.spark.sql.catalyst.expressions.codegen", "org.apache.spark.sql.execution.WholeStageCodegen"),
    "catalyst": ("org.apache.spark.sql.catalyst",),
    "streaming": ("org.apache.spark.sql.execution.streaming",),
    "kafka": ("org.apache.kafka", "org.apache.spark.sql.kafka010"),
    "hadoop fs": ("org.apache.hadoop",),
    "ui and listeners": ("org.apache.spark.status", "org.apache.spark.ui", "org.apache.spark.scheduler.AsyncEventQueue"),
    "closure cleaning": ("org.apache.spark.util.ClosureCleaner", "org.apache.spark.util.SparkClosureCleaner"),
    "sluice": ("dev.sluice",),
}
"""Share of samples with a frame of each area anywhere on the stack (areas overlap: codegen is
inside catalyst's packages, Janino runs under codegen)."""


class ProfileError(RuntimeError):
    """The JDK's tools could not record or read a profile."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ProfileError(f"`{name}` is not on PATH: --jfr needs a JDK's tools (jcmd, jfr)")
    return found


def jvm_of(pid: int) -> int:
    """The Java process among `pid` and its descendants (a runtime's driver JVM)."""
    for p in tree(pid):
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == "java":
                return p
        except OSError:
            continue
    raise ProfileError(f"no Java process under pid {pid}")


def start(jvm: int, path: Path) -> None:
    """Begin recording `jvm` into `path` (written when `stop` is called)."""
    _run([_tool("jcmd"), str(jvm), "JFR.start", f"name={RECORDING}", f"settings={SETTINGS}", f"filename={path}"])


def stop(jvm: int) -> None:
    _run([_tool("jcmd"), str(jvm), "JFR.stop", f"name={RECORDING}"])


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise ProfileError(f"{' '.join(command[1:3])}: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout


def samples(path: Path) -> list[list[str]]:
    """Each execution sample's stack as `class.method` names, top first."""
    events = json.loads(_run([_tool("jfr"), "print", "--json", "--events", "jdk.ExecutionSample", str(path)]))
    out = []
    for event in events["recording"]["events"]:
        frames = ((event.get("values") or {}).get("stackTrace") or {}).get("frames") or []
        out.append([f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}" for f in frames
                    if f.get("method")])
    return out


def hottest(stacks: list[list[str]], top: int = TOP) -> dict[str, Any]:
    """The summary results.json keeps (pure): samples, the methods most often at the top of the
    stack with their share, and each of `AREAS`' share of samples anywhere on the stack."""
    count = len(stacks)
    if not count:
        return {"samples": 0, "top_methods": [], "areas": {}}
    tops = Counter(stack[0] for stack in stacks if stack)
    areas = {area: round(sum(any(frame.startswith(prefixes) for frame in stack) for stack in stacks) / count, 3)
             for area, prefixes in AREAS.items()}
    return {"samples": count, "top_methods": [[name, round(n / count, 3)] for name, n in tops.most_common(top)],
            "areas": areas}
