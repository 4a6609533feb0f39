"""Static checks of the Spark SQL expressions a manifest may carry, without starting Spark.

Expressions are parsed with sqlglot's Spark dialect. An expression must be a single, row-local
expression: no subqueries, no table or file references, no window (OVER) clauses, no aggregates
and only functions on an allow-list. The checked text is what reaches Spark, unchanged.
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .common import shown

# Row-local functions, by sqlglot's canonical name for the Spark function (e.g. Spark's
# `instr` parses as STR_POSITION). Anything else, including every aggregate, is refused.
ALLOWED_FUNCTIONS: frozenset[str] = frozenset(
    {
        # logic and conditionals
        "AND", "OR", "NOT", "IF", "CASE", "COALESCE", "NANVL", "GREATEST", "LEAST",
        "isnull", "isnotnull", "nullif",
        # arithmetic
        "ABS", "CEIL", "FLOOR", "ROUND", "SQRT", "EXP", "LN", "LOG", "POWER", "SIGN", "pmod",
        # strings
        "UPPER", "LOWER", "LENGTH", "SUBSTRING", "CONCAT", "CONCAT_WS", "TRIM", "STARTS_WITH",
        "ENDS_WITH", "CONTAINS", "REGEXP_EXTRACT", "REGEXP_REPLACE", "REGEXP_LIKE",
        "STR_POSITION", "PAD", "REGEXP_SPLIT", "MD5", "SHA2", "hash", "xxhash64",
        "JSON_EXTRACT_SCALAR",
        # types and time
        "CAST", "TRY_CAST", "CURRENT_TIMESTAMP", "UNIX_TO_STR", "STR_TO_UNIX", "TIMESTAMP_TRUNC",
        "HOUR", "MINUTE", "SECOND", "YEAR", "MONTH", "DAY_OF_MONTH", "DAY_OF_WEEK",
        "TS_OR_DS_TO_DATE", "TIME_TO_STR", "TIME_STR_TO_TIME", "UNIX_MILLIS",
        "timestamp_seconds", "timestamp_millis",
        # containers
        "ARRAY_SIZE", "STRUCT", "ARRAY",
    }
)

# Node types that reach outside the row.
_FORBIDDEN: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Select, "a subquery"),
    (exp.Subquery, "a subquery"),
    (exp.Exists, "a subquery"),
    (exp.Table, "a table reference"),
    (exp.Window, "a window (OVER) clause"),
    (exp.Placeholder, "a parameter placeholder"),
    (exp.Star, "'*'"),
)

# Node types whose value is boolean. A bare column is accepted too (its type is only known to Spark).
_BOOLEAN_ROOTS: tuple[type[exp.Expr], ...] = (
    exp.And, exp.Or, exp.Not, exp.Xor, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.NullSafeEQ, exp.NullSafeNEQ, exp.Like, exp.ILike, exp.RegexpLike, exp.In, exp.Between,
    exp.Is, exp.Boolean, exp.StartsWith, exp.EndsWith, exp.Contains, exp.Column,
)
_BOOLEAN_FUNCTIONS = frozenset({"isnull", "isnotnull"})


class ExpressionError(ValueError):
    """An expression a manifest carries is not acceptable; the message is one sentence."""


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name)
    return node.sql_name()


MAX_LENGTH = 4096
"""Characters an expression may have (the CRD's maxLength too)."""
MAX_DEPTH = 32
"""Parentheses an expression may nest."""


def _q(text: str) -> str:
    return f"'{shown(text)}'"


def _depth(text: str) -> int:
    deepest = depth = 0
    for char in text:
        depth += (char == "(") - (char == ")")
        deepest = max(deepest, depth)
    return deepest


@lru_cache(maxsize=4096)
def _parse(text: str) -> exp.Expr:
    if not text.strip():
        raise ExpressionError("the expression is empty; write a Spark SQL expression")
    if "${" in text:  # Spark's parser substitutes ${...} (variables, system properties, env) first
        raise ExpressionError(f"{_q(text)} holds '${{', which Spark replaces with configuration values and "
                              "environment variables; write the value itself")
    if _depth(text) > MAX_DEPTH:
        raise ExpressionError(f"{_q(text)} nests parentheses more than {MAX_DEPTH} deep; write it flatter")
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError) as error:
        details = getattr(error, "errors", None) or [{}]
        col = details[0].get("col")
        near = f" (it breaks off near column {col})" if col else ""
        raise ExpressionError(f"{_q(text)} is not a valid Spark SQL expression{near}") from None
    except RecursionError:  # deep nesting other than parentheses (NOT NOT NOT ..., a - - - ...)
        raise ExpressionError(f"{_q(text)} nests too deeply; write it flatter") from None
    if isinstance(tree, exp.Block) or ";" in text:
        raise ExpressionError(f"{_q(text)} holds more than one statement; write a single expression")
    for node in tree.walk():
        for kind, what in _FORBIDDEN:
            if isinstance(node, kind):
                raise ExpressionError(
                    f"{_q(text)} uses {what}, which reaches outside the row; "
                    "only row-local expressions are allowed"
                )
        if isinstance(node, exp.Column) and node.table:
            raise ExpressionError(
                f"{_q(text)} qualifies a column with '{node.table}'; name columns of the row directly"
            )
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if name not in ALLOWED_FUNCTIONS:
                raise ExpressionError(
                    f"{_q(text)} calls {name.lower()}(), which is not on Sluice's allow-list of "
                    "row-local functions"
                )
    return tree


def check_expression(text: str) -> str:
    """Check a row-local value expression (select, withColumn); returns the text unchanged."""
    tree = _parse(text)
    if isinstance(tree, exp.Alias):
        raise ExpressionError(f"{_q(text)} carries an alias; give the name in the step's 'name' field")
    return text


def check_select_item(text: str) -> str:
    """Check a select item: an expression with an optional `AS alias`."""
    _parse(text)
    return text


def check_predicate(text: str) -> str:
    """Check a filter: a row-local expression whose value is boolean."""
    tree = _parse(text)
    root = tree.unnest() if isinstance(tree, exp.Paren) else tree
    if isinstance(root, _BOOLEAN_ROOTS):
        return text
    if isinstance(root, exp.Anonymous) and str(root.name).lower() in _BOOLEAN_FUNCTIONS:
        return text
    raise ExpressionError(
        f"{_q(text)} is not a boolean expression; a filter needs a condition such as a comparison"
    )


def referenced_columns(text: str) -> set[str]:
    """The row's columns an (already checked) expression reads, lower-cased."""
    return {str(node.name).lower() for node in _parse(text).find_all(exp.Column)}


def output_name(text: str) -> str | None:
    """The column a select item produces: its alias, or the column it names; None for an
    unaliased expression (Spark names those itself)."""
    tree = _parse(text)
    if isinstance(tree, exp.Alias):
        return str(tree.alias).lower()
    if isinstance(tree, exp.Column):
        return str(tree.name).lower()
    return None


def schema_columns(ddl: str) -> list[str] | None:
    """The top-level field names of a Spark DDL schema ('a INT, b STRUCT<x: INT, y: INT>'),
    lower-cased; None if it is not one."""
    parts, depth, current = [], 0, ""
    for char in ddl:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    names = []
    for part in parts:
        words = part.strip().split(None, 1)
        if len(words) != 2 or depth != 0:
            return None
        name = words[0].rstrip(":").strip("`")
        if not name:
            return None
        names.append(name.lower())
    return names
