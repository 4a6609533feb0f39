#!/usr/bin/env bash
# Runs the Cameo benchmark on every shipped scenario; results land in bench/out/<scenario>/.
# Takes about 5 minutes per scenario and repeat on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat="${REPEAT:-1}"
for scenario in two-tenants burst multi-tenant; do
  .venv/bin/sluice bench cameo --scenario "bench/scenarios/$scenario.yaml" --repeat "$repeat" --out "bench/out/$scenario"
done
