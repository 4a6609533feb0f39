"""Before a Kafka query starts: is the broker reachable and the topic there? (One sentence if not.)

Spark's Kafka source retries an unreachable broker forever and reads nothing from a missing topic,
so the runtime asks first and keeps the query Pending (retrying) with a clear reason instead.
"""

from __future__ import annotations

from typing import Any

from sluice.api.query import KafkaSink, KafkaSource, StreamingQuery


def kafka_problem(query: StreamingQuery, timeout: float = 5.0) -> str | None:
    """None if the query's Kafka source (and sink) can be used now, else why not."""
    endpoints: list[tuple[str, str, bool]] = []
    source, sink = query.spec.source, query.spec.sink
    if isinstance(source, KafkaSource):
        endpoints.append((source.bootstrapServers, source.topic, True))
    if isinstance(sink, KafkaSink):
        endpoints.append((sink.bootstrapServers, sink.topic, False))
    if not endpoints:
        return None
    for servers, topic, reading in endpoints:
        try:
            metadata = _admin(servers, timeout).list_topics(timeout=timeout)
        except Exception:
            return f"cannot reach Kafka at {servers}; check spec.{'source' if reading else 'sink'}.bootstrapServers (retrying)"
        if topic not in metadata.topics:
            return f"topic '{topic}' does not exist on {servers}; create it or fix spec.{'source' if reading else 'sink'}.topic (retrying)"
    return None


def topic_partitions(servers: str, topic: str, timeout: float = 5.0) -> int | None:
    """How many partitions `topic` has on `servers` (None: unreachable or missing)."""
    try:
        metadata = _admin(servers, timeout).list_topics(topic=topic, timeout=timeout)
    except Exception:
        return None
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def _admin(servers: str, timeout: float) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": servers, "log_level": 0, "socket.connection.setup.timeout.ms": int(timeout * 1000)})
