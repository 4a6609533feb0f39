"""README is an entry point of one screenful or so, and no relative link of README or docs/ is dead."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert size <= 15_000, f"README.md is {size} characters; move detail to docs/ (the limit is 15,000)"


DOC_LIMITS = {"performance.md": 40_000, "what-if.md": 20_000}
LAB_TALK = re.compile(r"\bsession \d+|\b\w+(?:st|nd|rd|th) session\b|\bthis session\b|\bsession before\b"
                      r"""|(?<!")\bsitting|\bissue \d+|\bissue's\b""", re.IGNORECASE)
"""Lab talk: a work session, a sitting, an issue number (the results.json key `"sitting"` is a contract)."""


def test_the_user_docs_stay_within_their_sizes() -> None:
    sizes = {name: len((ROOT / "docs" / name).read_text(encoding="utf-8")) for name in DOC_LIMITS}
    assert {n: s for n, s in sizes.items() if s > DOC_LIMITS[n]} == {}, "move history to the commit log"


def test_docs_and_help_speak_of_the_project_not_of_its_work_sessions() -> None:
    """No "session N", "issue N" or "sitting" in README, docs or the CLI's help: say what was run,
    when, at what machine speed (a Spark session is no work session: the word alone is allowed)."""
    from click.testing import CliRunner

    from sluice.cli.kubectl_plugin import plugin
    from sluice.cli.main import main
    from sluice.cli.reference_page import cli_markdown

    pages = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    pages["help"] = cli_markdown([("sluice", main), ("kubectl sluice", plugin)])
    pages["help"] += CliRunner().invoke(main, ["--help"]).output
    found = {name: LAB_TALK.findall(text) for name, text in pages.items()}
    assert {name: words for name, words in found.items() if words} == {}


def test_the_results_in_the_tree_are_what_the_docs_cite() -> None:
    """bench/results keeps, a benchmark each, results.json, a summary and at most one plot: at most
    5 MB, no raw series or logs (they go to bench/out, ignored), no folder named for a work session."""
    results = ROOT / "bench" / "results"
    files = [p for p in results.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 5_000_000
    assert [p.name for p in files if p.suffix not in (".json", ".txt", ".md", ".png")] == []
    plots: dict[str, int] = {}
    for p in files:
        if p.suffix == ".png":
            top = p.relative_to(results).parts[0]
            plots[top] = plots.get(top, 0) + 1
    assert {top: n for top, n in plots.items() if n > 1} == {}
    assert [p for p in results.rglob("*") if re.search(r"session|sitting", p.name, re.IGNORECASE)] == []
    cited = set(re.findall(r"bench/results/([A-Za-z0-9_.-]+)", "\n".join(
        p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])))
    assert sorted({p.name for p in results.iterdir()} - cited) == []  # nothing kept that no page cites


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
