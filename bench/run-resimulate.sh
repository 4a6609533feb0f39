#!/usr/bin/env bash
# What-if's models against every stored validation run at once: each run's recordings
# (${RUNS:-bench/out/validate-2026-12-0*}/<scenario>/report.json; a node run's too,
# bench/out/validate-node-*, when RUNS names it; the harness's figures
# beside the runtime's recorded costs) simulated again with the current code, so a change to the
# model is judged on many runs' measurements rather than one. No Spark runs: a minute or two.
#   OUT=bench/out/resimulate-<date> MODELS="cores cores-wait" bench/run-resimulate.sh
# Results: ${OUT}/<run>/<scenario>/sim-<model>/, each run's table in ${OUT}/<run>/table.txt
# and the counts of every run in ${OUT}/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out/resimulate}"
mkdir -p "$out"
: > "$out/summary.txt"
for run in ${RUNS:-${SITTINGS:-bench/out/validate-2026-12-0*}}; do
  name="$(basename "$run")"
  for report in "$run"/*/report.json; do
    scenario="$(basename "$(dirname "$report")")"
    # a local recording: its one executor; a node target's: the count its pool held longest
    executors="$(.venv/bin/python -m sluice.bench.validate --executors "$report")"
    for model in ${MODELS:-cores cores-wait}; do
      # its table is not needed (the run's table is below); its one-sentence error is, if it fails
      .venv/bin/sluice simulate --scenario "bench/scenarios/$scenario.yaml" --costs "$report" \
        --executors "$executors" --model "$model" --out "$out/$name/$scenario/sim-$model" 2>&1 > /dev/null \
        | grep -v "^simulating \|^wrote " >&2 || true
      test -f "$out/$name/$scenario/sim-$model/simulate.json"  # stop here when it failed
      rm -f "$out/$name/$scenario/sim-$model/simulate.png"  # the run's own plots are beside its run
    done
  done
  .venv/bin/python -m sluice.bench.validate --table "$out/$name" > "$out/$name/table.txt"
  grep -E "^[a-z-]+: [0-9]+ of" "$out/$name/table.txt" | sed "s|^|$name |" | tee -a "$out/summary.txt"
done
# every run's counts summed per model
awk '{n[$2] += $3; m[$2] += $5} END {for (k in n) print "all " k " " n[k] " of " m[k]}' "$out/summary.txt" | sort | tee -a "$out/summary.txt"
