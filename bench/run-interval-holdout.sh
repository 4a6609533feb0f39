#!/usr/bin/env bash
# The SLA-driven interval rule against a real run (a held-out two-query run): a 2,000
# rows/s `rate` filter with a 1.5 s SLA and no trigger, beside a 200,000-row `rate-micro-batch`
# windowed aggregation, under cameo for 60 s (`sluice run --report`). Prints, per run, the
# filter's measured p50, p99, maximum and attainment beside the interval the rule chose and its
# predicted worst case (`costs.worst_case_ms`). SRC=/path/to/other/tree/src runs another tree's
# code for a side-by-side (its report may lack the newer fields). Results in
# ${OUT:-bench/out/interval-holdout}/run-N.json and summary.txt. About 80 s a run; run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out/interval-holdout}"
mkdir -p "$out"
for n in $(seq 1 "${RUNS:-2}"); do
  PYTHONPATH="${SRC:-}" .venv/bin/python -m sluice run -f bench/interval-holdout/filter.yaml \
    -f bench/interval-holdout/aggregation.yaml --duration 60s --warmup 10s --report "$out/run-$n.json" > "$out/run-$n.log" 2>&1
done
.venv/bin/python - "$out" <<'PY' | tee "$out/summary.txt"
import json
import sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).glob("*.json")):
    query = json.loads(path.read_text())["queries"]["payments/alerts"]
    costs = query.get("costs") or {}
    print(f"{path.name}: p50 {query['p50_ms']} ms, p99 {query['p99_ms']} ms, max {query['max_ms']} ms, "
          f"{query['attainment'] * 100:.1f}% within 1500 ms, {query['batches']} batches; interval "
          f"{costs.get('interval_ms')} ms, lag {costs.get('lag_ms')} ms, rule's worst case {costs.get('worst_case_ms')} ms")
PY
