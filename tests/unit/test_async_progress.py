"""Which queries get Spark's async progress tracking (`runtime/streams.async_progress`), and the
setting that turns it on."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.constants import ASYNC_PROGRESS_CONF
from sluice.api.query import StreamingQuery
from sluice.runtime.streams import ASYNC_SINK_CHECK, async_interval_ms, async_progress

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


class _Conf:
    def __init__(self, value: str | None) -> None:
        self.value = value

    def get(self, key: str, default: str) -> str:
        assert key == ASYNC_PROGRESS_CONF
        return default if self.value is None else self.value


class _Session:
    """Stands in for a SparkSession's `conf` (only `get` is read)."""

    def __init__(self, value: str | None) -> None:
        self.conf = _Conf(value)


def test_the_setting_is_whole_milliseconds_or_one_sentence() -> None:
    assert async_interval_ms(_Session("250")) == 250
    assert async_interval_ms(_Session(None)) >= 0
    for bad in ("1s", "-5", ""):
        with pytest.raises(ValueError, match=r"spark\.sluice\.asyncProgress\.intervalMs is .*whole milliseconds"):
            async_interval_ms(_Session(bad))
