package dev.sluice.eos;

import dev.sluice.sink.KafkaCommit;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * The tasks' side of the exactly-once Kafka write (see {@code dev.sluice.sink.TransactionalKafkaWrite}
 * for the protocol): a writer per task, this JVM's idle transactional producers by id, and one admin
 * client a cluster to read the markers.
 *
 * <p>What a task waits for is kept short: a producer kept from an earlier batch checks its marker
 * while the task computes its first rows (they are held back until the answer), and the marker is
 * added to the transaction as soon as it begins, on a thread of {@link #MARKERS}, so its round
 * trips overlap the rows too; the commit waits for both, then ends the transaction.
 */
public final class KafkaTransactions {
  /** The topic the markers are group offsets on: one partition, never written. */
  public static final String MARKER_TOPIC = "sluice-exactly-once";
  private static final TopicPartition MARKER = new TopicPartition(MARKER_TOPIC, 0);
  private static final Map<String, Held> IDLE = new ConcurrentHashMap<>();
  private static final Map<String, Admin> ADMINS = new ConcurrentHashMap<>();
  /** Adds markers to open transactions: at most one thread per task writing at once, idle ones end. */
  private static final ExecutorService MARKERS = Executors.newCachedThreadPool(task -> {
    Thread thread = new Thread(task, "sluice-eos-marker");
    thread.setDaemon(true);
    return thread;
  });

  private KafkaTransactions() {}

  /** A task's writer: batch `batch` of the partition whose transactional id is `id`. */
  public static DataWriter<InternalRow> writer(Map<String, String> config, String topic, String id, long batch,
      int keyIndex, int valueIndex) {
    Held idle = IDLE.remove(id);
    if (idle == null) {
      return new Writer(config, start(id, config), null, topic, batch, keyIndex, valueIndex);
    }
    CompletableFuture<Boolean> current;
    try {
      current = stillCurrent(admin(config), idle);
    } catch (RuntimeException unreadable) { // the broker gone: not kept, not leaked
      idle.producer.close(Duration.ZERO);
      throw unreadable;
    }
    return new Writer(config, idle, current, topic, batch, keyIndex, valueIndex);
  }

  static final class Writer implements DataWriter<InternalRow> {
    /** Rows held back while a kept producer's check is out, at most this many bytes. */
    private static final int EARLY_BYTES = 1 << 20;

    private final Map<String, String> config;
    private final String topic;
    private final long batch;
    private final int keyIndex;
    private final int valueIndex;
    private Held held;
    /** A kept producer's check, until it answers (null: settled). */
    private CompletableFuture<Boolean> check;
    private final List<ProducerRecord<byte[], byte[]>> early = new ArrayList<>();
    private int earlyBytes;
    private boolean skip;
    private CompletableFuture<Void> marker = CompletableFuture.completedFuture(null);
    private boolean open;

    Writer(Map<String, String> config, Held held, CompletableFuture<Boolean> check, String topic, long batch,
        int keyIndex, int valueIndex) {
      this.config = config;
      this.held = held;
      this.check = check;
      this.topic = topic;
      this.batch = batch;
      this.keyIndex = keyIndex;
      this.valueIndex = valueIndex;
      if (check == null) {
        begin();
      }
    }

    /** Skips a partition already committed for this batch, or opens its transaction and adds the marker. */
    private void begin() {
      skip = held.next > batch;
      if (skip) {
        return;
      }
      try {
        held.producer.beginTransaction();
      } catch (RuntimeException broken) {
        give(held, false);
        held = null;
        throw broken;
      }
      open = true;
      // the rows and the marker commit together or not at all, so the marker may go first
      Held on = held;
      marker = CompletableFuture.runAsync(() -> on.producer.sendOffsetsToTransaction(
          Map.of(MARKER, new OffsetAndMetadata(batch + 1)), new ConsumerGroupMetadata(on.id)), MARKERS);
    }

    /**
     * Settles a kept producer once its check has answered (or, with `wait`, waits for it): a
     * current one writes; a stale one (another executor wrote the partition since, and fenced it)
     * makes way for a fresh producer. Then the rows held back go out. False: not answered yet.
     */
    private boolean settle(boolean wait) throws IOException {
      if (check == null) {
        return true;
      }
      if (!wait && !check.isDone()) {
        return false;
      }
      boolean current;
      try {
        current = check.get(60, TimeUnit.SECONDS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        throw new IOException("sluice sink: interrupted reading the marker of " + held.id, interrupted);
      } catch (ExecutionException | TimeoutException unreadable) { // the broker gone: not kept, not leaked
        String id = held.id;
        give(held, false);
        held = null;
        throw new IOException("sluice sink: could not read the marker of " + id + ": " + unreadable, unreadable);
      }
      check = null;
      if (!current) {
        String id = held.id;
        give(held, false);
        held = null;
        held = start(id, config);
      }
      begin();
      for (ProducerRecord<byte[], byte[]> record : early) {
        send(record);
      }
      early.clear();
      return true;
    }

    private static byte[] bytes(InternalRow row, int index) {
      return index < 0 || row.isNullAt(index) ? null : row.getBinary(index); // a copy of the row's bytes
    }

    private void send(ProducerRecord<byte[], byte[]> record) throws IOException {
      if (skip) {
        return; // this partition of this batch committed in an earlier run
      }
      try {
        held.producer.send(record);
      } catch (RuntimeException error) {
        throw new IOException("sluice sink: a Kafka send in transaction " + held.id + " failed: " + error, error);
      }
    }

    @Override
    public void write(InternalRow row) throws IOException {
      if (skip) {
        return;
      }
      byte[] key = bytes(row, keyIndex);
      byte[] value = bytes(row, valueIndex);
      ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, key, value);
      if (!settle(false)) {
        early.add(record);
        earlyBytes += (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
        if (earlyBytes > EARLY_BYTES) {
          settle(true);
        }
        return;
      }
      send(record);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      settle(true);
      if (skip) {
        return new KafkaCommit(true);
      }
      try {
        marker.join();
        held.producer.commitTransaction(); // flushes the rows first; throws if a send failed
      } catch (RuntimeException error) {
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        throw new IOException("sluice sink: Kafka transaction " + held.id + " of batch " + batch + " failed: " + cause,
            cause);
      }
      open = false;
      held.next = batch + 1;
      return new KafkaCommit(false);
    }

    @Override
    public void abort() {
      if (open) {
        try {
          marker.handle((done, failed) -> null).get(60, TimeUnit.SECONDS); // not ended under its feet
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException stuck) {
          // close() drops the producer either way
        }
        try {
          held.producer.abortTransaction();
          open = false;
        } catch (RuntimeException fenced) {
          // fenced or broken: close() drops the producer, and its id's next producer aborts what is left
        }
      }
    }

    @Override
    public void close() {
      if (held != null) {
        give(held, !open); // a kept producer whose check never answered is kept: the next task checks again
      }
    }
  }

  /** A transactional producer of one id in this JVM, and the next batch it has to write. */
  static final class Held {
    final String id;
    final KafkaProducer<byte[], byte[]> producer;
    volatile long next;

    Held(String id, KafkaProducer<byte[], byte[]> producer, long next) {
      this.id = id;
      this.producer = producer;
      this.next = next;
    }
  }

  /**
   * Whether a producer kept from this JVM's last write of its id may write again: yes unless
   * another executor committed the id since (that executor's start fenced this producer). One
   * round trip, answered while the task computes its first rows; a commit still completing is not
   * seen yet, and then the fencing fails this producer's transaction and Spark's retry starts afresh.
   */
  static CompletableFuture<Boolean> stillCurrent(Admin admin, Held idle) {
    return admin.listConsumerGroupOffsets(idle.id, new ListConsumerGroupOffsetsOptions().requireStable(false))
        .partitionsToOffsetAndMetadata().toCompletionStage().toCompletableFuture()
        .thenApply(offsets -> {
          OffsetAndMetadata at = offsets.get(MARKER);
          return (at == null ? 0 : at.offset()) <= idle.next;
        });
  }

  /** A new producer of `id`: it fences any older one, and reads where its id's commits stand. */
  static Held start(String id, Map<String, String> config) {
    Properties props = new Properties();
    props.putAll(config);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
    try {
      producer.initTransactions(); // fences an older producer of this id and aborts its open transaction
      return new Held(id, producer, committedNext(admin(config), id));
    } catch (RuntimeException failed) {
      producer.close(Duration.ZERO);
      throw failed;
    }
  }

  static void give(Held held, boolean healthy) {
    if (healthy) {
      Held before = IDLE.put(held.id, held);
      if (before != null && before != held) {
        before.producer.close(Duration.ZERO);
      }
    } else {
      held.producer.close(Duration.ZERO);
    }
  }

  /**
   * The batch after the last one whose rows this id committed (0: none); after initTransactions,
   * exact (requireStable waits for a transaction still completing).
   */
  private static long committedNext(Admin admin, String group) {
    try {
      Map<TopicPartition, OffsetAndMetadata> offsets = admin
          .listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions().requireStable(true))
          .partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS);
      OffsetAndMetadata at = offsets.get(MARKER);
      return at == null ? 0 : at.offset();
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted reading the marker of " + group, interrupted);
    } catch (ExecutionException | TimeoutException failed) {
      throw new IllegalStateException("could not read the marker of " + group + ": " + failed, failed);
    }
  }

  private static Admin admin(Map<String, String> config) {
    return ADMINS.computeIfAbsent(config.get(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG), servers -> {
      Properties props = new Properties();
      for (String setting : AdminClientConfig.configNames()) {
        if (config.containsKey(setting)) {
          props.put(setting, config.get(setting));
        }
      }
      Admin created = Admin.create(props);
      try {
        created.createTopics(List.of(new NewTopic(MARKER_TOPIC, Optional.of(1), Optional.empty())))
            .all().get(60, TimeUnit.SECONDS);
      } catch (ExecutionException refused) {
        if (!(refused.getCause() instanceof TopicExistsException)) {
          created.close();
          throw new IllegalStateException("could not create Kafka topic " + MARKER_TOPIC + ": " + refused.getCause(),
              refused);
        }
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        created.close();
        throw new IllegalStateException("interrupted creating Kafka topic " + MARKER_TOPIC, interrupted);
      } catch (TimeoutException slow) {
        created.close();
        throw new IllegalStateException("timed out creating Kafka topic " + MARKER_TOPIC, slow);
      }
      return created;
    });
  }
}
