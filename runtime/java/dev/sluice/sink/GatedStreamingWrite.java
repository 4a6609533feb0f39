package dev.sluice.sink;

import java.io.IOException;
import java.io.Serializable;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.StringJoiner;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * One micro-batch's write. On the driver's stream thread, before the batch's tasks are submitted
 * ({@link #createStreamingWriterFactory}), it asks the query's gate and sets the granted FAIR pool;
 * the tasks write through the delegate and note their rows' ages; {@link #commit} commits the
 * delegate, then reports the batch (see {@link GatedTable#metrics()}).
 */
final class GatedStreamingWrite implements StreamingWrite {
  static final String POOL = "spark.scheduler.pool";
  static final String DESCRIPTION = "spark.job.description";
  /** The stream thread's CPU time (the batch's commit runs on it): what the driver's work cost. */
  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  private final GatedTable table;
  private final StreamingWrite delegate;
  private final int tsIndex;
  private long began;
  private long batchId = -1;
  private String band;
  private String poolBefore;
  private String descriptionBefore;

  GatedStreamingWrite(GatedTable table, StreamingWrite delegate, int tsIndex) {
    this.table = table;
    this.delegate = delegate;
    this.tsIndex = tsIndex;
  }

  @Override
  public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
    SparkContext sc = SparkContext.getOrCreate();
    batchId = BatchIds.current(sc);
    band = table.pool;
    Gate gate = table.query == null ? null : Gates.get(table.query);
    if (gate != null) {
      try {
        band = gate.ask(batchId);
      } catch (RuntimeException failed) { // the scheduler's side is gone: run now, in Spark's default pool
        band = null;
      }
      UrgentLane.onStreamThread(band);
    }
    poolBefore = sc.getLocalProperty(POOL);
    descriptionBefore = sc.getLocalProperty(DESCRIPTION);
    sc.setLocalProperty(POOL, band);
    if (table.description != null) {
      sc.setLocalProperty(DESCRIPTION, table.description + batchId);
    }
    began = System.currentTimeMillis();
    return new Factory(delegate.createStreamingWriterFactory(info), tsIndex, began);
  }

  @Override
  public boolean useCommitCoordinator() {
    return delegate.useCommitCoordinator();
  }

  @Override
  public void commit(long epochId, WriterCommitMessage[] messages) {
    Ages ages = new Ages();
    long rows = 0;
    WriterCommitMessage[] inner = new WriterCommitMessage[messages.length];
    for (int i = 0; i < messages.length; i++) {
      if (messages[i] instanceof Message m) {
        inner[i] = m.inner;
        ages.merge(m.ages);
        rows += m.rows;
      } else {
        inner[i] = messages[i];
      }
    }
    try {
      delegate.commit(epochId, inner);
    } finally {
      restorePool();
    }
    long committed = System.currentTimeMillis();
    long threadCpu = THREADS.isCurrentThreadCpuTimeSupported() ? THREADS.getCurrentThreadCpuTime() : -1;
    long turnWait = table.description == null ? -1 : UrgentLane.takeTurnWait(table.description + batchId);
    Map<String, String> out = new LinkedHashMap<>();
    out.put("sluice.batch", Long.toString(epochId));
    out.put("sluice.asked", Long.toString(batchId));
    out.put("sluice.rows", Long.toString(rows));
    out.put("sluice.began", Long.toString(began));
    out.put("sluice.committed", Long.toString(committed));
    out.put("sluice.pool", band == null ? "" : band);
    out.put("sluice.threadCpu", Long.toString(threadCpu));
    out.put("sluice.turnWait", Long.toString(turnWait));
    StringJoiner quantiles = new StringJoiner(",");
    for (double q : table.grid) {
      quantiles.add(Double.toString(ages.quantile(q)));
    }
    out.put("sluice.ages", ages.total == 0 ? "" : quantiles.toString());
    table.report(out);
  }

  @Override
  public void abort(long epochId, WriterCommitMessage[] messages) {
    if (table.description != null) {
      UrgentLane.takeTurnWait(table.description + batchId);
    }
    WriterCommitMessage[] inner = new WriterCommitMessage[messages.length];
    for (int i = 0; i < messages.length; i++) {
      inner[i] = messages[i] instanceof Message m ? m.inner : messages[i];
    }
    try {
      delegate.abort(epochId, inner);
    } finally {
      restorePool();
    }
  }

  private void restorePool() {
    SparkContext sc = SparkContext.getOrCreate();
    sc.setLocalProperty(POOL, poolBefore);
    sc.setLocalProperty(DESCRIPTION, descriptionBefore);
  }

  /** A task's commit: the delegate's message, the task's rows and their ages. */
  static final class Message implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final WriterCommitMessage inner;
    final long rows;
    final Ages ages;

    Message(WriterCommitMessage inner, long rows, Ages ages) {
      this.inner = inner;
      this.rows = rows;
      this.ages = ages;
    }
  }

  static final class Factory implements StreamingDataWriterFactory, Serializable {
    private static final long serialVersionUID = 1L;
    private final StreamingDataWriterFactory inner;
    private final int tsIndex;
    private final long began;

    Factory(StreamingDataWriterFactory inner, int tsIndex, long began) {
      this.inner = inner;
      this.tsIndex = tsIndex;
      this.began = began;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      return new Writer(inner.createWriter(partitionId, taskId, epochId), tsIndex, began);
    }
  }

  /** Passes each row to the delegate unchanged (it reads only the columns before `_sluice_ts`). */
  static final class Writer implements DataWriter<InternalRow> {
    private final DataWriter<InternalRow> inner;
    private final int tsIndex;
    private final double beganMicros;
    private final Ages ages = new Ages();
    private long rows;

    Writer(DataWriter<InternalRow> inner, int tsIndex, long began) {
      this.inner = inner;
      this.tsIndex = tsIndex;
      this.beganMicros = began * 1000.0;
    }

    @Override
    public void write(InternalRow row) throws IOException {
      rows++;
      if (!row.isNullAt(tsIndex)) {
        ages.add((beganMicros - row.getLong(tsIndex)) / 1000.0);
      }
      inner.write(row);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      return new Message(inner.commit(), rows, ages);
    }

    @Override
    public void abort() throws IOException {
      inner.abort();
    }

    @Override
    public void close() throws IOException {
      inner.close();
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
      return inner.currentMetricsValues();
    }
  }
}
