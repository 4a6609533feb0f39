"""The chaos tier's own broker: a case that kills or restarts it leaves the session's alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.kafka import KafkaBroker, KafkaUnavailable
from sluice.testing.processes import running


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    with running(KafkaBroker(tmp_path / "kafka"), KafkaUnavailable) as kafka:
        yield kafka
