"""Spark's generated-code compilations, read from the driver's JVM through py4j.

Spark compiles each whole-stage pipeline's Java source with Janino and caches the class by its
source text (`spark.sql.codegen.cache.maxEntries`): a query's literals are pasted into that text,
so a filter with a threshold of its own is a class of its own, and a cache too small for every
query's classes compiles again each batch. Spark counts the compilations in its `CodegenMetrics`
(one histogram of compile times per JVM: its count is the compilations). A Spark internal:
`tests/spark/test_codegen.py` fails loudly if an upgrade moves it.

With executors in JVMs of their own (Kubernetes, local-cluster), this is the driver's count only;
on a local master the driver's JVM runs every task, so it is all of them.
"""

from __future__ import annotations

from typing import Any


def compiles(spark: Any) -> int:
    """Janino compilations in the driver's JVM since it started."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())
