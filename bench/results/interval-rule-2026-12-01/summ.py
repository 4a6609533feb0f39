import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + '/*-[0-9].json')):
    r = json.load(open(f)); q = r['queries']['payments/alerts']; c = q.get('costs') or {}
    a = r['queries']['analytics/merchant-stats']
    print(f.split('/')[-1], f"p50 {q['p50_ms']} p99 {q['p99_ms']} max {q['max_ms']} within {q['attainment']*100:.1f}% batches {q['batches']} "
          f"interval {c.get('interval_ms')} lag {c.get('lag_ms')} fixed {c.get('fixed_ms')} | agg batches {a['batches']} rows {a['rows']}")
    print("   ", q.get('interval_reason') or '')
