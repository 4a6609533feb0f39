"""Shared fixtures. Tiers are chosen by marker: spark, cluster, kafka, slow (CI runs all)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# Property tests and the fuzzers are derandomized by default, so `make test` tries the same
# cases on every machine and a failure replays; `--hypothesis-profile=explore` draws fresh ones
# (what a fuzzing session runs; a case it finds is then kept as a named test).
settings.register_profile("replayable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("replayable")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "the chaos tier (tests/chaos)")
    group.addoption("--chaos-rounds", type=int, default=3,
                    help="faults injected per chaos case (make test: 3; a longer soak: more)")
    group.addoption("--chaos-seed", type=int, default=20261124, help="seed of the fault times (a failure prints its seed)")


@pytest.fixture
def chaos_rounds(request: pytest.FixtureRequest) -> int:
    rounds = int(request.config.getoption("--chaos-rounds"))
    if rounds < 1:
        raise pytest.UsageError(f"--chaos-rounds {rounds}: give 1 or more")
    return rounds


@pytest.fixture
def chaos_seed(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--chaos-seed"))


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real single-node Kafka broker (KRaft, jars from Maven Central), shared by the session's tiers."""
    from sluice.testing.kafka import KafkaBroker, KafkaUnavailable
    from sluice.testing.processes import running

    with running(KafkaBroker(Path(tmp_path_factory.mktemp("kafka"))), KafkaUnavailable) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real local SparkSession per test module (FAIR mode with the band ladder)."""
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import SessionConfig, build_session

    stop_session()
    # Spark loads spark.jars.packages only when its JVM starts (once per process), so every test
    # session asks for the Kafka connector: whichever module starts the JVM, Kafka tests work.
    session = build_session(SessionConfig(master="local[2]", kafka=True, workdir=Path(tmp_path_factory.mktemp("spark"))))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real SparkSession in local-cluster mode: a standalone master and three one-core workers
    in this JVM, executors as separate JVMs, so executor targets can be set and met."""
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import SessionConfig, build_session

    stop_session()
    session = build_session(SessionConfig(
        master="local-cluster[3,1,1024]", kafka=True, workdir=Path(tmp_path_factory.mktemp("cluster")),
        extra={"spark.executor.memory": "512m"},
    ))
    yield session
    session.stop()
