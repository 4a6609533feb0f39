"""`make unit` selects only tests that need no Spark, apiserver, Kafka, node or root.

The benchmark-integrity issue found it selecting `tests/node/test_images.py` (marked only
`node`): a "unit" run that needed root and a node. Every tier that needs one of those lives in a
folder of its own (`tests/spark`, `tests/cluster`, `tests/kafka`, `tests/node`, `tests/chaos`,
`tests/checkov`), so what `make unit` collects must all be in `tests/unit`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unit_markers() -> str:
    """The marker expression of the Makefile's `unit` target."""
    recipe = re.search(r"^unit:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None, "the Makefile has no `unit` target"
    expression = re.search(r"-m '([^']+)'", recipe.group(1))
    assert expression is not None, f"`make unit` selects no markers: {recipe.group(1)}"
    return expression.group(1)


def test_make_unit_collects_only_the_unit_folder() -> None:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", unit_markers(), "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert len(ids) > 100  # the unit tier itself is there
    outside = sorted({i.split("::")[0] for i in ids if not i.startswith("tests/unit/")})
    assert not outside, f"`make unit` selects tests that need Spark, Kafka, an apiserver, a node or root: {outside}"
