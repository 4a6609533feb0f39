package dev.sluice.sink;

import org.apache.spark.SparkContext;

/**
 * Spark internal: the id of the micro-batch the stream thread is running, from the local property
 * MicroBatchExecution sets before each batch (`MicroBatchExecution.BATCH_ID_KEY`). A test
 * (`tests/spark/test_jvm_sink.py`) checks the key against Spark's constant, so an upgrade that
 * renames it fails loudly.
 */
public final class BatchIds {
  static final String KEY = "streaming.sql.batchId";

  private BatchIds() {}

  static long current(SparkContext sc) {
    String value = sc.getLocalProperty(KEY);
    if (value == null) {
      return -1;
    }
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException notANumber) {
      return -1;
    }
  }

  public static String key() {
    return KEY;
  }
}
