"""The JVM sink's Python side: which jar a session loads, and how a batch's report becomes latency."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from sluice.runtime import jvm_sink
from sluice.runtime.intake import sink_report as _sink_report
from sluice.runtime.jvm_sink import SinkMetric


@pytest.fixture(autouse=True)
def fresh_jar_lookup() -> Iterator[None]:
    jvm_sink.jar.cache_clear()
    yield
    jvm_sink.jar.cache_clear()


def test_a_baked_jar_is_used_as_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    baked = tmp_path / "sluice-sink.jar"
    baked.write_bytes(b"PK")
    monkeypatch.setenv(jvm_sink.JAR_ENV, str(baked))
    assert jvm_sink.jar() == baked
    assert jvm_sink.session_conf() == {"spark.driver.extraClassPath": str(baked),
                                       "spark.executor.extraClassPath": str(baked),
                                       "spark.sql.streaming.checkpointFileManagerClass": jvm_sink.CHECKPOINT_MANAGER}


def test_a_missing_baked_jar_or_the_switch_means_foreach_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(jvm_sink.JAR_ENV, str(tmp_path / "absent.jar"))
    assert jvm_sink.jar() is None and jvm_sink.session_conf() == {}
    assert "does not exist; batches go through foreachBatch" in caplog.text
    jvm_sink.jar.cache_clear()
    monkeypatch.setenv(jvm_sink.JAR_ENV, str(tmp_path))
    monkeypatch.setenv(jvm_sink.SWITCH_ENV, "0")
    assert jvm_sink.jar() is None


def test_a_batch_report_gives_production_times_oldest_first() -> None:
    """The sink reports ages at 1 - q for each grid quantile q (the host asks for them so), so the
    i-th production time is the i-th quantile, oldest first."""
    metrics = {SinkMetric.BATCH: "4", SinkMetric.COMMITTED: "1000500", SinkMetric.BEGAN: "1000000", SinkMetric.ROWS: "7",
               SinkMetric.AGES: "3000.0,2000.0,0.0"}
    report = _sink_report(SimpleNamespace(batchId=4, sink=SimpleNamespace(metrics=metrics)))
    assert report is not None
    assert (report.rows, report.began, report.committed) == (7, 1000.0, 1000.5)
    assert report.produced == [997.0, 998.0, 1000.0]
    empty = _sink_report(SimpleNamespace(batchId=4, sink=SimpleNamespace(metrics={**metrics, SinkMetric.AGES: ""})))
    assert empty is not None and empty.produced == []
    # a progress that carries an earlier batch's report is not taken for its own
    assert _sink_report(SimpleNamespace(batchId=5, sink=SimpleNamespace(metrics=metrics))) is None


def test_a_progress_without_the_sink_s_report_is_the_observed_path() -> None:
    assert _sink_report(SimpleNamespace(batchId=1, sink=SimpleNamespace(metrics={}))) is None
    assert _sink_report(SimpleNamespace(batchId=1, sink=None)) is None


def test_the_sinks_build_file_pins_the_spark_that_pyproject_pins() -> None:
    """One Spark version: pyproject's pyspark pin, the sink's build file and the Dockerfiles' builds."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pinned = re.search(r'"pyspark==([0-9.]+)"', (root / "pyproject.toml").read_text())
    pom = re.search(r"<spark.version>([0-9.]+)</spark.version>", (root / "runtime" / "java" / "pom.xml").read_text())
    assert pinned and pom and pinned.group(1) == pom.group(1)
    docker = (root / "images" / "runtime.Dockerfile").read_text()
    assert "-f /java/pom.xml" in docker and f"-Dspark.version={pinned.group(1)}" in docker
