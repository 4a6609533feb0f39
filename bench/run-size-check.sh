#!/usr/bin/env bash
# Checks `sluice size` against reality: one scenario runs under cameo on Spark's
# local-cluster with 1, 2 and 3 one-core executor JVMs (`sluice bench cameo --executors N`, every
# row sent judged at the sink), and `sluice size` answers from each run's recording (its costs,
# the cores the rest of the machine took). The size is right when it names the smallest count
# whose real run kept every SLA. Results in ${OUT:-bench/out/size-check}/: executors-N/ (the
# run, report.json with the harness's figures, size.json) and table.txt, check.json.
# About 4 minutes per count for two-tenants on a 2-core machine; run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="bench/scenarios/${SCENARIO:-two-tenants}.yaml"
out="${OUT:-bench/out/size-check}"
for n in ${COUNTS:-1 2 3}; do
  run="$out/executors-$n"
  .venv/bin/sluice bench cameo --scenario "$scenario" --policies cameo --executors "$n" --out "$run"
  .venv/bin/python -m sluice.bench.validate "$run/runs/cameo-0/report.json" "$run/results.json" cameo "$run/report.json"
  .venv/bin/sluice size --scenario "$scenario" --costs "$run/report.json" --cores-per-executor 1 \
    --model "${MODEL:-cores}" --out "$run" || [ $? -eq 3 ]  # 3: not kept within --max-executors (size.json says)
  rm -rf "$run/kafka" "$run/runs/cameo-0/work"
done
.venv/bin/python -m sluice.bench.size_check "$scenario" "$out"
