#!/usr/bin/env bash
# Validates `sluice simulate` against reality (issue 15): each shipped scenario runs once under
# cameo on a real broker (`sluice bench cameo`), and the same scenario is simulated from that
# run's recorded costs. Results land in bench/results/validate/<scenario>/: the run's report
# (report.json), the simulation (sim/simulate.json with `measured` beside `predicted`,
# sim/summary.txt, sim/simulate.png). About 3 minutes per scenario on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in ${SCENARIOS:-two-tenants burst multi-tenant realtime}; do
  out="bench/results/validate/$scenario"
  .venv/bin/sluice bench cameo --scenario "bench/scenarios/$scenario.yaml" --policies cameo --out "$out"
  cp "$out/runs/cameo-0/report.json" "$out/report.json"
  # the run is `sluice run` in local mode: one executor with the machine's cores (the report's)
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
    --executors 1 --out "$out/sim"
done
