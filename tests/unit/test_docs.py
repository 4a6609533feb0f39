"""README is an entry point of one screenful or so, and no relative link of README or docs/ is dead."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert size <= 15_000, f"README.md is {size} characters; move detail to docs/ (the limit is 15,000)"


def test_every_relative_link_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert dead == []
