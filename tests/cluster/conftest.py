"""Session fixture: one real etcd + kube-apiserver for the cluster tier, torn down even on failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.controlplane import ControlPlane, ControlPlaneError, build_binaries
from sluice.testing.processes import running

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        kube, helm = build_binaries()[:2]
    except ControlPlaneError as error:
        pytest.fail(str(error), pytrace=False)  # never a silent skip
    with running(ControlPlane(kube, helm, tmp_path_factory.mktemp("controlplane")), ControlPlaneError) as plane:
        yield plane


@pytest.fixture(scope="session")
def crds_installed(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        "crd/streamingqueries.sluice.dev", "crd/streamingpools.sluice.dev",
    )
    return control_plane
