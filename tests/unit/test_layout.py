"""Packaging: component folders import as sluice.X and never shadow the standard library."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bare_operator_is_the_standard_library_even_from_the_repo_root() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import operator, sys; print(operator.__file__); print(operator.itemgetter)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    location = Path(proc.stdout.splitlines()[0]).resolve()
    assert location.is_relative_to(Path(sysconfig.get_paths()["stdlib"]).resolve())


def test_components_import_under_sluice() -> None:
    code = "import sluice.api.query, sluice.api.crd; print(sluice.api.query.__file__)"
    proc = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60, check=True)
    assert Path(proc.stdout.strip()).resolve() == (ROOT / "api" / "query.py").resolve()
