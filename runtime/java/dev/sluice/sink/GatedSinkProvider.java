package dev.sluice.sink;

import java.util.HashMap;
import java.util.Map;
import java.util.ServiceLoader;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Sluice's streaming sink: another sink (`sluice.delegate`: noop, kafka) with the runtime's gate in
 * front of each micro-batch and the batch's latency measured inside its own write.
 *
 * <p>Spark writes to it directly, in the batch's one plan, so no batch goes through
 * `foreachBatch` (a call into Python and a second plan per batch). Options: `sluice.query` (the
 * query's key: its gate in {@link Gates}, if any), `sluice.pool` (the FAIR pool of an ungated
 * query, if any), `sluice.grid` (the quantiles to report, comma-separated), `sluice.description` (the batch's
 * jobs are named with it and the batch id, as the runtime's stage poller expects) and the delegate's own
 * options. The rows carry `_sluice_ts` (production time) as their last column; the delegate never
 * sees it.
 */
public final class GatedSinkProvider implements TableProvider, DataSourceRegister {
  static final String PREFIX = "sluice.";
  static final String AT_LEAST_ONCE = "atLeastOnce";
  static final String EXACTLY_ONCE = "exactlyOnce";

  @Override
  public String shortName() {
    return "sluice";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return new StructType();
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(properties);
    String delegate = options.get(PREFIX + "delegate");
    if (delegate == null) {
      throw new IllegalArgumentException("sluice sink: option sluice.delegate (the sink to write to) is missing");
    }
    Map<String, String> own = new HashMap<>();
    for (Map.Entry<String, String> e : properties.entrySet()) {
      if (!e.getKey().toLowerCase(java.util.Locale.ROOT).startsWith(PREFIX)) {
        own.put(e.getKey(), e.getValue());
      }
    }
    TableProvider provider = lookup(delegate);
    CaseInsensitiveStringMap delegateOptions = new CaseInsensitiveStringMap(own);
    Table table = provider.getTable(provider.inferSchema(delegateOptions), new Transform[0], own);
    String delivery = options.getOrDefault(PREFIX + "delivery", AT_LEAST_ONCE);
    if (!delivery.equals(AT_LEAST_ONCE) && !(delivery.equals(EXACTLY_ONCE) && delegate.equalsIgnoreCase("kafka"))) {
      throw new IllegalArgumentException("sluice sink: sluice.delivery " + delivery + " is not one of "
          + AT_LEAST_ONCE + ", " + EXACTLY_ONCE + " (Kafka only)");
    }
    return new GatedTable(table, options.get(PREFIX + "query"), options.get(PREFIX + "pool"),
        grid(options.get(PREFIX + "grid")), options.get(PREFIX + "description"),
        delivery.equals(EXACTLY_ONCE) ? Map.copyOf(own) : null);
  }

  private static double[] grid(String spec) {
    if (spec == null || spec.isEmpty()) {
      return new double[] {0.5, 0.99};
    }
    String[] parts = spec.split(",");
    double[] out = new double[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Double.parseDouble(parts[i].trim());
    }
    return out;
  }

  private static TableProvider lookup(String name) {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    if (loader == null) {
      loader = GatedSinkProvider.class.getClassLoader();
    }
    for (DataSourceRegister source : ServiceLoader.load(DataSourceRegister.class, loader)) {
      if (source.shortName().equalsIgnoreCase(name) && source instanceof TableProvider provider) {
        return provider;
      }
    }
    throw new IllegalArgumentException("sluice sink: no data source v2 sink named " + name);
  }
}
