"""Per-stage task metrics from Spark's status REST API, attributed to queries and batches.

The gate names every batch's jobs `sluice <tenant/name> batch <id>`; completed stages carry that
description, so each stage's run time, CPU time, shuffle fetch wait and records can be summed per
query (for DS2's true processing rate: useful time = run time - shuffle fetch wait) and per
batch (for the critical path). `parse_stages` is pure; `StagePoller` is the thin thread around it.

Under FAIR scheduling stages finish out of order (stage 9 may complete after stage 10), so the
poller remembers which stage attempts it has taken, not the highest id. The memory is bounded
by what Spark lists: an attempt Spark no longer lists never comes back, so it is forgotten.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Callable, Container
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .critical_path import StageSpan

_DESCRIPTION = re.compile(r"sluice (\S+/\S+) batch (\d+)")


def job_description(key: str, batch_id: int | None = None) -> str:
    """What a batch's jobs are named (`_DESCRIPTION`); without a batch id, the part before it (the
    JVM sink appends the id itself)."""
    return f"sluice {key} batch " + ("" if batch_id is None else str(batch_id))


@dataclass(frozen=True, slots=True)
class StageCost:
    stage_id: int
    query: str
    batch_id: int
    name: str
    run_seconds: float
    cpu_seconds: float
    shuffle_fetch_wait_seconds: float
    input_records: int
    shuffle_read_records: int
    submitted: float = 0.0
    """Epoch seconds; with first_task and completed: the stage's place on the batch's timeline."""
    first_task: float = 0.0
    completed: float = 0.0
    tasks: int = 0
    """The stage's tasks (its partitions): how many cores it can use at once."""

    @property
    def span(self) -> StageSpan | None:
        """The stage's place on its batch's timeline (critical path), if Spark gave its times."""
        if not (self.submitted and self.completed):
            return None
        return StageSpan(self.name.split(" at ")[0], self.submitted, self.first_task or self.submitted, self.completed)

    @property
    def useful_seconds(self) -> float:
        """Task time doing work (DS2): run time minus waiting for shuffle data."""
        return max(self.run_seconds - self.shuffle_fetch_wait_seconds, 0.0)


def spark_time(text: Any) -> float:
    """The status API's dates ('2026-11-21T10:00:00.123GMT') as epoch seconds; 0 if absent."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(str(text).replace("GMT", "+00:00")).timestamp()
    except ValueError:
        return 0.0


StageAttempt = tuple[int, int]
"""(stage id, attempt id): a retried stage's attempts each did work."""


def attempt_of(stage: dict[str, Any]) -> StageAttempt:
    return int(stage.get("stageId", -1)), int(stage.get("attemptId", 0))


def completed_attempts(stages: list[dict[str, Any]]) -> set[StageAttempt]:
    """Every completed stage attempt Spark lists now (sluice's or not)."""
    return {attempt_of(s) for s in stages if s.get("status") == "COMPLETE"}


def parse_stages(stages: list[dict[str, Any]], seen: Container[StageAttempt]) -> list[StageCost]:
    """Completed sluice stages not in `seen`, from /api/v1/applications/<app>/stages, by stage id."""
    out = []
    for stage in stages:
        if stage.get("status") != "COMPLETE" or attempt_of(stage) in seen:
            continue
        match = _DESCRIPTION.search(stage.get("description") or "")
        if not match:
            continue
        out.append(StageCost(
            int(stage["stageId"]), match.group(1), int(match.group(2)), str(stage.get("name", "")),
            stage.get("executorRunTime", 0) / 1000, stage.get("executorCpuTime", 0) / 1e9,
            stage.get("shuffleFetchWaitTime", 0) / 1000, int(stage.get("inputRecords", 0)),
            int(stage.get("shuffleReadRecords", 0)), spark_time(stage.get("submissionTime")), spark_time(stage.get("firstTaskLaunchedTime")),
            spark_time(stage.get("completionTime")), int(stage.get("numTasks", 0)),
        ))
    return sorted(out, key=lambda s: s.stage_id)


class StagePoller:
    """Polls the driver's status API every `interval` seconds and hands new stage costs to `sink`."""

    def __init__(self, ui_url: str, app_id: str, sink: Callable[[list[StageCost]], None], interval: float = 2.0) -> None:
        self.url = f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}/stages?status=complete"
        self.sink = sink
        self.interval = interval
        self.seen: set[StageAttempt] = set()
        """Completed attempts already handed on, among those Spark still lists."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-stages", daemon=True)

    def start(self) -> StagePoller:
        self._thread.start()
        return self

    def poll(self) -> list[StageCost]:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            listed = json.loads(response.read())
        stages = parse_stages(listed, self.seen)
        self.seen = completed_attempts(listed)
        if stages:
            self.sink(stages)
        return stages

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except (OSError, ValueError):
                continue  # the UI may be restarting; try again next round

    def stop(self) -> None:
        self._stop.set()
