"""A safe calculator: exact arithmetic on a parsed expression, never ``eval``.

``evaluate("4837 * 29 - 1120")`` returns ``"139153"``. The expression is parsed with :mod:`ast`
and only these nodes are evaluated: numbers (whole or decimal), ``+ - * / // % **``,
parentheses, unary ``-`` and ``+``. Names, calls, attributes, strings, comparisons and every
other construct are refused, so ``__import__('os')`` is an error message, not an import.

Arithmetic is exact (:class:`fractions.Fraction`): ``1 / 3 * 3`` is ``1``. A whole result is
written as an integer; any other result as a decimal, exact when it has at most
:data:`DECIMALS` places and rounded to that many otherwise (``2 / 3`` -> ``0.6666666667``).

Bounds, so that no input can make the calculator slow: the expression has at most
:data:`MAX_CHARS` characters, an exponent is a whole number of size at most
:data:`MAX_EXPONENT`, and every number along the way (numerator and denominator) stays below
``10 ** MAX_DIGITS``; ``9**9**9`` is refused before anything large is computed.

Spellings models use are read too: ``^`` means ``**``, ``x`` and ``×`` between numbers mean
``*``, ``÷`` means ``/``, and ``,`` between digit groups (``4,837``) is a thousands separator.
Every failure raises :class:`CalculatorError` with a message fit to show the model.
"""

from __future__ import annotations

import ast
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

MAX_CHARS = 300
MAX_DIGITS = 100
MAX_EXPONENT = 1000
DECIMALS = 10
_LIMIT = 10**MAX_DIGITS

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: lambda a, b: a % b,
}
_REFUSED = {
    ast.Name: "names",
    ast.Call: "function calls",
    ast.Attribute: "attributes",
    ast.Subscript: "indexing",
    ast.Compare: "comparisons",
    ast.BoolOp: "'and'/'or'",
    ast.Lambda: "lambdas",
    ast.Tuple: "commas",
}


class CalculatorError(ValueError):
    """An expression the calculator will not or cannot evaluate; the message says why."""


def evaluate(expression: str) -> str:
    """The value of ``expression`` as text (see the module docstring), or CalculatorError."""
    return format_number(compute(expression))


def compute(expression: str) -> Fraction:
    """The exact value of ``expression``."""
    if not isinstance(expression, str):
        raise CalculatorError(f"the expression must be text, not {type(expression).__name__}")
    if len(expression) > MAX_CHARS:
        raise CalculatorError(f"the expression is too long ({len(expression)} > {MAX_CHARS} chars)")
    source = _respell(expression)
    if not source:
        raise CalculatorError("the expression is empty")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # the parser's own message points into our respelled text; say it plainly instead
        raise CalculatorError(
            f"cannot read {expression.strip()[:60]!r}: use numbers, + - * / // % ** and parentheses"
        ) from None
    try:
        return _eval(tree.body, source)
    except RecursionError:
        raise CalculatorError("the expression is nested too deeply") from None


def _respell(expression: str) -> str:
    text = expression.strip().replace("×", "*").replace("÷", "/").replace("^", "**")
    text = re.sub(r"(?<=\d)\s*[xX]\s*(?=[\d(])", " * ", text)
    # 4,837 -> 4837 (a comma between digit groups of three), before the tuple check sees it
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


def _eval(node: ast.expr, source: str) -> Fraction:
    if isinstance(node, ast.Constant):
        return _bounded(_number(node, source))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, source), _eval(node.right, source)
        if isinstance(node.op, ast.Pow):
            return _bounded(_power(left, right))
        operation = _BINARY.get(type(node.op))
        if operation is None:
            raise CalculatorError(f"the operator {_op_text(node, source)!r} is not allowed")
        if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            raise CalculatorError("division by zero")
        return _bounded(operation(left, right))
    what = _REFUSED.get(type(node), f"{type(node).__name__.lower()} expressions")
    raise CalculatorError(
        f"{what} are not allowed: write one expression of numbers and + - * / // % **"
    )


def _number(node: ast.Constant, source: str) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError(f"{value!r} is not a number")
    if isinstance(value, int):
        return Fraction(value)
    # read a decimal from its source text (0.1 stays exactly 1/10), bounded before converting
    text = ast.get_source_segment(source, node) or repr(value)
    try:
        decimal = Decimal(text.replace("_", ""))
    except InvalidOperation:
        raise CalculatorError(f"cannot read the number {text!r}") from None
    if not decimal.is_finite() or abs(decimal.adjusted()) >= MAX_DIGITS:
        raise CalculatorError(f"the number {text} is too large or too small")
    return Fraction(decimal)


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("an exponent must be a whole number")
    power = int(exponent)
    if abs(power) > MAX_EXPONENT:
        raise CalculatorError(f"the exponent {power} is too large (at most {MAX_EXPONENT})")
    if base == 0 and power < 0:
        raise CalculatorError("division by zero")
    # log2 of the result is about bits * |power|: refuse before computing anything huge
    bits = max(abs(base.numerator).bit_length(), base.denominator.bit_length()) - 1
    if bits * abs(power) > MAX_DIGITS * 4:
        raise CalculatorError(f"the result has more than {MAX_DIGITS} digits")
    return base**power


def _bounded(value: Fraction) -> Fraction:
    if abs(value.numerator) >= _LIMIT or value.denominator >= _LIMIT:
        raise CalculatorError(f"the result has more than {MAX_DIGITS} digits")
    return value


def _op_text(node: ast.BinOp, source: str) -> str:
    left, right = node.left, node.right
    text = source[left.end_col_offset : right.col_offset] if left.end_col_offset else ""
    return text.strip(" ()") or type(node.op).__name__


def format_number(value: Fraction) -> str:
    """``value`` as an integer, or as a decimal with at most :data:`DECIMALS` places."""
    if value.denominator == 1:
        return str(value.numerator)
    scaled = round(abs(value) * 10**DECIMALS)  # exact up to DECIMALS places, rounded past them
    whole, frac = divmod(scaled, 10**DECIMALS)
    digits = str(frac).rjust(DECIMALS, "0").rstrip("0")
    sign = "-" if value < 0 and scaled else ""
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


__all__ = ["CalculatorError", "compute", "evaluate", "format_number"]
