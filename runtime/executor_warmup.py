"""Warming a new executor before state moves onto it: a small job whose tasks prefer it.

A new executor's first tasks pay for its JVM: loading the task path's classes, its first
connections to the driver and the other executors, the interpreter before the JIT. Megaphone's
rule (`executors.ExecutorView.warm`) moves state partitions onto an executor only once it has run
a task; Spark, though, keeps a stream's tasks where their data is (its Kafka partitions' cached
consumers, its state stores), so a new executor may run none for a long time. This job gives it
some: `TASKS` tasks that each prefer the executor by Spark's location tag for an executor
(`executor_<host>_<id>`, the tag Spark gives a cached block). Spark's locality wait (3 s by
default) holds them for it while its cores are busy.

PySpark cannot say where a task should run, so the job is built through py4j
(`SparkContext.makeRDD` with location preferences, Scala API): one small module, and
`tests/spark/test_executors.py` fails loudly if a Spark upgrade changes either the call or the tag.
The tasks count their rows in the JVM (no Python worker starts).
"""

from __future__ import annotations

from typing import Any

TASKS = 4
"""Tasks of one warm-up job: enough to run on each core of a small executor."""


def location(host: str, executor_id: str) -> str:
    """Spark's preferred-location string for one executor (`TaskLocation`'s executor tag)."""
    return f"executor_{host}_{executor_id}"


def run_on(spark: Any, host: str, executor_id: str, tasks: int = TASKS) -> int:
    """Run a `tasks`-task job whose every task prefers the executor; blocks until it finishes and
    returns the rows it counted (`tasks`)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    where = jvm.PythonUtils.toSeq([location(host, executor_id)])
    rows = jvm.PythonUtils.toSeq([jvm.scala.Tuple2(i, where) for i in range(tasks)])
    any_object = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.Object"))
    sc.setJobDescription(f"sluice: warm executor {executor_id} before state moves onto it")
    try:
        return int(sc._jsc.sc().makeRDD(rows, any_object).count())
    finally:
        sc.setJobDescription(None)
