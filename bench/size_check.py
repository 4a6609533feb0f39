"""`sluice size` against reality (`bench/run-size-check.sh`): one scenario run under
cameo on Spark's local-cluster with 1, 2, ... one-core executors (`sluice bench cameo
--executors N`, every row sent judged), and `sluice size` asked from each run's recording. The
size is right when it names the smallest count whose real run kept every SLA (or, when none of
the counts tried kept them, a count above the largest tried).

    python -m sluice.bench.size_check SCENARIO DIR
        (DIR/executors-N/{results.json,size.json} -> DIR/check.json, DIR/table.txt)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sluice.api.query import StreamingQuery
from sluice.api.scenario import Scenario, ScenarioError, load_scenario

from .capacity import judge

POLICY = "cameo"


@dataclass(frozen=True, slots=True)
class Row:
    executors: int
    kept: bool
    """The real run kept every SLA (critical queries 99% of rows within SLA, others 95%)."""
    worst_query: str
    worst_attainment: float | None
    recommended: int | None
    """`sluice size` from this run's recording (None: not within its --max-executors)."""
    right: bool


def smallest_kept(kept: Mapping[int, bool]) -> int | None:
    """The fewest executors whose real run kept every SLA (None: no count tried did)."""
    return min((n for n, ok in kept.items() if ok), default=None)


def is_right(recommended: int | None, kept: Mapping[int, bool]) -> bool:
    """A recommendation agrees with the real runs: it is the smallest count that kept every SLA,
    or, when none tried did, a count above the largest tried (or none at all)."""
    real = smallest_kept(kept)
    if real is not None:
        return recommended == real
    return recommended is None or recommended > max(kept)


def rows(judged: Mapping[int, tuple[bool, str, float | None]], recommended: Mapping[int, int | None]) -> list[Row]:
    """Each executor count's real verdict (kept, worst query, its attainment) beside what `sluice
    size` recommended from that run's recording (pure)."""
    kept = {n: verdict[0] for n, verdict in judged.items()}
    return [Row(n, ok, worst, attainment, recommended.get(n), is_right(recommended.get(n), kept))
            for n, (ok, worst, attainment) in sorted(judged.items())]


def render(found: list[Row], scenario: str) -> str:
    kept = {r.executors: r.kept for r in found}
    real = smallest_kept(kept)
    lines = [f"scenario {scenario}, cameo on local-cluster (one-core executors): the real runs against `sluice size`",
             f"{'executors':>9} {'real run':>16} {'worst query':32} {'within':>7} {'size says':>9} right",
             "-" * 84]
    for r in found:
        shown = "-" if r.worst_attainment is None else f"{r.worst_attainment:.1%}"
        said = "more" if r.recommended is None else str(r.recommended)
        lines.append(f"{r.executors:>9} {'every SLA kept' if r.kept else 'missed':>16} {r.worst_query:32} "
                     f"{shown:>7} {said:>9} {'yes' if r.right else 'no'}")
    lines.append("")
    lines.append(f"smallest count that kept every SLA: {real if real is not None else f'none of 1-{max(kept)}'}; "
                 f"`sluice size` right from {sum(r.right for r in found)} of {len(found)} recordings.")
    return "\n".join(lines)


_FOLDER = re.compile(r"executors-(\d+)")


def collect(scenario: Scenario, queries: list[StreamingQuery], root: Path) -> tuple[
        dict[int, tuple[bool, str, float | None]], dict[int, int | None]]:
    """Each run's verdict and each recording's recommendation under `root`."""
    judged: dict[int, tuple[bool, str, float | None]] = {}
    recommended: dict[int, int | None] = {}
    for folder in sorted(root.iterdir()):
        match = _FOLDER.fullmatch(folder.name)
        if match is None or not (folder / "results.json").exists():
            continue
        n = int(match.group(1))
        results: dict[str, Any] = json.loads((folder / "results.json").read_text())
        if results.get("scenario") != scenario.name:
            raise ValueError(f"{folder}: ran scenario {results.get('scenario')!r}, not {scenario.name!r}; give the "
                             "scenario the runs ran.")
        probe = judge(1.0, results["policies"][POLICY], scenario, queries)
        judged[n] = (probe.ok, probe.worst_query, probe.worst_attainment)
        size_file = folder / "size.json"
        if size_file.exists():
            recommended[n] = json.loads(size_file.read_text()).get("sla_executors")
    if not judged:
        raise ValueError(f"{root}: no executors-N/results.json; run bench/run-size-check.sh first.")
    return judged, recommended


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    try:
        scenario, queries = load_scenario(Path(argv[0]))
        judged, recommended = collect(scenario, queries, root)
    except (OSError, ValueError, KeyError, ScenarioError) as error:
        print(f"{error}", file=sys.stderr)
        return 1
    found = rows(judged, recommended)
    text = render(found, scenario.name)
    (root / "check.json").write_text(json.dumps({"scenario": scenario.name, "rows": [asdict(r) for r in found],
                                                 "smallest_kept": smallest_kept({r.executors: r.kept for r in found})},
                                                indent=2) + "\n")
    (root / "table.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
