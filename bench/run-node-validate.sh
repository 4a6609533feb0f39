#!/usr/bin/env bash
# Validates `sluice simulate` against runs on the pool users install (the node target):
# each scenario runs once under cameo with `sluice bench cameo --target node` (a fresh
# StreamingPool on the one-node Kubernetes: the helm-installed operator, the gate asking the
# sidecar over HTTP, executor pods, no CAP_SYS_NICE), and the same scenario is simulated from that
# run's recorded costs (each query's `costs` and `cold_ms` from the pool's status) on its setup
# (executors of the pool's cores on the node's cores, the driver sharing them, the executor pods'
# task slots and bulk turns, the cores the rest of the node took) at the executor count the pool
# held longest; and the default model again from ${STEADY:-50} s into the load on (sim-cores-steady/,
# measured over the same batches). Measured side: the harness's (every row sent judged). Results land in
# ${OUT:-bench/out/validate-node}/<scenario>/ as `bench/run-all-validate.sh`'s do.
# Uses the running dev cluster (`sluice dev cluster up`), else brings one up (15-20 min cold).
# About 5 minutes per scenario on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${OUT:-bench/out/validate-node}"
for scenario in ${SCENARIOS:-two-tenants burst multi-tenant realtime}; do
  out="$root/$scenario"
  if ! .venv/bin/sluice bench cameo --target node --scenario "bench/scenarios/$scenario.yaml" --policies cameo --out "$out"; then
    echo "$scenario: the run on the node failed (its last line above says why); left out of the table" >&2
    continue
  fi
  .venv/bin/python -m sluice.bench.validate "$out/runs/cameo-0/report.json" "$out/results.json" cameo "$out/report.json"
  executors="$(.venv/bin/python -m sluice.bench.validate --executors "$out/report.json")"
  for model in ${MODELS:-cores cores-wait cores-hold cores-run slots}; do
    .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report.json" \
      --executors "$executors" --model "$model" --out "$out/sim-$model"
  done
  # the same once the pool has settled: measured and simulated from STEADY seconds into the load on
  # (its JVMs warmed up, its executors joined), where the operator's sizing looks
  .venv/bin/python -m sluice.bench.validate --steady "${STEADY:-50}" "bench/scenarios/$scenario.yaml" \
    "$out/report.json" "$out/report-steady.json"
  .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$out/report-steady.json" \
    --executors "$executors" --model cores --warmup "${STEADY:-50}s" --out "$out/sim-cores-steady"
done
.venv/bin/python -m sluice.bench.validate --table "$root" | tee "$root/table.txt"
