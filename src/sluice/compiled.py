"""The scheduler core compiled with mypyc, and the guard that keeps a stale build from running.

The what-if simulation (`sluice simulate`, `sluice size`, the operator's SLA-aware sizing) spends
its time in a few pure modules: the scheduler core it drives and the simulation's event loop.
`make compile` (part of `make test` and `make demo`) builds them with mypyc, mypy's compiler of
typed Python to C extensions: `python -m sluice.compiled` writes each module's extension beside
its source and each source's SHA-256 to `scheduler/mypyc-build.json`. Nothing else changes: the
same code, the same figures (`sluice bench simulate` records which ran).

Python loads an extension before a source of the same name, so a source edited after the build
would silently not run. At `import sluice` (before any of these modules can load) `guard` reads
the build's hashes: where a source differs from what was compiled, or the record is gone, every
module of the build loads from its source instead (they are compiled as one group and call each
other natively, so they are taken all or none). `make compile` builds them again.
`SLUICE_INTERPRETED=1` runs the sources whatever was built (to profile them, or to measure the
build against them side by side).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = "sluice.scheduler"
MODULES = ("bands", "core", "cores", "costs", "intervals", "policies", "simulate")
"""The modules compiled: the simulation's event loop and everything it calls per event."""
GROUP = "sluice_core"
"""mypyc's name for the shared library the modules are compiled into (`sluice_core__mypyc`)."""
SRC = Path(__file__).resolve().parent.parent
"""The folder holding the `sluice` package (`src/`): the build's working directory."""
FOLDER = Path(__file__).parent / "scheduler"
RECORD = FOLDER / "mypyc-build.json"
INTERPRETED = "SLUICE_INTERPRETED"
"""Set (to anything but empty): the modules load from their sources even from a good build."""


def digests(folder: Path = FOLDER, modules: Sequence[str] = MODULES) -> dict[str, str]:
    """Each module's source's SHA-256 (a missing source: "")."""
    out = {}
    for name in modules:
        path = folder / f"{name}.py"
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return out


def extensions(folder: Path = FOLDER, modules: Sequence[str] = MODULES) -> list[Path]:
    """The modules' compiled extensions present in `folder` (for any Python)."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return [folder / f"{name}{suffix}" for name in modules for suffix in suffixes
            if (folder / f"{name}{suffix}").exists()]


def stale(folder: Path = FOLDER, modules: Sequence[str] = MODULES) -> bool:
    """Whether extensions are present that were not compiled from the sources beside them."""
    if not extensions(folder, modules):
        return False
    record = folder / RECORD.name
    try:
        built = json.loads(record.read_text())
    except (OSError, ValueError):
        return True
    return not isinstance(built, dict) or built.get("sources") != digests(folder, modules)


class Sources(importlib.abc.MetaPathFinder):
    """Loads `package`'s `modules` from their `.py` files in `folder`, whatever extension is there."""

    def __init__(self, package: str, folder: Path, modules: Sequence[str]) -> None:
        self.names = {f"{package}.{name}": folder / f"{name}.py" for name in modules}

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        source = self.names.get(fullname)
        if source is None or not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def guard(package: str = PACKAGE, folder: Path = FOLDER, modules: Sequence[str] = MODULES) -> bool:
    """Bypass a stale build, or any with `SLUICE_INTERPRETED` set (see the module's docstring);
    True if one was bypassed."""
    forced = bool(os.environ.get(INTERPRETED)) and bool(extensions(folder, modules))
    if not forced and not stale(folder, modules):
        return False
    if not any(isinstance(f, Sources) and f.names.keys() >= {f"{package}.{m}" for m in modules}
               for f in sys.meta_path):
        sys.meta_path.insert(0, Sources(package, folder, modules))
    return True


def compiled() -> bool:
    """Whether the simulation runs compiled (its module was loaded from an extension)."""
    from sluice.scheduler import simulate

    return Path(simulate.__file__ or "").suffix in {".so", ".pyd"}


def build() -> None:
    """Compile the modules in place with mypyc and record their sources' hashes."""
    import tempfile

    from mypyc.build import mypycify  # mypy's compiler: a dev dependency
    from setuptools import setup  # type: ignore[import-untyped]

    for old in [*extensions(), *SRC.glob(f"{GROUP}__mypyc*")]:
        old.unlink()
    RECORD.unlink(missing_ok=True)
    sources = digests()  # before the build: a source edited while it runs is then found stale
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="sluice-mypyc-") as scratch:
        os.chdir(SRC)  # mypy names the modules by their paths from here
        try:
            setup(name="sluice-core", packages=[],
                  ext_modules=mypycify([f"sluice/scheduler/{name}.py" for name in MODULES],
                                       opt_level="3", group_name=GROUP, target_dir=scratch),
                  script_args=["--quiet", "build_ext", "--inplace", "--build-temp", scratch,
                               "--build-lib", scratch])
        finally:
            os.chdir(here)
    missing = [name for name in MODULES if not extensions(FOLDER, [name])]
    if missing:
        raise SystemExit(f"mypyc built no extension for {', '.join(missing)}")
    RECORD.write_text(json.dumps({"sources": sources, "python": sys.version.split()[0]}, indent=1) + "\n")
    print(f"compiled {', '.join(MODULES)} of {PACKAGE} with mypyc")


if __name__ == "__main__":
    build()
