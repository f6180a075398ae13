"""arena/eval/pass_k.py: tau-bench's pass^k estimator on vectors worked out by hand.

Run with `.venv/bin/python -m pytest -q tests/arena/eval/test_pass_k.py`.
"""

from __future__ import annotations

import pytest

from arena.eval.pass_k import pass_hat_curve, pass_hat_k


def test_one_task_three_successes_in_four() -> None:
    results = {"t": [True, True, False, True]}
    # C(3,1)/C(4,1) = 3/4; C(3,2)/C(4,2) = 3/6; C(3,3)/C(4,3) = 1/4; C(3,4)/C(4,4) = 0/1
    assert pass_hat_k(results, 1) == pytest.approx(0.75)
    assert pass_hat_k(results, 2) == pytest.approx(0.5)
    assert pass_hat_k(results, 3) == pytest.approx(0.25)
    assert pass_hat_k(results, 4) == 0.0


def test_tasks_are_averaged() -> None:
    results = {"a": [True, True, False, False], "b": [True] * 4, "c": [False] * 4}
    # k=2: a: C(2,2)/C(4,2) = 1/6, b: 1, c: 0 -> (1/6 + 1 + 0) / 3 = 7/18
    assert pass_hat_k(results, 2) == pytest.approx(7 / 18)
    # k=1 is the plain success rate: (2/4 + 1 + 0) / 3 = 1/2
    assert pass_hat_k(results, 1) == pytest.approx(0.5)
    assert pass_hat_curve(results) == pytest.approx(
        {1: 0.5, 2: 7 / 18, 3: (0 + 1 + 0) / 3, 4: (0 + 1 + 0) / 3}
    )


def test_tasks_may_have_different_numbers_of_tries() -> None:
    results = {1: [True, False], 2: [True, True, True, False, False]}
    # k=2: task 1: C(1,2)/C(2,2) = 0; task 2: C(3,2)/C(5,2) = 3/10 -> 3/20
    assert pass_hat_k(results, 2) == pytest.approx(3 / 20)
    assert list(pass_hat_curve(results)) == [1, 2]  # up to the fewest tries


def test_truthy_values_count_as_successes() -> None:
    assert pass_hat_k({"t": [1, 0, 1.0]}, 1) == pytest.approx(2 / 3)


def test_bad_inputs_raise_clearly() -> None:
    with pytest.raises(ValueError, match="task 't' has 2 tries, fewer than k=3"):
        pass_hat_k({"t": [True, False]}, 3)
    with pytest.raises(ValueError, match="k must be a whole number >= 1, got 0"):
        pass_hat_k({"t": [True]}, 0)
    with pytest.raises(ValueError, match="k must be a whole number >= 1, got True"):
        pass_hat_k({"t": [True]}, True)
    with pytest.raises(ValueError, match="at least one task"):
        pass_hat_k({}, 1)
    with pytest.raises(ValueError, match="at least one task"):
        pass_hat_curve({})
