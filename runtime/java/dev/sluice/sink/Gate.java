package dev.sluice.sink;

/**
 * The scheduler as the sink sees it: asked once per micro-batch, on the stream thread, just before
 * the batch's tasks are submitted. Implemented in Python (the runtime's gate, through py4j).
 */
public interface Gate {
  /** Blocks until the batch may run; returns the FAIR pool to run it in (null: Spark's default). */
  String ask(long batchId);
}
