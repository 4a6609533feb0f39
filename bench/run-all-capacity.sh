#!/usr/bin/env bash
# Searches every shipped scenario's SLA capacity per policy; results land in bench/out/capacity/<scenario>/.
# Each scenario stops at MAX_MINUTES (default 25) and reports the bracket reached; run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${MAX_MINUTES:-25}"
started=$(date +%s)
for scenario in two-tenants burst multi-tenant realtime; do
  policies="fifo,fair,cameo"
  # realtime's critical SLAs (100 ms) are below any micro-batch; auto runs them in Real-time Mode
  if [ "$scenario" = realtime ]; then policies="fifo,fair,cameo,auto"; fi
  .venv/bin/sluice bench capacity --scenario "bench/scenarios/$scenario.yaml" --policies "$policies" \
    --max-time "${minutes}m" --out "bench/out/capacity/$scenario"
done
echo "run-all-capacity: $(( ($(date +%s) - started) / 60 )) min"
