"""Run: .venv/bin/python -m pytest -q tests/arena/eval/test_ratings.py

The match log reader and the ratings against numbers worked out independently: Wilson by hand,
Bradley-Terry recovering a simulated population's known strengths and first-mover term, the same
fit by scipy's optimiser, pair tables by hand, tolerant reading of malformed lines.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize

from arena.eval.match_log import Match, MatchLog, clusters
from arena.eval.ratings import (
    PRIOR_SD,
    fit_bradley_terry,
    pair_stats,
    parse_match,
    rate_multiplayer,
    ratings_report,
    read_match_log,
    wilson,
)


def match(first: str, second: str, score0: float, seed: int = 0, **extra: Any) -> Match:
    """A two-player match in which ``first`` moved first and scored ``score0``."""
    fields: dict[str, Any] = {
        "game": "g",
        "seed": seed,
        "seats": (first, second),
        "scores": (score0, 1.0 - score0),
        "returns": (2 * score0 - 1, 1 - 2 * score0),
        "moves": 10,
        "termination": "end",
        "tokens": (100, 200),
        "seconds": 1.0,
        "invalid": (0, 0),
    }
    return Match(**(fields | extra))


def simulate(
    strength: dict[str, float], first_mover: float, seeds: int, rng: np.random.Generator
) -> list[Match]:
    """Seat-swapped pairs (one seed, both seat orders) for every pair of participants.

    Outcomes follow the model being fitted: seat 0 scores ``p`` on average, with draws (more of
    them between close players) making up part of it: P(draw) = 0.6 min(p, 1 - p).
    """
    names, out = sorted(strength), []
    for x, a in enumerate(names):
        for b in names[x + 1 :]:
            for seed in range(seeds):
                for first, second in ((a, b), (b, a)):
                    diff = strength[first] - strength[second] + first_mover
                    p = 1 / (1 + 10 ** (-diff / 400))
                    draw = 0.6 * min(p, 1 - p)
                    win = (p - draw / 2) / (1 - draw)
                    u, v = rng.random(2)
                    score = 0.5 if u < draw else float(v < win)
                    out.append(match(first, second, score, seed=seed, game="sim"))
    return out


def test_wilson_seven_of_ten_by_hand() -> None:
    # z^2 = 3.841459; centre = (0.7 + z^2/20) / (1 + z^2/10) = 0.892073 / 1.384146 = 0.644493;
    # half = z sqrt(0.021 + z^2/400) / (1 + z^2/10) = 1.959964 * 0.174939 / 1.384146 = 0.247715
    assert wilson(7, 10) == pytest.approx((0.396778, 0.892209), abs=2e-6)
    assert wilson(0, 0) == (0.0, 1.0)
    # all successes: centre = 1.192073 / 1.384146, half = z sqrt(z^2/400) / 1.384146
    assert wilson(10, 10) == pytest.approx((0.722467, 1.0), abs=2e-6)


def test_a_simulated_population_is_recovered_within_its_intervals() -> None:
    strength = {"ada": 0.0, "bo": 80.0, "cy": 150.0, "di": 300.0, "ed": -100.0}
    matches = simulate(strength, first_mover=60.0, seeds=150, rng=np.random.default_rng(7))
    assert len(matches) == 3000 and any(m.scores[0] == 0.5 for m in matches)
    fitted = fit_bradley_terry(matches, anchor="bo", anchor_rating=1500.0, resamples=300, seed=1)
    assert fitted.anchor == "bo" and fitted.ratings["bo"] == 1500.0
    assert fitted.ci["bo"] == (1500.0, 1500.0)
    assert list(fitted.ratings) == ["di", "cy", "bo", "ada", "ed"]  # highest first
    for name, true in strength.items():
        expected = true - strength["bo"] + 1500.0
        low, high = fitted.ci[name]
        assert low <= expected <= high, (name, expected, fitted.ci[name])
        assert abs(fitted.ratings[name] - expected) < 40
        assert name == "bo" or 40 < high - low < 160  # real intervals, neither empty nor vague
    low, high = fitted.first_mover_ci
    assert low <= 60.0 <= high and 10 < high - low < 80
    assert abs(fitted.first_mover - 60.0) < 25
    assert fitted.games == dict.fromkeys(["di", "cy", "bo", "ada", "ed"], 1200)
    assert fitted.matches == 3000 and fitted.warnings == []


def _scipy_fit(matches: list[Match], names: list[str]) -> tuple[dict[str, float], float]:
    """Maximum likelihood by scipy, no prior: names[0] pinned at 0, then the first mover."""
    index = {name: i for i, name in enumerate(names)}
    first = np.array([index[m.seats[0]] for m in matches])
    second = np.array([index[m.seats[1]] for m in matches])
    s = np.array([m.scores[0] for m in matches])

    def negative_loglik(params: np.ndarray) -> float:
        r = np.concatenate([[0.0], params[:-1]])
        x = (r[first] - r[second] + params[-1]) * math.log(10) / 400
        return float((s * np.logaddexp(0, -x) + (1 - s) * np.logaddexp(0, x)).sum())

    result = minimize(negative_loglik, np.zeros(len(names)), method="BFGS", tol=1e-10)
    assert result.success, result.message
    return dict(zip(names, [0.0, *result.x[:-1]], strict=True)), float(result.x[-1])


def test_the_fit_agrees_with_a_direct_scipy_maximum_likelihood() -> None:
    strength = {"p": 0.0, "q": 120.0, "r": -200.0, "s": 40.0}
    matches = simulate(strength, first_mover=35.0, seeds=40, rng=np.random.default_rng(3))
    names = sorted(strength)
    expected, first_mover = _scipy_fit(matches, names)
    fitted = fit_bradley_terry(matches, anchor="p", anchor_rating=0.0, resamples=0)
    for name in names:
        assert fitted.ratings[name] == pytest.approx(expected[name], abs=3.0)
    assert fitted.first_mover == pytest.approx(first_mover, abs=3.0)
    assert abs(expected["q"] - expected["r"]) > 200  # a real spread, not four zeros
    assert math.isnan(fitted.ci["q"][0]) and fitted.ci["p"] == (0.0, 0.0)  # no resamples


def test_a_participant_that_wins_everything_gets_a_finite_rating_on_top() -> None:
    matches = []
    for seed in range(30):
        for x, y in (("champ", "a"), ("champ", "b"), ("a", "b")):
            score = 1.0 if x == "champ" else float(seed % 2)
            matches += [match(x, y, score, seed), match(y, x, 1.0 - score, seed)]
    fitted = fit_bradley_terry(matches, resamples=100)
    assert fitted.anchor == "a"  # first in sorted order
    top = fitted.ratings["champ"]
    assert math.isfinite(top) and top > fitted.ratings["b"] + 500
    assert math.isfinite(fitted.ci["champ"][0]) and fitted.ci["champ"][0] > 1400
    assert fitted.ratings["b"] == pytest.approx(1000.0, abs=1.0)  # a and b split evenly


def test_the_prior_is_weak_where_the_data_speak() -> None:
    # 76 wins in 100 games, seats swapped evenly: the maximum-likelihood gap is 400 log10(76/24)
    matches = [match("a", "b", float(k < 38), k) for k in range(50)]
    matches += [match("b", "a", float(k >= 38), k) for k in range(50)]
    fitted = fit_bradley_terry(matches, anchor="b", resamples=0)
    gap = fitted.ratings["a"] - 1000.0
    assert 400 * math.log10(76 / 24) - 0.2 < gap < 400 * math.log10(76 / 24)
    assert fitted.first_mover == pytest.approx(0.0, abs=1e-6) and PRIOR_SD == 1000.0


LAM = (400 / (PRIOR_SD * math.log(10))) ** 2
"""The prior's precision in natural log-odds units: 1 / 5.756463^2 = 0.0301778."""
NATURAL = math.log(10) / 400


def test_bradley_terry_posterior_mode_by_hand() -> None:
    # a beats b once in each seat. Log-posterior (natural units, x = ra - rb + f per match):
    #   log s(ra - rb + f) + log s(ra - rb - f) - LAM/2 (ra^2 + rb^2 + f^2), s the logistic.
    # Symmetry gives f = 0, rb = -ra = -c; d/dra = 2 (1 - s(2c)) - LAM c = 0, i.e.
    #   2 / (1 + e^(2c)) = 0.0301778 c  ->  c = 1.7917 (2 / (1 + e^3.5834) = 0.054066 = LAM c),
    #   a gap of 2c / NATURAL = 3.5834 / 0.00575646 = 622.5 Elo; b sits 622.5 below the anchor a.
    fitted = fit_bradley_terry([match("a", "b", 1.0), match("b", "a", 0.0)], resamples=0)
    assert fitted.anchor == "a" and fitted.ratings["a"] == 1000.0
    assert fitted.first_mover == pytest.approx(0.0, abs=1e-6)
    gap = fitted.ratings["a"] - fitted.ratings["b"]
    assert gap == pytest.approx(622.5, abs=0.1)
    c = gap / 2 * NATURAL
    assert 2 / (1 + math.exp(2 * c)) == pytest.approx(LAM * c, rel=1e-6)
    # One match, a wins from seat 0: the gradient is (1 - s(x)) (1, -1, 1) - LAM (ra, rb, f), so
    # ra = -rb = f = c with 1 / (1 + e^(3c)) = LAM c: c = 1.11819 (1 / (1 + e^3.35458) = 0.033745)
    #   f = c / NATURAL = 194.25 Elo, b = 1000 - 2c / NATURAL = 611.50.
    one = fit_bradley_terry([match("a", "b", 1.0)], resamples=0)
    assert one.first_mover == pytest.approx(194.25, abs=0.01)
    assert one.ratings["b"] == pytest.approx(611.50, abs=0.01)
    c = one.first_mover * NATURAL
    assert 1 / (1 + math.exp(3 * c)) == pytest.approx(LAM * c, rel=1e-6)
    # A draw (or a double loss, [0, 0]) is s = 0.5 each way: nobody moves.
    drawn = fit_bradley_terry([match("a", "b", 0.5)], resamples=0)
    zero = fit_bradley_terry([replace(match("a", "b", 0.0), scores=(0.0, 0.0))], resamples=0)
    for fit in (drawn, zero):
        assert fit.ratings["b"] == pytest.approx(1000.0) and fit.first_mover == pytest.approx(0.0)


def test_the_first_mover_term_by_hand_and_the_intervals_without_resamples() -> None:
    # Seat 0 wins both matches, a first then b first. Symmetry gives ra = rb = 0, and with
    # x = f in natural units the log-posterior is 2 log s(x) - LAM x^2 / 2 (s the logistic):
    #   2 (1 - s(x)) = LAM x, i.e. 2 / (1 + e^x) = 0.0301778 x -> x = 3.03627
    #   (2 / (1 + e^3.03627) = 0.091627 = LAM x), f = x / NATURAL = 527.45 Elo.
    fitted = fit_bradley_terry([match("a", "b", 1.0), match("b", "a", 1.0)], resamples=0)
    assert fitted.ratings == pytest.approx({"a": 1000.0, "b": 1000.0}, abs=1e-6)
    assert fitted.first_mover == pytest.approx(527.45, abs=0.01)
    x = fitted.first_mover * NATURAL
    assert 2 / (1 + math.exp(x)) == pytest.approx(LAM * x, rel=1e-6)
    # resamples=0: no interval but the anchor's, which is its pinned rating either way
    as_json = fitted.to_dict()
    assert as_json["ratings"]["a"] == {"rating": 1000.0, "ci": [1000.0, 1000.0]}
    assert as_json["ratings"]["b"] == {"rating": 1000.0, "ci": [None, None]}
    assert as_json["first_mover"] == {"rating": 527.5, "ci": [None, None]}
    # a term that rounds to zero is written 0.0, not -0.0 (a beats b once from each seat)
    even = fit_bradley_terry([match("a", "b", 1.0), match("b", "a", 0.0)], resamples=0)
    assert math.copysign(1.0, even.to_dict()["first_mover"]["rating"]) == 1.0


def test_bradley_terry_ignores_the_order_of_the_log() -> None:
    strength = {"p": 0.0, "q": 120.0, "r": -200.0}
    matches = simulate(strength, first_mover=35.0, seeds=5, rng=np.random.default_rng(1))
    forward = fit_bradley_terry(matches, resamples=0)
    backward = fit_bradley_terry(matches[::-1], resamples=0)
    assert backward.ratings == pytest.approx(forward.ratings, abs=1e-6)
    assert backward.first_mover == pytest.approx(forward.first_mover, abs=1e-6)


def test_openskill_by_hand_and_its_order_dependence() -> None:
    # Three fresh participants (mu 25, sigma 25/3, beta 25/6), ranked a > b > c by score, then
    # return. OpenSkill first adds tau = 25/300 in quadrature: sigma^2 = 625/9 + 1/144 = 69.4514;
    # c = sqrt(3 (69.4514 + 17.3611)) = 16.1381; all exp(mu/c) equal, so the Plackett-Luce
    # omegas are a: 1 - 1/3 = 2/3, b: -1/3 + 1 - 1/2 = 1/6, c: -1/3 - 1/2 + 1 - 1 = -5/6, and
    # mu += sigma^2 / c * omega = 4.30358 * omega: 27.869, 25.717, 21.414.
    first = replace(match("x", "y", 1.0), seats=("a", "b", "c"), scores=(1.0, 0.0, 0.0))
    first = replace(first, returns=(3.0, 1.0, -4.0), tokens=None, invalid=None)
    rated = rate_multiplayer([first])
    mus = {name: r.mu for name, r in rated.items()}
    assert mus == pytest.approx({"a": 27.869, "b": 25.717, "c": 21.414}, abs=1e-3)
    assert all(r.ordinal == pytest.approx(r.mu - 3 * r.sigma) for r in rated.values())
    # Ratings are updated match by match in log order: swapping two matches changes them.
    second = replace(first, seed=1, scores=(0.0, 1.0, 0.0), returns=(0.0, 2.0, -2.0))
    forward, backward = rate_multiplayer([first, second]), rate_multiplayer([second, first])
    assert forward["b"].mu == pytest.approx(backward["a"].mu)  # a and b trade places
    assert forward["b"].mu > forward["a"].mu and backward["a"].mu > backward["b"].mu


def test_an_unknown_anchor_names_the_nearest() -> None:
    matches = [match("alice", "bob", 1.0), match("bob", "alice", 0.5)]
    with pytest.raises(ValueError, match="'alicia'.*did you mean 'alice'"):
        fit_bradley_terry(matches, anchor="alicia", resamples=0)
    with pytest.raises(ValueError, match="participants: alice, bob"):
        fit_bradley_terry(matches, anchor="zed", resamples=0)
    with pytest.raises(ValueError, match="no two-player match"):
        fit_bradley_terry([], resamples=0)


def test_participants_no_match_links_to_the_anchor_are_warned_about() -> None:
    matches = [match("a", "b", 1.0, 1), match("b", "a", 0.5, 1), match("c", "d", 0.0, 2)]
    fitted = fit_bradley_terry(matches, resamples=20)
    assert len(fitted.warnings) == 1 and "links c, d to the anchor a" in fitted.warnings[0]
    assert fitted.ratings["d"] > fitted.ratings["c"]  # still rated, against each other


def test_clusters_pair_swapped_seats_and_named_pairs() -> None:
    matches = [
        match("a", "b", 1.0, seed=1),  # 0
        match("a", "b", 1.0, seed=1),  # 1: the same order again: a new cluster
        match("b", "a", 0.0, seed=1),  # 2: completes cluster of 0
        match("b", "a", 0.0, seed=2),  # 3: no partner
        match("b", "a", 0.0, seed=1),  # 4: completes cluster of 1
        match("a", "c", 1.0, seed=9, pair="x"),  # 5
        match("a", "b", 1.0, seed=3, pair="x"),  # 6: named pair wins over seeds
        match("c", "a", 1.0, seed=1),  # 7: another pair of participants
    ]
    assert clusters(matches) == [0, 1, 0, 2, 1, 3, 3, 4]


def test_pair_stats_by_hand() -> None:
    turns = {"turns": (6, 5)}
    matches = [
        match("a", "b", 1.0, 1, invalid=(1, 0), **turns),
        match("b", "a", 0.0, 1, invalid=(2, 0), moves=20),  # a won; b had 2 invalid in 10 turns
        match("a", "b", 0.0, 2, tokens=(300, 100)),
        match("b", "a", 1.0, 2, game="h"),  # b won, in another game
        match("a", "c", 0.5, 3),
    ]
    rows = {(p.game, p.a, p.b): p for p in pair_stats(matches, resamples=200)}
    assert list(rows) == [
        ("g", "a", "b"),
        ("h", "a", "b"),
        ("*", "a", "b"),
        ("g", "a", "c"),
        ("*", "a", "c"),
    ]
    g = rows["g", "a", "b"]
    assert (g.games, g.wins, g.draws, g.losses) == (3, 2, 0, 1)
    assert g.score == pytest.approx(2 / 3) and g.ci == wilson(2, 3)
    # a's turns: 6 + 10 + 5 = 21 with invalid 1 + 0 + 0; b's: 5 + 10 + 5 = 20 with 0 + 2 + 0
    assert g.invalid_rate == pytest.approx({"a": 1 / 21, "b": 2 / 20})
    assert g.mean_moves == pytest.approx(40 / 3)
    assert g.tokens == pytest.approx({"a": (100 + 200 + 300) / 3, "b": (200 + 100 + 100) / 3})
    total = rows["*", "a", "b"]
    assert (total.games, total.wins, total.losses, total.score) == (4, 2, 2, 0.5)
    drawn = next(p for p in pair_stats(matches, resamples=200) if p.game == "*" and p.b == "c")
    assert drawn.draws == 1 and drawn.score == 0.5 and drawn.ci == (0.5, 0.5)  # one cluster
    row = g.to_dict()
    assert set(row) == {"game", "a", "b", "games", "wins", "draws", "losses", "score", "ci"} | {
        "invalid_rate",
        "mean_moves",
        "tokens",
    }
    assert row["invalid_rate"] == {"a": round(1 / 21, 6), "b": 0.1}


def test_a_drawn_pair_gets_a_seeded_bootstrap_interval() -> None:
    matches = []
    for seed, (x, y) in enumerate([(1.0, 0.5), (0.5, 1.0), (1.0, 0.0), (0.5, 0.5)] * 5):
        matches += [match("a", "b", x, seed), match("b", "a", 1.0 - y, seed)]
    first, again = pair_stats(matches, seed=4)[0], pair_stats(matches, seed=4)[0]
    assert (first.wins, first.draws, first.losses) == (15, 20, 5) and first.score == 0.625
    # 20 clusters (seat-swapped pairs) with mean scores 0.75, 0.75, 0.5, 0.5, ...: the standard
    # error of the mean is 0.125 * sqrt(20 / 19) / sqrt(20) = 0.02868, so about 0.625 +- 0.0562
    low, high = first.ci
    assert low == pytest.approx(0.625 - 0.0562, abs=0.015)
    assert high == pytest.approx(0.625 + 0.0562, abs=0.015)
    assert first.ci == again.ci and pair_stats(matches, seed=5)[0].ci != first.ci


def test_multiplayer_matches_are_rated_by_openskill_apart_from_bradley_terry() -> None:
    def three(seats: tuple[str, ...], scores: tuple[float, ...], returns: tuple[float, ...]):
        base = match("x", "y", 1.0, tokens=(1, 1, 1), invalid=(0, 0, 0))
        return replace(base, seats=seats, scores=scores, returns=returns)

    games = [three(("w", "m", "l"), (1.0, 0.0, 0.0), (3.0, 1.0, 0.0)) for _ in range(6)]
    games += [three(("l", "w", "m"), (0.0, 1.0, 0.0), (0.0, 2.0, 1.0)) for _ in range(6)]
    rated = rate_multiplayer([*games, match("w", "l", 1.0)])
    assert list(rated) == ["w", "m", "l"] and rated["w"].games == 12
    assert rated["w"].mu > rated["m"].mu > rated["l"].mu > 0
    assert rated["w"].ordinal == pytest.approx(rated["w"].mu - 3 * rated["w"].sigma)
    fitted = fit_bradley_terry([*games, match("w", "l", 1.0)], resamples=0)
    assert fitted.matches == 1 and set(fitted.ratings) == {"w", "l"}


def _line(**fields: Any) -> str:
    base = match("alice", "bob", 1.0, seed=len(fields)).to_dict()
    return json.dumps({**base, **fields})


def test_malformed_lines_are_skipped_with_their_line_numbers(tmp_path: Path) -> None:
    good = [
        match(x, y, s, seed).to_dict()
        for seed in range(5)
        for x, y, s in (("alice", "bob", 1.0), ("bob", "alice", 0.5))
    ]
    lines = [json.dumps(good[0]), "{not json", json.dumps(good[1]), ""]  # line 4 blank: silent
    missing = {k: v for k, v in good[2].items() if k != "seed"}
    lines += [json.dumps(missing), _line(tokens=[1, 2, 3]), _line(scores=[0.3, 0.7])]
    lines += [_line(seed=True), "[1, 2]", _line(seats=["solo"]), _line(forfeit={"seat": 5})]
    lines += [json.dumps(row) for row in good[2:]]
    path = tmp_path / "matches.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    log = read_match_log(path)
    reasons = {skip.line: skip.reason for skip in log.skipped}
    assert sorted(reasons) == [2, 5, 6, 7, 8, 9, 10, 11, 20]
    assert reasons[2].startswith("bad JSON") and reasons[5] == "missing field 'seed'"
    assert reasons[6] == "'tokens' has 3 entries for 2 seats"
    assert reasons[7] == "score 0.3 is not one of 0, 0.5, 1"
    assert "'seed' must be an integer" in reasons[8] and "not a JSON object" in reasons[9]
    assert "at least two" in reasons[10] and "forfeit seat 5" in reasons[11]
    assert "UTF-8" in reasons[20]
    assert len(log.matches) == 10 and log.matches[1].scores == (0.5, 0.5)
    fitted = fit_bradley_terry(log.matches, resamples=0)
    assert fitted.games == {"alice": 10, "bob": 10} and fitted.ratings["bob"] < 1000.0


def test_parse_match_reads_optional_fields_and_round_trips() -> None:
    obj = match("a", "b", 0.0, 3, id="m1", pair="p1", turns=(4, 5)).to_dict()
    obj["forfeit"] = {"seat": 0, "participant": "a", "reason": "timeout"}
    parsed = parse_match(obj)
    assert parsed.forfeit is not None and parsed.forfeit.reason == "timeout"
    assert (parsed.id, parsed.pair, parsed.turns) == ("m1", "p1", (4, 5))
    assert parse_match(json.loads(json.dumps(parsed.to_dict()))) == parsed
    with pytest.raises(ValueError, match="'moves' must be a non-negative integer"):
        parse_match({**obj, "moves": -1})
    with pytest.raises(ValueError, match="'returns' must be a list of finite numbers"):
        parse_match({**obj, "returns": [float("nan"), 1.0]})


def test_a_line_with_only_the_required_fields_is_read_and_its_tables_say_not_logged() -> None:
    """Another tool's log: ``game``, ``seed``, ``seats``, ``scores`` are all the ratings need."""
    bare = {"game": "g", "seed": 1, "seats": ["a", "b"], "scores": [1, 0]}
    parsed = parse_match(bare)
    assert (parsed.scores, parsed.returns, parsed.tokens, parsed.moves) == ((1.0, 0.0), *[None] * 3)
    assert parse_match(parsed.to_dict()) == parsed and parsed.to_dict()["scores"] == [1.0, 0.0]
    assert parse_match({**bare, "termination": "end", "returns": None}).termination == "end"
    with pytest.raises(ValueError, match="'moves' must be a non-negative integer"):
        parse_match({**bare, "moves": -1})
    with pytest.raises(ValueError, match="'invalid' has 1 entries for 2 seats"):
        parse_match({**bare, "invalid": [0]})
    swapped = parse_match({**bare, "seats": ["b", "a"], "scores": [0, 1]})
    full = match("a", "b", 1.0, seed=2)
    rows = {row.game: row for row in pair_stats([parsed, swapped, full], resamples=0)}
    assert rows["*"].wins == 3 and rows["*"].invalid_rate is None and rows["*"].tokens is None
    assert rows["*"].to_dict()["mean_moves"] is None
    alone = pair_stats([full], resamples=0)[0]
    assert alone.mean_moves == 10 and alone.tokens == {"a": 100.0, "b": 200.0}
    three = parse_match({**bare, "seats": ["a", "b", "c"], "scores": [1, 0, 0]})
    assert next(iter(rate_multiplayer([three]))) == "a"  # no returns: b and c tie behind it


def test_ratings_report_is_the_json_contract() -> None:
    matches = simulate({"x": 0.0, "y": 50.0, "z": 100.0}, 0.0, 20, np.random.default_rng(0))
    log = MatchLog(matches=matches, skipped=[])
    report = ratings_report(log, anchor="y", anchor_rating=1200.0, resamples=50)
    assert list(report) == [
        "ratings",
        "first_mover",
        "pairs",
        "anchor",
        "matches",
        "skipped",
        "multiplayer",
    ]
    assert report["anchor"] == "y" and report["ratings"]["y"] == {
        "rating": 1200.0,
        "ci": [1200.0, 1200.0],
    }
    for entry in report["ratings"].values():
        assert entry["rating"] == round(entry["rating"], 1) and len(entry["ci"]) == 2
    assert report["matches"] == 120 and len(report["pairs"]) == 6  # 3 pairs, game and "*"
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    empty = ratings_report(MatchLog([], []), game="nothing")
    assert empty["ratings"] == {} and empty["anchor"] is None and empty["matches"] == 0
