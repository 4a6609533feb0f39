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


def test_the_reference_page_is_generated_from_the_models() -> None:
    from sluice.api.reference import reference_markdown

    assert (ROOT / "docs" / "reference.md").read_text(encoding="utf-8") == reference_markdown(), (
        "docs/reference.md is stale: run `make crds` (it writes the CRDs and the reference)")


def test_every_reason_the_operator_sets_is_in_the_reference() -> None:
    """Reasons are found in the operator's source where it sets a condition (`set_condition`,
    `health`, an `Admission`): each one has its row, with what to do."""
    from sluice.api.reference import CONDITIONS, REASONS
    from sluice.operator.status import STALLED_REASONS

    documented = {(kind, reason) for kind, reason, _ in REASONS}
    reasons = {reason for _, reason in documented}
    source = "\n".join(p.read_text() for p in sorted((ROOT / "operator").glob("*.py")))
    found = set(re.findall(r'Admission\((?:True|False), "([A-Za-z]+)"', source))
    found |= set(re.findall(r'set_condition\([^,]+, "[A-Za-z]+", [^,]+, "([A-Za-z]+)"', source))
    ternary = r'"([A-Za-z]+)" if [a-z]+ else "([A-Za-z]+)"'  # a reason chosen by a flag
    found |= {w for pair in re.findall(r'set_condition\(\s*[^,]+, "[A-Za-z]+", [^,]+, ' + ternary, source) for w in pair}
    found |= {w for pair in re.findall(r'health\([^,]+, [^,]+, ' + ternary, source) for w in pair}
    found |= set(re.findall(r'health\([^,]+, "[A-Za-z]+", "([A-Za-z]+)"', source))
    assert len(found) >= 15, found  # the scan itself still finds the operator's reasons
    assert sorted(found - reasons) == []
    assert sorted(STALLED_REASONS - reasons) == []
    assert {kind for kind, _ in documented} <= set(CONDITIONS)
    set_types = set(re.findall(r'set_condition\([^,]+, "([A-Za-z]+)"', source)) | {"Ready", "Stalled", "Reconciling"}
    assert sorted(set_types - set(CONDITIONS)) == []


def test_every_example_is_indexed_and_every_manifest_validates() -> None:
    """examples/README.md lists every example; each manifest in examples/ is a valid resource (the
    what-if rates file is the one example that is not a manifest, and the index says so)."""
    from sluice.api.manifest import parse_text

    index = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    files = sorted(p.relative_to(ROOT / "examples").as_posix() for p in (ROOT / "examples").rglob("*.yaml"))
    unlisted = [f for f in files if f not in index and f.split("/")[0] + "/" not in index]
    assert unlisted == []
    for name in files:
        if name == "whatif/rates.yaml":
            continue
        parsed, problems = parse_text((ROOT / "examples" / name).read_text(encoding="utf-8"), name)
        assert parsed and problems == [], (name, problems)
    first = (ROOT / "examples" / "first-query.yaml").read_text(encoding="utf-8")
    assert len(first.splitlines()) <= 15 and "type: memory" not in first  # readable on a cluster
