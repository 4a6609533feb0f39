"""Which queries get Spark's async progress tracking (`runtime/streams.async_progress`), the setting
that turns it on, and the runtime's refusal of a bad one of its own settings."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from sluice.api.constants import ASYNC_PROGRESS_MS
from sluice.api.query import StreamingQuery
from sluice.runtime.session import async_progress_ms
from sluice.runtime.streams import ASYNC_SINK_CHECK, async_progress

KAFKA = {"type": "kafka", "bootstrapServers": "k:9092", "topic": "out"}
COUNT = [{"groupBy": ["value"]}, {"aggregate": [{"fn": "count", "name": "n"}]}]


def _query(sink: dict[str, Any], pipeline: list[dict[str, Any]] | None = None) -> StreamingQuery:
    return StreamingQuery.model_validate({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": "q", "namespace": "t"},
        "spec": {"pool": "p", "source": {"type": "rate", "rowsPerSecond": 10},
                 "pipeline": pipeline or [{"filter": "value > 1"}], "sink": sink,
                 "sla": {"latencyTarget": "2s"}},
    })


@pytest.mark.parametrize("sink", [{"type": "noop"}, KAFKA | {"delivery": "atLeastOnce"}])
def test_a_stateless_query_delivered_at_least_once_gets_it_with_the_interval(sink: dict[str, Any]) -> None:
    options = async_progress(_query(sink), 1000)
    assert options == {"asyncProgressTrackingEnabled": "true", "asyncProgressTrackingCheckpointIntervalMs": "1000",
                       ASYNC_SINK_CHECK: "true"}


@pytest.mark.parametrize("sink,pipeline", [
    (KAFKA, None),  # exactly once: the default delivery
    (KAFKA | {"delivery": "exactlyOnce"}, None),
    ({"type": "noop"}, COUNT),  # state: Spark refuses it
    ({"type": "memory"}, None),  # written through foreachBatch
])
def test_a_query_that_cannot_replay_or_keeps_state_does_not(sink: dict[str, Any],
                                                            pipeline: list[dict[str, Any]] | None) -> None:
    assert async_progress(_query(sink, pipeline), 1000) == {}


def test_off_at_zero() -> None:
    assert async_progress(_query({"type": "noop"}), 0) == {}


def test_the_setting_is_whole_milliseconds_or_one_sentence() -> None:
    assert async_progress_ms("250") == 250
    assert async_progress_ms(None) == ASYNC_PROGRESS_MS
    for bad in ("1s", "-5", ""):
        with pytest.raises(ValueError, match=r"--conf spark\.sluice\.asyncProgress\.intervalMs=.*whole milliseconds"):
            async_progress_ms(bad)


@pytest.mark.parametrize("setting,sentence", [
    ("spark.sluice.asyncProgress.intervalMs=1s", "give whole milliseconds, 0 or more (0: off)."),
    ("spark.sluice.warmup.maxSeconds=abc", "give seconds, 0 or more (0: no warm-up)."),
])
def test_the_runtime_refuses_a_bad_setting_in_one_sentence_before_spark_starts(setting: str, sentence: str) -> None:
    done = subprocess.run([sys.executable, "-m", "sluice.runtime", "--port", "0", "--conf", setting],
                          env={**os.environ, "SLUICE_CONTROL_TOKEN": "t"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].endswith(sentence)
    assert "Traceback" not in done.stderr
