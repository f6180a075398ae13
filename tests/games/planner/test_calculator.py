"""The safe calculator: exact values worked out by hand, and hostile input refused quickly.

Run with ``.venv/bin/python -m pytest -q tests/games/planner/test_calculator.py``.
"""

from __future__ import annotations

import builtins
import time
from fractions import Fraction

import pytest

from games.planner.calculator import (
    MAX_CHARS,
    CalculatorError,
    compute,
    evaluate,
    format_number,
)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("4837 * 29 - 1120", "139153"),  # 4837 * 29 = 140273
        ("136 * 167 + 114 * 257", "52010"),  # 22712 + 29298
        ("(1000 + 234) * 17", "20978"),
        ("55913 % 47", "30"),  # 47 * 1189 = 55883
        ("13545 / 43", "315"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),  # floor, as Python
        ("-7 % 3", "2"),
        ("2 ** 10", "1024"),
        ("2 ** -3", "0.125"),
        ("-(3 - 5)", "2"),
        ("+4", "4"),
        ("1 / 3 * 3", "1"),  # exact: no 0.9999999999
        ("0.1 + 0.2", "0.3"),
        ("2 / 3", "0.6666666667"),  # rounded at 10 places
        ("-1 / 3", "-0.3333333333"),
        ("10 / 4", "2.5"),
        ("1.5e3 + 1", "1501"),
        ("1_000 * 3", "3000"),
        ("  12  *  12  ", "144"),
        ("10 ** 99", "1" + "0" * 99),  # 100 digits: the largest allowed size
        ("-" * 299 + "1", "-1"),  # 299 unary minuses, nested 299 deep
        ("(" * 149 + "1" + ")" * 149, "1"),  # as deep as MAX_CHARS allows
    ],
)
def test_values_worked_out_by_hand(expression: str, value: str) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2^10", "1024"),  # ^ is read as a power, as models write it
        ("4,837 x 2", "9674"),  # a thousands separator and an x for times
        ("3 × 4", "12"),
        ("10 ÷ 4", "2.5"),
        ("1,234,567 + 1", "1234568"),
    ],
)
def test_spellings_models_use(expression: str, value: str) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "function calls are not allowed"),
        ("__import__('os').system('ls')", "function calls are not allowed"),
        ("os.sep", "attributes are not allowed"),
        ("x + 1", "names are not allowed"),
        ("().__class__", "attributes are not allowed"),
        ("(lambda: 1)", "lambdas are not allowed"),
        ("[1, 2]", "list expressions are not allowed"),
        ("1 < 2", "comparisons are not allowed"),
        ("(1, 2)", "commas are not allowed"),
        ("'a' * 3", "'a' is not a number"),
        ("True + 1", "True is not a number"),
        ("2j", "2j is not a number"),
        ("1 << 3", "the operator '<<' is not allowed"),
        ("6 & 3", "the operator '&' is not allowed"),
        ("1 / 0", "division by zero"),
        ("5 // (3 - 3)", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 0.5", "an exponent must be a whole number"),
        ("9**9**9", "the exponent 387420489 is too large (at most 1000)"),
        ("2 ** 1001", "the exponent 1001 is too large"),
        ("2 ** 1000", "the result has more than 100 digits"),
        ("10 ** 100", "the result has more than 100 digits"),
        ("10 ** 99 * 10", "the result has more than 100 digits"),
        ("1 / 10 ** 99 / 10", "the result has more than 100 digits"),
        ("1e999999", "the number 1e999999 is too large or too small"),
        ("1e-200", "too large or too small"),
        ("1 +", "cannot read '1 +'"),
        ("", "the expression is empty"),
        ("   ", "the expression is empty"),
        ("1" * (MAX_CHARS + 1), f"the expression is too long ({MAX_CHARS + 1} > {MAX_CHARS}"),
    ],
)
def test_hostile_and_bad_input_is_refused_with_a_reason(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError) as caught:
        evaluate(expression)
    assert message in str(caught.value)


def test_never_calls_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the calculator must not eval or exec")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert evaluate("(2 + 3) * 4") == "20"
    with pytest.raises(CalculatorError):
        evaluate("__import__('os')")


def test_huge_inputs_are_refused_before_any_work() -> None:
    # every one of these would take minutes or all memory if computed
    start = time.perf_counter()
    for expression in ("9**9**9", "(10**99)**(10**99)", "2**1000**1000", "99**999"):
        with pytest.raises(CalculatorError):
            evaluate(expression)
    assert time.perf_counter() - start < 1.0


def test_non_text_is_refused() -> None:
    with pytest.raises(CalculatorError, match="must be text, not int"):
        evaluate(42)  # type: ignore[arg-type]


def test_compute_is_exact() -> None:
    assert compute("1 / 3") == Fraction(1, 3)
    assert compute("0.1") == Fraction(1, 10)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(7), "7"),
        (Fraction(-5, 2), "-2.5"),
        (Fraction(1, 8), "0.125"),
        (Fraction(2, 3), "0.6666666667"),
        (Fraction(1, 10**12), "0"),
        (Fraction(-1, 10**12), "0"),  # never "-0"
        (Fraction(19, 2 * 10**10), "0.000000001"),  # 9.5e-10 rounds to 1e-9 at 10 places
    ],
)
def test_format_number(value: Fraction, text: str) -> None:
    assert format_number(value) == text
