"""checkov (Bridgecrew's IaC scanner, from PyPI, in `.venv-checkov`) on Kubernetes objects, held
to the reasoned skip list `tests/checkov/skips.yaml`."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS = ROOT / "tests" / "checkov" / "skips.yaml"


@dataclass(frozen=True)
class Finding:
    check: str
    resource: str
    name: str

    def __str__(self) -> str:
        return f"{self.check} on {self.resource} ({self.name})"


def scan(objects: Iterable[dict[str, Any]], workdir: Path) -> list[Finding]:
    """checkov's failed Kubernetes checks on `objects`."""
    if not CHECKOV.exists():
        raise RuntimeError(f"{CHECKOV} is missing; `make test` (or `make checkov`) installs it from tests/checkov/requirements.txt.")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "objects.yaml").write_text(yaml.safe_dump_all(list(objects)))
    proc = subprocess.run([str(CHECKOV), "-d", str(workdir), "--framework", "kubernetes", "--quiet", "-o", "json",
                           "--skip-download"], capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):  # 1: checks failed
        raise RuntimeError(f"checkov exited {proc.returncode}: {proc.stderr[-500:]}")
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    if any(r.get("summary", {}).get("parsing_errors") for r in reports):
        raise RuntimeError(f"checkov could not parse the objects: {proc.stdout[:500]}")
    return [Finding(f["check_id"], f["resource"], f["check_name"])
            for r in reports for f in r.get("results", {}).get("failed_checks", [])]


def skips() -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = yaml.safe_load(SKIPS.read_text())
    for check, entry in loaded.items():
        if not str(entry.get("reason", "")).strip() or not entry.get("resources"):
            raise ValueError(f"{SKIPS}: {check} needs a reason and the resources it covers.")
    return loaded


def unexplained(findings: Iterable[Finding], listed: dict[str, dict[str, Any]]) -> list[Finding]:
    """The findings no entry of the skip list covers."""
    return [f for f in findings
            if not any(fnmatch.fnmatchcase(f.resource, pattern) for pattern in listed.get(f.check, {}).get("resources", []))]
