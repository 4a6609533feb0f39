"""Fixtures of the Spark tier's runtime tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.runtime.host import QueryHost


@pytest.fixture
def host_factory(spark: Any, tmp_path: Path) -> Iterator[Any]:
    """Makes QueryHosts on the module's session (`make(gate, checkpoints, **options)`); stops them after."""
    hosts: list[QueryHost] = []

    def make(gate: Any = None, checkpoints: Path | None = None, **options: Any) -> QueryHost:
        host = QueryHost(spark, checkpoints or tmp_path / "checkpoints", gate, **options)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.stop_all()
