"""Sluice: a Kubernetes operator for multi-tenant Spark Structured Streaming with latency SLAs."""

from sluice.compiled import guard as _guard

__version__ = "0.1.0"

_guard()  # a compiled scheduler core older than its sources is bypassed (sluice.compiled)
