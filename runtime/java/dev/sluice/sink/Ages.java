package dev.sluice.sink;

import java.io.Serializable;

/**
 * How old a batch's output rows were when the batch began (milliseconds), as a histogram with
 * buckets 1% wide (so any quantile is within 1% of the true age), plus the exact minimum and
 * maximum. Tasks fill one each; the driver merges them. About 7 KB, whatever the row count.
 */
final class Ages implements Serializable {
  private static final long serialVersionUID = 1L;
  static final double BASE = Math.log(1.01);
  static final int BUCKETS = 1 + (int) Math.ceil(Math.log(1e9) / BASE);

  final long[] counts = new long[BUCKETS];
  long total;
  double min = Double.POSITIVE_INFINITY;
  double max = Double.NEGATIVE_INFINITY;

  static int bucket(double ageMs) {
    if (ageMs < 1.0) {
      return 0;
    }
    return Math.min(BUCKETS - 1, 1 + (int) (Math.log(ageMs) / BASE));
  }

  void add(double ageMs) {
    double age = Math.max(ageMs, 0.0);
    counts[bucket(age)]++;
    total++;
    min = Math.min(min, age);
    max = Math.max(max, age);
  }

  void merge(Ages other) {
    for (int i = 0; i < BUCKETS; i++) {
      counts[i] += other.counts[i];
    }
    total += other.total;
    min = Math.min(min, other.min);
    max = Math.max(max, other.max);
  }

  /** The age at quantile q (0..1, nearest rank), or NaN with no rows. */
  double quantile(double q) {
    if (total == 0) {
      return Double.NaN;
    }
    if (q <= 0.0) {
      return min;
    }
    if (q >= 1.0) {
      return max;
    }
    long rank = Math.round(q * (total - 1));
    long seen = 0;
    for (int i = 0; i < BUCKETS; i++) {
      seen += counts[i];
      if (seen > rank) {
        double mid = i == 0 ? 0.5 : Math.exp((i - 0.5) * BASE);
        return Math.min(Math.max(mid, min), max);
      }
    }
    return max;
  }
}
