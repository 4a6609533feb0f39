#!/bin/bash
for side in new old; do
  src=/tmp/new/src; [ $side = old ] && src=/tmp/old/src
  start=$(date -u +%H:%M:%S)
  PYTHONPATH=$src /work/main/.venv/bin/python -m sluice run -f /tmp/holdout/filter.yaml -f /tmp/holdout/agg.yaml \
    --duration 60s --warmup 10s --report /tmp/holdout/$side-3.json > /tmp/holdout/$side-3.log 2>&1
  echo "$side-3 $start-$(date -u +%H:%M:%S) rc=$?"
done
