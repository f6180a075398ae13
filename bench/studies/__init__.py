"""Studies: one-off experiments, each of which answered one question.

A benchmark (``bench/*.py``) compares implementations side by side and ends in one JSON line;
it is rerun whenever what it measures changes. A study asks a question about learning (does the
card get learned, does a bf16 copy follow a step, how many games does Tic-Tac-Toe need), and its
module docstring names that question and where the answer is written (a section of
docs/learning.md; the latest figures in docs/benchmarks.md). Run one as a script from the
repository root, ``.venv/bin/python bench/studies/NAME.py --help``; the Kuhn studies import
:mod:`kuhn_choose` (its legal-reply policy) as a sibling module.
"""
