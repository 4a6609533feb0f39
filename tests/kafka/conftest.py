"""A real single-node Kafka broker (KRaft, jars from Maven Central) per session; a Kafka-ready Spark per module."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sluice.testing.kafka import KafkaBroker


@pytest.fixture
def topic(broker: KafkaBroker) -> str:
    return broker.create_topic(f"t-{uuid.uuid4().hex[:10]}", partitions=2)


@pytest.fixture(scope="module")
def kafka_spark(spark: Any) -> Any:
    """The shared session (it always carries the Kafka connector); fails in one sentence without it."""
    from sluice.runtime.session import kafka_package

    jars = spark.sparkContext._jsc.sc().listJars().mkString(",")  # jars added by spark.jars.packages
    if "spark-sql-kafka" not in jars:
        pytest.fail(f"Spark's Kafka connector {kafka_package()} is not on the classpath: it could not be resolved from Maven Central.", pytrace=False)
    return spark
