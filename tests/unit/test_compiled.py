"""The compiled scheduler core's guard (sluice.compiled): a build older than its sources never runs.

Real files and Python's real import system; the "extension" here is a file of garbage bytes with
an extension's name, which Python would try (and fail) to load before the source beside it."""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import sys
from pathlib import Path

import pytest

from sluice.compiled import MODULES, digests, extensions, guard, stale


def _package(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "alpha.py").write_text("WHERE = 'as compiled'\n")
    (folder / f"alpha{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"not an extension")
    (folder / "mypyc-build.json").write_text(json.dumps({"sources": digests(folder, ["alpha"])}))
    return folder


def test_a_source_edited_after_the_build_runs_from_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _package(tmp_path, "fakecore_edited")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    assert extensions(folder, ["alpha"]) and not stale(folder, ["alpha"])
    assert not guard("fakecore_edited", folder, ["alpha"])
    (folder / "alpha.py").write_text("WHERE = 'edited'\n")
    assert stale(folder, ["alpha"])
    with pytest.raises(ImportError):  # what Python does without the guard: the extension first
        importlib.import_module("fakecore_edited.alpha")
    sys.modules.pop("fakecore_edited.alpha", None)
    assert guard("fakecore_edited", folder, ["alpha"])
    assert importlib.import_module("fakecore_edited.alpha").WHERE == "edited"


def test_a_build_without_its_record_is_stale_and_none_is_not(tmp_path: Path) -> None:
    folder = _package(tmp_path, "fakecore_record")
    (folder / "mypyc-build.json").unlink()
    assert stale(folder, ["alpha"])
    (folder / "mypyc-build.json").write_text("not json")
    assert stale(folder, ["alpha"])
    for extension in extensions(folder, ["alpha"]):
        extension.unlink()
    assert not stale(folder, ["alpha"])  # nothing compiled: nothing to bypass


def test_this_checkout_runs_what_its_build_says() -> None:
    """The real package: compiled exactly when a build is present, matches its sources and is
    not refused by SLUICE_INTERPRETED (after `make compile`, the compiled modules; after an edit
    to a scheduler source, or with no build, the sources)."""
    import os

    from sluice.compiled import INTERPRETED, compiled

    expected = bool(extensions()) and not stale() and not os.environ.get(INTERPRETED)
    assert compiled() == expected
    assert all(name in MODULES for name in ("simulate", "core", "costs", "intervals"))


def test_sluice_interpreted_runs_the_sources_even_from_a_good_build(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _package(tmp_path, "fakecore_switch")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setenv("SLUICE_INTERPRETED", "1")
    assert not stale(folder, ["alpha"])
    assert guard("fakecore_switch", folder, ["alpha"])
    assert importlib.import_module("fakecore_switch.alpha").WHERE == "as compiled"
