"""Spark's streaming query events, delivered to Python in one py4j call each.

PySpark's own listener bridge turns every progress event into Python with one py4j round trip per
field: ids, durations (a Java map walked entry by entry), every source, state operator and sink,
and each observed row. That is about a hundred round trips per batch, each of which waits for the
GIL while the pool's batch threads hold it. Measured here with ten light queries on `local[2]`:
events reached the host 25-30 s after their batch committed and fell further behind with each
query added, until a batch's progress came after the host had forgotten the batch and its
latency was never counted.

This bridge asks the JVM for the progress once, as Spark's own JSON (`StreamingQueryProgress.json`),
and builds PySpark's `StreamingQueryProgress` from it in Python (`fromJson`, the form Spark
Connect uses), so the event is the same object the listener always received.

Reached through py4j (PySpark's private `_jlistener` hook and the JVM's
`PythonStreamingQueryListenerWrapper`): `tests/spark/test_listener.py` fails loudly when a Spark
upgrade changes either.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class _Bridge:
    """The py4j side of `org.apache.spark.sql.streaming.PythonStreamingQueryListener`."""

    def __init__(self, on_started: Callable[[str], None] | None, on_progress: Callable[[str, Any], None] | None,
                 on_idle: Callable[[str], None] | None) -> None:
        self.on_started, self.on_progress, self.on_idle = on_started, on_progress, on_idle

    def onQueryStarted(self, jevent: Any) -> None:
        if self.on_started is not None:
            self.on_started(str(jevent.name()))

    def onQueryProgress(self, jevent: Any) -> None:
        if self.on_progress is not None:
            from pyspark.sql.streaming.listener import StreamingQueryProgress

            progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
            self.on_progress(str(progress.name), progress)

    def onQueryIdle(self, jevent: Any) -> None:
        if self.on_idle is not None:
            self.on_idle(str(jevent.id().toString()))

    def onQueryTerminated(self, jevent: Any) -> None:
        return None

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def listen(spark: Any, on_progress: Callable[[str, Any], None] | None = None,
           on_started: Callable[[str], None] | None = None, on_idle: Callable[[str], None] | None = None) -> Any:
    """Attach a listener calling back with (query name, progress), (query name) and, for a query
    with no new data, (Spark's query id). Returns it (`spark.streams.removeListener` takes it)."""
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            return None

        def onQueryProgress(self, event: Any) -> None:
            return None

        def onQueryIdle(self, event: Any) -> None:
            return None

        def onQueryTerminated(self, event: Any) -> None:
            return None

        @property
        def _jlistener(self) -> Any:
            """The JVM object PySpark's addListener and removeListener use (its private hook),
            built by addListener once it has imported the JVM's streaming classes."""
            if self._bridged is None:
                self._bridged = SparkContext._jvm.PythonStreamingQueryListenerWrapper(bridge)  # type: ignore[union-attr]
            return self._bridged

        _bridged: Any = None

    bridge = _Bridge(on_started, on_progress, on_idle)
    listener = Listener()
    spark.streams.addListener(listener)
    return listener
