"""A real single-node Kafka broker (KRaft, jars from Maven Central) per session; a Kafka-ready Spark per module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.kafka import KafkaBroker, KafkaUnavailable


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    kafka = KafkaBroker(Path(tmp_path_factory.mktemp("kafka")))
    try:
        kafka.start()
    except KafkaUnavailable as error:
        pytest.fail(str(error), pytrace=False)  # never a silent skip
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def topic(broker: KafkaBroker) -> str:
    return broker.create_topic(f"t-{uuid.uuid4().hex[:10]}", partitions=2)


@pytest.fixture(scope="module")
def kafka_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import SessionConfig, build_session, kafka_package

    stop_session()
    try:
        session = build_session(SessionConfig(master="local[2]", kafka=True, workdir=Path(tmp_path_factory.mktemp("spark"))))
    except Exception as error:
        pytest.fail(f"Spark's Kafka connector {kafka_package()} could not be resolved from Maven Central: {str(error).splitlines()[0][:300]}", pytrace=False)
    yield session
    session.stop()
