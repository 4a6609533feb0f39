"""Per-stage task metrics from Spark's status REST API, attributed to queries and batches.

The gate names every batch's jobs `sluice <tenant/name> batch <id>`; completed stages carry that
description, so each stage's run time, CPU time, shuffle fetch wait and records can be summed per
query (for DS2's true processing rate: useful time = run time - shuffle fetch wait) and per
batch (for the critical path). `parse_stages` is pure; `StagePoller` is the thin thread around it.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_DESCRIPTION = re.compile(r"sluice (\S+/\S+) batch (\d+)")


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
    output_records: int
    shuffle_read_records: int
    shuffle_write_records: int
    tasks: int
    submitted: float = 0.0
    """Epoch seconds; with first_task and completed: the stage's place on the batch's timeline."""
    first_task: float = 0.0
    completed: float = 0.0

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


def parse_stages(stages: list[dict[str, Any]], after: int) -> list[StageCost]:
    """Completed sluice stages with an id above `after`, from /api/v1/applications/<app>/stages."""
    out = []
    for stage in stages:
        if stage.get("status") != "COMPLETE" or int(stage.get("stageId", -1)) <= after:
            continue
        match = _DESCRIPTION.search(stage.get("description") or "")
        if not match:
            continue
        out.append(StageCost(
            int(stage["stageId"]), match.group(1), int(match.group(2)), str(stage.get("name", "")),
            stage.get("executorRunTime", 0) / 1000, stage.get("executorCpuTime", 0) / 1e9,
            stage.get("shuffleFetchWaitTime", 0) / 1000, int(stage.get("inputRecords", 0)),
            int(stage.get("outputRecords", 0)), int(stage.get("shuffleReadRecords", 0)),
            int(stage.get("shuffleWriteRecords", 0)), int(stage.get("numCompleteTasks", 0)),
            spark_time(stage.get("submissionTime")), spark_time(stage.get("firstTaskLaunchedTime")),
            spark_time(stage.get("completionTime")),
        ))
    return sorted(out, key=lambda s: s.stage_id)


class StagePoller:
    """Polls the driver's status API every `interval` seconds and hands new stage costs to `sink`."""

    def __init__(self, ui_url: str, app_id: str, sink: Callable[[list[StageCost]], None], interval: float = 2.0) -> None:
        self.url = f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}/stages?status=complete"
        self.sink = sink
        self.interval = interval
        self.last = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-stages", daemon=True)

    def start(self) -> StagePoller:
        self._thread.start()
        return self

    def poll(self) -> list[StageCost]:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            stages = parse_stages(json.loads(response.read()), self.last)
        if stages:
            self.last = stages[-1].stage_id
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
