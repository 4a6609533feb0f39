"""Sluice: a Kubernetes operator for multi-tenant Spark Structured Streaming with latency SLAs."""

__version__ = "0.1.0"
