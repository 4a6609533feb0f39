#!/usr/bin/env bash
# Validates `sluice simulate` against reality: each shipped scenario runs once under
# cameo on a real broker (`sluice bench cameo`), and the same scenario is simulated from that
# run's recorded costs (its driver and task CPU work on its Spark setup: gate, task slots, cores).
# The measured side is the harness's (every row sent judged at the sink), not the runtime's
# status. Results land in ${OUT:-bench/out/validate}/<scenario>/: the run's report with the
# harness's figures (report.json; the runtime's own kept beside them), the simulation
# (sim-cores/, sim-cores-cpu/, sim-cores-wait/, sim-cores-hold/, sim-cores-run/, sim-slots/, sim-cores-no-cold/, sim-cores-no-lag/, sim-cores-no-spread/ and sim-cores-recent/: simulate.json with `measured` beside `predicted`, summary.txt, simulate.png).
# About 4 minutes per scenario on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in ${SCENARIOS:-two-tenants burst multi-tenant realtime}; do
  out="${OUT:-bench/out/validate}/$scenario"
  .venv/bin/sluice bench cameo --scenario "bench/scenarios/$scenario.yaml" --policies cameo --out "$out"
  .venv/bin/python -m sluice.bench.validate "$out/runs/cameo-0/report.json" "$out/results.json" cameo "$out/report.json"
  # the run is `sluice run` in local mode: one executor with the machine's cores (the report's)
  # side by side from the same recording: the model of the cores (task CPU alone, and times its run
  # time to CPU time), and each batch one slot for its wall time
  for model in cores cores-cpu cores-wait cores-hold cores-run slots; do
    .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
      --executors 1 --model "$model" --out "$out/sim-$model"
  done
  # the same without the recording's cold start (each query's first batches at their steady costs)
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
    --executors 1 --model cores --no-cold --out "$out/sim-cores-no-cold"
  # and without its source lag (each row readable as it is produced)
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
    --executors 1 --model cores --no-lag --out "$out/sim-cores-no-lag"
  # and with every batch its steady work (no spread drawn)
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
    --executors 1 --model cores --no-spread --out "$out/sim-cores-no-spread"
  # and with the work fitted from the recent batches alone (without the run's largest older ones kept)
  .venv/bin/python -m sluice.bench.validate --recent-only "$out/report.json" "$out/report-recent.json"
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report-recent.json" \
    --executors 1 --model cores --out "$out/sim-cores-recent"
  rm -rf "$out/kafka" "$out/runs"  # the harness's figures are in report.json
done
.venv/bin/python -m sluice.bench.validate --table "${OUT:-bench/out/validate}" | tee "${OUT:-bench/out/validate}/table.txt"
