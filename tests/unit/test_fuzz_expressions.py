"""Escape attempts against the expression allow-list, hand-written and generated: every one is
refused with one sentence (never an exception of another kind), and what the allow-list accepts
is what a tenant may run on a shared driver."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.api.expressions import (
    MAX_DEPTH,
    ExpressionError,
    check_expression,
    check_predicate,
    check_select_item,
)
from sluice.api.manifest import parse_text

CHECKS: tuple[Callable[[str], str], ...] = (check_predicate, check_expression, check_select_item)

ESCAPES = [
    # reflection and the JVM
    "reflect('java.lang.Runtime', 'getRuntime')", "REFLECT('a', 'b')", "ReFlEcT('a', 'b')", "`reflect`('a', 'b')",
    "java_method('java.lang.System', 'exit', 0)", "try_reflect('a', 'b')", "named_struct('a', reflect('x', 'y'))",
    "case when reflect('a', 'b') = 'x' then true else false end", "amount > 1 AND `java_method`('a', 'b') IS NULL",
    # comments around a call
    "/* hi */ reflect('a', 'b')", "amount > 1 /* */ OR reflect('a', 'b') = 'x'", "amount > 1 --\nOR reflect('a','b') = 'x'",
    # lambdas and higher-order functions
    "transform(array(1), x -> reflect('a', 'b'))", "filter(array(1), x -> x > 1)", "exists(array(1), x -> x > 1)",
    # files, tables, subqueries, the session
    "read_files('/etc/passwd')", "input_file_name()", "(SELECT 1)", "amount IN (SELECT amount FROM t)",
    "EXISTS (SELECT 1)", "t.amount > 1", "current_user()", "current_database()", "version()",
    # configuration, system properties and environment variables (Spark substitutes ${...})
    "'${env:HOME}' = key", "concat('${system:user.home}', key)", "\"${spark.app.name}\" = key",
    # failing, random or unbounded work
    "raise_error('x')", "assert_true(false)", "uuid()", "rand() > 0.5", "sequence(1, 100000000)",
    "repeat(key, 1000000000)", "spark_partition_id()", "monotonically_increasing_id()",
    # aggregates, windows, placeholders, several statements
    "sum(amount) > 1", "count(*) > 1", "row_number() OVER (ORDER BY amount) > 1", "amount > ?", "amount > :p",
    "1; DROP TABLE t", "amount > 1; reflect('a', 'b')",
    # look-alikes and very deep or long input
    "refl\u0435ct('a', 'b')", "(" * 5000 + "1" + ")" * 5000 + " > 0", "NOT " * 1000 + "x", "- " * 2000 + "1 > 0",
    "(" * (MAX_DEPTH + 1) + "amount" + ")" * (MAX_DEPTH + 1) + " > 0",
]


def one_sentence(message: str) -> bool:
    return "\n" not in message and len(message) < 600 and not message.startswith("Traceback")


@pytest.mark.parametrize("text", ESCAPES, ids=[e[:40] for e in ESCAPES])
def test_every_escape_attempt_is_refused_in_one_sentence(text: str) -> None:
    for check in CHECKS:
        with pytest.raises(ExpressionError) as refused:
            check(text)
        assert one_sentence(str(refused.value)), str(refused.value)


def test_an_expression_longer_than_the_limit_is_refused_by_the_manifest() -> None:
    long = "a" * 5000 + " > 1"
    text = f"""apiVersion: sluice.dev/v1alpha1
kind: StreamingQuery
metadata: {{name: q, namespace: t}}
spec:
  pool: p
  source: {{type: rate, rowsPerSecond: 1}}
  pipeline: [{{filter: "{long}"}}]
  sink: {{type: noop}}
  sla: {{latencyTarget: 1s}}
"""
    _, errors = parse_text(text, "m.yaml")
    assert [(e.path, "at most 4096 characters" in e.message) for e in errors] == [("spec.pipeline[0].filter", True)], errors


def test_what_a_tenant_may_write_is_still_accepted() -> None:
    for text in ["amount > 900", "key = 'it''s'", "upper(key) LIKE 'A%'", "amount > 1 -- a comment",
                 "coalesce(amount, 0) * 2 > 10", "(" * MAX_DEPTH + "amount" + ")" * MAX_DEPTH + " > 0"]:
        assert check_predicate(text) == text


TOKENS = st.sampled_from([
    "reflect", "java_method", "(", ")", "'", '"', "`", ",", " ", "->", "x", "amount", "key", "SELECT", "FROM",
    "/*", "*/", "--", "\n", "${", "}", "env:HOME", "1", "> ", "AND", "OR", "NOT", "upper", "concat", ";", ".", "*",
    "OVER", "?", ":p", "\u0435", "\\", "CAST", "AS", "INT", "array", "transform", "x'41'",
])


@settings(max_examples=1000, deadline=None)
@given(st.lists(TOKENS, min_size=1, max_size=40).map("".join))
def test_generated_expressions_are_accepted_or_refused_in_one_sentence(text: str) -> None:
    for check in CHECKS:
        try:
            check(text)
        except ExpressionError as refused:
            assert one_sentence(str(refused)), (text, str(refused))
            continue
        # accepted: no disallowed call and no substitution survives the checks
        lowered = text.lower()
        assert "${" not in text and not any(f"{name}(" in lowered.replace(" ", "").replace("`", "")
                                            and "--" not in lowered and "/*" not in lowered
                                            for name in ("reflect", "java_method", "transform")), text
