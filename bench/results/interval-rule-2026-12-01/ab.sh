#!/bin/bash
# held-out two-query run: this tree (new) and the tree before (old), interleaved
for i in 1 2; do
  for side in new old; do
    src=/tmp/new/src; [ $side = old ] && src=/tmp/old/src
    start=$(date -u +%H:%M:%S)
    PYTHONPATH=$src /work/main/.venv/bin/python -m sluice run -f /tmp/holdout/filter.yaml -f /tmp/holdout/agg.yaml \
      --duration 60s --warmup 10s --report /tmp/holdout/$side-$i.json > /tmp/holdout/$side-$i.log 2>&1
    echo "$side-$i $start-$(date -u +%H:%M:%S) rc=$?"
  done
done
