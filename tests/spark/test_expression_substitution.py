"""Why `${` is refused in an expression: Spark's parser substitutes variables, system properties
and environment variables into the text `F.expr` (what the pipeline builder calls) parses. If a
Spark upgrade stops doing so, this fails, and the refusal in `sluice.api.expressions` can go."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.expressions import ExpressionError, check_expression

pytestmark = [pytest.mark.spark]


def test_spark_substitutes_system_properties_into_an_expression_and_validation_refuses_it(spark: Any) -> None:
    from pyspark.sql import functions as F

    text = "'${system:java.version}'"
    java = spark.sparkContext._jvm.System.getProperty("java.version")
    assert spark.range(1).select(F.expr(text).alias("v")).first().v == java
    with pytest.raises(ExpressionError, match="holds '\\$\\{'"):
        check_expression(text)
