package dev.sluice.sink;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.streaming.ReportsSinkMetrics;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;

/**
 * One query's sink. After each batch, {@link #metrics()} (Spark's progress report, `sink.metrics`)
 * carries what the runtime needs about it: its id, output rows, when it began and committed, the
 * ages of its rows at the grid's quantiles, and the pool it ran in.
 */
final class GatedTable implements SupportsWrite, ReportsSinkMetrics {
  private final Table delegate;
  final String query;
  final String pool;
  final double[] grid;
  final String description;
  /** The Kafka sink's own options when its rows are written in transactions (exactlyOnce), else null. */
  final Map<String, String> transactional;
  private volatile Map<String, String> last = Map.of();

  GatedTable(Table delegate, String query, String pool, double[] grid, String description,
      Map<String, String> transactional) {
    this.delegate = delegate;
    this.query = query;
    this.pool = pool;
    this.grid = grid;
    this.description = description;
    this.transactional = transactional;
  }

  @Override
  public String name() {
    return "sluice(" + delegate.name() + ")";
  }

  @Override
  public String toString() {
    return name();
  }

  @Override
  public Column[] columns() {
    return new Column[0];
  }

  @Override
  public Set<TableCapability> capabilities() {
    return delegate.capabilities();
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return new GatedWriteBuilder(this, (SupportsWrite) delegate, info);
  }

  @Override
  public Map<String, String> metrics() {
    return last;
  }

  void report(Map<String, String> batch) {
    last = batch;
  }
}
