"""The Flight Recorder summary batch-cost keeps: shares of samples, by hand-made stacks."""

from __future__ import annotations

from sluice.bench.jfr import hottest


def test_the_summary_counts_top_frames_and_areas_anywhere_on_the_stack() -> None:
    janino = ["org.codehaus.janino.UnitCompiler.compile", "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator.doCompile"]
    planning = ["java.util.HashMap.getNode", "org.apache.spark.sql.catalyst.trees.TreeNode.transformDown"]
    kafka = ["java.util.HashMap.getNode", "org.apache.kafka.clients.consumer.KafkaConsumer.poll"]
    summary = hottest([janino, planning, planning, kafka], top=2)
    assert summary["samples"] == 4
    assert summary["top_methods"] == [["java.util.HashMap.getNode", 0.75], ["org.codehaus.janino.UnitCompiler.compile", 0.25]]
    areas = summary["areas"]
    assert areas["janino"] == 0.25 and areas["codegen"] == 0.25 and areas["catalyst"] == 0.75
    assert areas["kafka"] == 0.25 and areas["hadoop fs"] == 0.0
    assert hottest([]) == {"samples": 0, "top_methods": [], "areas": {}}
