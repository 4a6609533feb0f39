"""PySpark's hold on the driver JVM's process (`gateway.proc`, a private attribute), which the
runtime polls to notice its driver's death at once. Fails loudly if a PySpark upgrade moves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.runtime.session import driver_process

pytestmark = [pytest.mark.spark]


def test_pyspark_keeps_the_driver_jvms_process(spark: Any) -> None:
    proc = driver_process(spark)
    assert proc is not None, "PySpark no longer keeps the JVM's Popen as `sparkContext._gateway.proc`"
    assert proc.poll() is None  # the session's JVM runs
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "java"  # spark-submit exec'd the JVM
    assert b"org.apache.spark.deploy.SparkSubmit" in cmdline
