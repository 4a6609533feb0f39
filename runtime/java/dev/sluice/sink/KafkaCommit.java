package dev.sluice.sink;

import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * An exactly-once Kafka task's commit ({@link TransactionalKafkaWrite}): whether it wrote its rows,
 * or found them committed by an earlier run of its batch. Here, on the class path, so that the
 * driver reads it.
 */
public record KafkaCommit(boolean skipped) implements WriterCommitMessage {}
