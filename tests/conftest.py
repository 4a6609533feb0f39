"""Shared test helpers. Tiers are chosen by marker: spark, cluster, kafka, slow (CI runs all)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
