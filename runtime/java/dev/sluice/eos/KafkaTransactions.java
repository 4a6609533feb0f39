package dev.sluice.eos;

import dev.sluice.sink.KafkaCommit;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
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
 */
public final class KafkaTransactions {
  /** The topic the markers are group offsets on: one partition, never written. */
  public static final String MARKER_TOPIC = "sluice-exactly-once";
  private static final TopicPartition MARKER = new TopicPartition(MARKER_TOPIC, 0);
  private static final Map<String, Held> IDLE = new ConcurrentHashMap<>();
  private static final Map<String, Admin> ADMINS = new ConcurrentHashMap<>();

  private KafkaTransactions() {}

  /** A task's writer: batch `batch` of the partition whose transactional id is `id`. */
  public static DataWriter<InternalRow> writer(Map<String, String> config, String topic, String id, long batch,
      int keyIndex, int valueIndex) {
    return new Writer(take(id, config), topic, batch, keyIndex, valueIndex);
  }

  static final class Writer implements DataWriter<InternalRow> {
    private final Held held;
    private final String topic;
    private final long batch;
    private final int keyIndex;
    private final int valueIndex;
    private final boolean skip;
    private boolean open;

    Writer(Held held, String topic, long batch, int keyIndex, int valueIndex) {
      this.held = held;
      this.topic = topic;
      this.batch = batch;
      this.keyIndex = keyIndex;
      this.valueIndex = valueIndex;
      this.skip = held.next > batch;
      if (!skip) {
        try {
          held.producer.beginTransaction();
        } catch (RuntimeException broken) {
          give(held, false);
          throw broken;
        }
        open = true;
      }
    }

    private static byte[] bytes(InternalRow row, int index) {
      return index < 0 || row.isNullAt(index) ? null : row.getBinary(index);
    }

    @Override
    public void write(InternalRow row) throws IOException {
      if (skip) {
        return; // this partition of this batch committed in an earlier run
      }
      try {
        held.producer.send(new ProducerRecord<>(topic, bytes(row, keyIndex), bytes(row, valueIndex)));
      } catch (RuntimeException error) {
        throw new IOException("sluice sink: a Kafka send in transaction " + held.id + " failed: " + error, error);
      }
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      if (skip) {
        return new KafkaCommit(true);
      }
      try {
        held.producer.sendOffsetsToTransaction(Map.of(MARKER, new OffsetAndMetadata(batch + 1)),
            new ConsumerGroupMetadata(held.id));
        held.producer.commitTransaction(); // flushes the rows first; throws if a send failed
      } catch (RuntimeException error) {
        throw new IOException("sluice sink: Kafka transaction " + held.id + " of batch " + batch + " failed: " + error,
            error);
      }
      open = false;
      held.next = batch + 1;
      return new KafkaCommit(false);
    }

    @Override
    public void abort() {
      if (open) {
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
      give(held, !open);
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

  static Held take(String id, Map<String, String> config) {
    Admin admin = admin(config);
    Held idle = IDLE.remove(id);
    if (idle != null) {
      // another executor wrote this partition since (Spark moved its task): that producer fenced
      // this one, whose transaction would fail at its commit; start afresh instead
      boolean current;
      try {
        current = committedNext(admin, id, false) <= idle.next;
      } catch (RuntimeException unreadable) { // the broker gone: not kept, not leaked
        idle.producer.close(Duration.ZERO);
        throw unreadable;
      }
      if (current) {
        return idle;
      }
      idle.producer.close(Duration.ZERO);
    }
    Properties props = new Properties();
    props.putAll(config);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
    try {
      producer.initTransactions(); // fences an older producer of this id and aborts its open transaction
      return new Held(id, producer, committedNext(admin, id, true));
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
   * The batch after the last one whose rows this id committed (0: none). `stable`: wait for a
   * transaction still completing (after initTransactions: exact); else what is committed now (one
   * round trip; a commit still completing is not seen yet).
   */
  private static long committedNext(Admin admin, String group, boolean stable) {
    try {
      Map<TopicPartition, OffsetAndMetadata> offsets = admin
          .listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions().requireStable(stable))
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
