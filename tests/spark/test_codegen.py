"""`runtime.codegen`: Spark's count of Janino compilations, reached through py4j (a Spark internal:
an upgrade that moves `CodegenMetrics` fails here), and what moves it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sluice.runtime import codegen

pytestmark = [pytest.mark.spark]


def test_a_new_literal_compiles_a_class_and_the_same_query_again_does_not(spark: Any) -> None:
    threshold = random.randrange(10**9)  # a literal no earlier plan in this JVM had
    query = f"SELECT id * 3 AS x FROM range(100) WHERE id % 7 > {threshold % 5} AND id < {threshold}"
    before = codegen.compiles(spark)
    spark.sql(query).collect()
    first = codegen.compiles(spark)
    assert first > before  # the pipeline's class, with the literals in its source
    spark.sql(query).collect()
    assert codegen.compiles(spark) == first  # the same source: Spark's cache, nothing compiled
    spark.sql(query.replace(str(threshold), str(threshold + 1))).collect()
    assert codegen.compiles(spark) > first  # one literal changed: compiled again


def test_the_runtime_serves_the_count_on_its_metrics(spark: Any, host_factory: Any) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    host = host_factory()
    spark.sql(f"SELECT id + {random.randrange(10**9)} FROM range(3)").collect()
    served = {s.name: s.value for f in text_string_to_metric_families(generate_latest(host.metrics.registry).decode())
              for s in f.samples}
    assert served["sluice_runtime_codegen_compiles_total"] == codegen.compiles(spark) > 0
