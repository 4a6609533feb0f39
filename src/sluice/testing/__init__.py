"""Real services for tests and benchmarks (Kafka broker, process hygiene); not used in production."""
