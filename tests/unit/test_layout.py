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


def _lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` (import-linter, as `make lint` runs it) on the `sluice` package found first in
    `source_root`, with the contracts of the project's pyproject.toml."""
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(source_root), "HOME": str(source_root)}
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache", str(ROOT / "pyproject.toml")],
                          cwd=source_root, env=env, capture_output=True, text=True, timeout=120)


def test_the_layers_hold_and_a_wrong_import_breaks_them(tmp_path: Path) -> None:
    """The layers (api <- scheduler <- runtime | operator <- bench <- cli; sluice.testing never in the
    product) and the absence of import circles hold on the tree; a copy of the tree with one upward
    import, or two modules importing each other (one only for type checking), does not pass."""
    import shutil

    kept = _lint_imports(ROOT / "src")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "3 kept, 0 broken" in kept.stdout

    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src", copy, symlinks=False, ignore=shutil.ignore_patterns("results", "__pycache__"))
    (copy / "sluice" / "runtime" / "scratch_wrong.py").write_text("from sluice.operator import kube  # noqa\n")
    (copy / "sluice" / "scheduler" / "scratch_kit.py").write_text("from sluice.testing import load  # noqa\n")
    (copy / "sluice" / "runtime" / "scratch_a.py").write_text("from sluice.runtime import scratch_b  # noqa\n")
    (copy / "sluice" / "runtime" / "scratch_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sluice.runtime import scratch_a  # noqa\n")
    broken = _lint_imports(copy)
    assert broken.returncode != 0
    assert "sluice.runtime.scratch_wrong -> sluice.operator.kube" in broken.stdout
    assert "sluice.scheduler.scratch_kit -> sluice.testing.load" in broken.stdout
    assert ".scratch_a -> .scratch_b" in broken.stdout or ".scratch_b -> .scratch_a" in broken.stdout


def test_the_operator_writes_status_only_through_the_status_models() -> None:
    """`operator/status.py` is the one place a status key is written (through the api's status
    models); a handler writing `patch.status[...]` by hand would bypass the models' types."""
    import re

    by_hand = [f"{path.name}:{n}" for path in sorted((ROOT / "operator").glob("*.py")) if path.name != "status.py"
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"patch\s*\.\s*status\s*(\[|\.update|\.setdefault|\s*=)", line)]
    assert by_hand == []
