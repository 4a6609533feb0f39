package dev.sluice.sink;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The delegate's write builder, given the rows' schema without `_sluice_ts` (the last column). */
final class GatedWriteBuilder implements SupportsTruncate, SupportsStreamingUpdateAsAppend {
  static final String TS = "_sluice_ts";

  private final GatedTable table;
  private WriteBuilder delegate;
  private final int tsIndex;
  private final StructType kept;
  private final String queryId;

  GatedWriteBuilder(GatedTable table, SupportsWrite target, LogicalWriteInfo info) {
    StructField[] fields = info.schema().fields();
    if (fields.length == 0 || !fields[fields.length - 1].name().equals(TS)) {
      throw new IllegalArgumentException("sluice sink: the rows' last column must be " + TS);
    }
    this.table = table;
    this.tsIndex = fields.length - 1;
    this.kept = new StructType(java.util.Arrays.copyOf(fields, fields.length - 1));
    this.queryId = info.queryId();
    this.delegate = target.newWriteBuilder(new Info(info, kept));
  }

  @Override
  public WriteBuilder truncate() {
    if (!(delegate instanceof SupportsTruncate truncating)) {
      throw new UnsupportedOperationException("sluice sink: " + table.name() + " cannot truncate");
    }
    delegate = truncating.truncate();
    return this;
  }

  @Override
  public Write build() {
    Write inner = delegate.build();
    return new Write() {
      @Override
      public String description() {
        return "sluice(" + inner.description() + ")";
      }

      @Override
      public StreamingWrite toStreaming() {
        StreamingWrite write = table.transactional == null ? inner.toStreaming()
            : new TransactionalKafkaWrite(table.transactional, kept, queryId);
        return new GatedStreamingWrite(table, write, tsIndex);
      }

      @Override
      public org.apache.spark.sql.connector.metric.CustomMetric[] supportedCustomMetrics() {
        return inner.supportedCustomMetrics();
      }
    };
  }

  /** The write's logical info as the delegate sees it: its own options and columns only. */
  private static final class Info implements LogicalWriteInfo {
    private final LogicalWriteInfo outer;
    private final StructType schema;
    private final CaseInsensitiveStringMap options;

    Info(LogicalWriteInfo outer, StructType schema) {
      this.outer = outer;
      this.schema = schema;
      Map<String, String> own = new HashMap<>();
      for (Map.Entry<String, String> e : outer.options().asCaseSensitiveMap().entrySet()) {
        if (!e.getKey().toLowerCase(Locale.ROOT).startsWith(GatedSinkProvider.PREFIX)) {
          own.put(e.getKey(), e.getValue());
        }
      }
      this.options = new CaseInsensitiveStringMap(own);
    }

    @Override
    public CaseInsensitiveStringMap options() {
      return options;
    }

    @Override
    public String queryId() {
      return outer.queryId();
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Optional<StructType> rowIdSchema() {
      return outer.rowIdSchema();
    }

    @Override
    public Optional<StructType> metadataSchema() {
      return outer.metadataSchema();
    }
  }
}
