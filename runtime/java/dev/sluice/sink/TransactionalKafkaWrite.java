package dev.sluice.sink;

import java.io.File;
import java.io.Serializable;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A micro-batch's write to Kafka with each output partition's rows in one Kafka transaction
 * (`spec.sink.delivery: exactlyOnce`): a `read_committed` consumer sees every row once, through
 * retried tasks, replayed batches and killed executors.
 *
 * <p>What it relies on: Spark replays an uncommitted batch with the same offsets and the same
 * partitioning, so output partition p of batch b holds the same rows each time it runs. Each
 * (query, partition) has a stable transactional id, {@code sluice-<query id>-<p>} (the query id
 * is Spark's, kept in the checkpoint: a new checkpoint starts afresh). A task's transaction carries
 * its rows and a marker: through the transactional offset commit Kafka gives
 * consume-transform-produce applications, group {@code sluice-<query id>-<p>} at offset b+1 on the
 * marker topic {@code sluice-exactly-once}. Kafka makes the rows and the marker visible together or
 * neither. A producer that starts (a new executor, a retried task) first calls
 * {@code initTransactions}, which fences any older producer of its id and aborts its open
 * transaction, then reads the marker (requireStable): a partition whose marker is past b already
 * committed, and its rows are not written again. A producer kept from an earlier batch reads the
 * marker too (without waiting for a commit still completing, and while the task computes its first
 * rows): past its own record, another executor wrote the partition since and fenced it, so a fresh
 * producer starts. A fencing it cannot see yet fails its commit, the task fails, and Spark's retry
 * starts afresh. The transaction spans the task: a task longer
 * than `transaction.timeout.ms` (Kafka's 60 s unless `kafka.transaction.timeout.ms` says otherwise)
 * is aborted by the broker, and Spark retries it.
 *
 * <p>The driver's side (this class) touches no Kafka class. The tasks' side, {@code
 * dev.sluice.eos.KafkaTransactions}, calls kafka-clients, which Spark's Kafka package brings to the
 * task's class loader, not to the class path this jar is on: it is a jar of its own
 * (`sluice-sink-eos.jar`, beside this one, at the same path on every executor), loaded under the
 * task's class loader.
 */
final class TransactionalKafkaWrite implements StreamingWrite {
  static final String TASKS = "dev.sluice.eos.KafkaTransactions";
  private static final String PRODUCER_PREFIX = "kafka.";

  private final Factory factory;

  TransactionalKafkaWrite(Map<String, String> options, StructType schema, String queryId) {
    Map<String, String> config = new HashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().startsWith(PRODUCER_PREFIX)) {
        config.put(e.getKey().substring(PRODUCER_PREFIX.length()), e.getValue());
      }
    }
    if (!config.containsKey("bootstrap.servers")) {
      throw new IllegalArgumentException("sluice sink: exactly-once Kafka delivery needs kafka.bootstrap.servers");
    }
    String topic = options.get("topic");
    if (topic == null || topic.isEmpty()) {
      throw new IllegalArgumentException("sluice sink: exactly-once Kafka delivery needs the option topic");
    }
    StructField[] fields = schema.fields();
    int key = -1;
    int value = -1;
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().equals("key")) {
        key = i;
      } else if (fields[i].name().equals("value")) {
        value = i;
      }
    }
    if (value < 0) {
      throw new IllegalArgumentException("sluice sink: exactly-once Kafka delivery needs a value column");
    }
    for (int i : new int[] {key, value}) {
      if (i >= 0 && !(fields[i].dataType() instanceof BinaryType)) {
        throw new IllegalArgumentException("sluice sink: exactly-once Kafka column " + fields[i].name()
            + " must be binary (cast it), not " + fields[i].dataType().simpleString());
      }
    }
    this.factory = new Factory(config, topic, "sluice-" + queryId + "-", key, value, eosJar());
  }

  /** The tasks' jar: beside this class's own. */
  private static String eosJar() {
    try {
      File own = new File(TransactionalKafkaWrite.class.getProtectionDomain().getCodeSource().getLocation().toURI());
      String name = own.getName();
      return new File(own.getParentFile(), name.substring(0, name.length() - ".jar".length()) + "-eos.jar").getPath();
    } catch (java.net.URISyntaxException | RuntimeException unknown) {
      throw new IllegalStateException("sluice sink: where is sluice-sink.jar? (" + unknown + ")", unknown);
    }
  }

  @Override
  public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
    return factory;
  }

  @Override
  public boolean useCommitCoordinator() {
    return true; // one attempt of a partition commits its transaction (a speculative copy does not)
  }

  @Override
  public void commit(long epochId, WriterCommitMessage[] messages) {
    // each task committed its own transaction: nothing is left for the driver
  }

  @Override
  public void abort(long epochId, WriterCommitMessage[] messages) {
    // a task that did not commit aborted its transaction, or the next producer of its id aborts it
  }

  static final class Factory implements StreamingDataWriterFactory, Serializable {
    private static final long serialVersionUID = 1L;
    private static final Map<ClassLoader, ClassLoader> LOADERS = new ConcurrentHashMap<>();
    private final HashMap<String, String> config;
    private final String topic;
    private final String idPrefix;
    private final int keyIndex;
    private final int valueIndex;
    private final String jar;

    Factory(Map<String, String> config, String topic, String idPrefix, int keyIndex, int valueIndex, String jar) {
      this.config = new HashMap<>(config);
      this.topic = topic;
      this.idPrefix = idPrefix;
      this.keyIndex = keyIndex;
      this.valueIndex = valueIndex;
      this.jar = jar;
    }

    @Override
    @SuppressWarnings("unchecked")
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      try {
        Class<?> tasks = Class.forName(TASKS, true, loader());
        return (DataWriter<InternalRow>) tasks
            .getMethod("writer", Map.class, String.class, String.class, long.class, int.class, int.class)
            .invoke(null, config, topic, idPrefix + partitionId, epochId, keyIndex, valueIndex);
      } catch (java.lang.reflect.InvocationTargetException failed) {
        Throwable cause = failed.getCause();
        throw new IllegalStateException("sluice sink: Kafka transaction " + idPrefix + partitionId + " could not start: "
            + cause, cause);
      } catch (ReflectiveOperationException | LinkageError missing) {
        throw new IllegalStateException("sluice sink: exactly-once delivery needs " + jar
            + " and Spark's Kafka package on this executor (" + missing + ")", missing);
      }
    }

    /** The eos jar under this task's class loader (one per loader, so its producers are kept). */
    private ClassLoader loader() {
      ClassLoader task = Thread.currentThread().getContextClassLoader();
      return LOADERS.computeIfAbsent(task, parent -> {
        try {
          return new URLClassLoader(new URL[] {new File(jar).toURI().toURL()}, parent);
        } catch (MalformedURLException bad) {
          throw new IllegalStateException(bad);
        }
      });
    }
  }
}
