"""Run: .venv/bin/python -m pytest -q tests/arena/tournament/test_adapters.py

LoRA adapters as tournament participants, checked before any match: names that tell adapters
of two steps apart, globs over a run's adapters, an adapter made for another base refused with
both names, an adapter only on an ``hf`` model; and a poker participant's policy read through
its adapter, not its base.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.play.config import GameConfig
from arena.tournament.config import ParticipantConfig, TournamentConfig
from arena.tournament.participants import resolve_participants
from arena.tournament.strategy import participant_exploitability
from tests.arena.tournament.adapter_dirs import make_adapter

RANDOM = ParticipantConfig(bot="random-v0")


def step_adapter(root: Path, step: int, policy: str, *, base: str = "tiny") -> Path:
    return make_adapter(root / "checkpoints" / f"step-{step:08d}" / "adapters" / policy, base=base)


@pytest.mark.parametrize(
    ("participant", "message"),
    [
        (ParticipantConfig(bot="minimax-v0", adapter="a"), r"\('minimax-v0'\).*needs a model"),
        (
            ParticipantConfig(name="gpt", model="m", backend="openai", base_url="http://x/v1", adapter="a"),
            r"participants\[0\] \('gpt'\).*needs backend hf.*not openai",
        ),
        (ParticipantConfig(model="tiny", backend="vllm", adapter="a"), "needs backend hf"),
        (ParticipantConfig(model="tiny", adapter=""), "adapter is empty"),
    ],
)  # fmt: skip
def test_an_adapter_needs_an_hf_model(participant: ParticipantConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TournamentConfig(participants=[participant, RANDOM])


def test_adapters_are_named_by_directory_and_step(tmp_path: Path) -> None:
    plain = make_adapter(tmp_path / "solver")
    run = tmp_path / "run"
    step_adapter(run, 4, "solver")
    late = step_adapter(run, 8, "solver")
    resolved = resolve_participants(
        [
            ParticipantConfig(model="tiny"),
            ParticipantConfig(model="tiny", adapter=str(plain)),
            ParticipantConfig(model="tiny", adapter=str(late)),
            ParticipantConfig(name="mine", model="tiny", adapter=str(late)),
        ]
    )
    assert [p.name for p in resolved] == ["tiny", "tiny+solver", "tiny+solver@step-8", "mine"]
    assert [p.adapter for p in resolved] == [None, str(plain), str(late), str(late)]
    assert len({p.server_key for p in resolved}) == 1  # one base: one inference actor
    assert "hf model tiny + adapter" in resolved[1].describe()
    assert resolved[1].sampling("adapter-0").adapter == "adapter-0"


def test_a_glob_over_a_runs_adapters_is_a_participant_per_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for step in (12, 4, 8):
        step_adapter(run, step, "solver")
    step_adapter(run, 8, "judge")
    pattern = str(run / "checkpoints" / "step-*" / "adapters" / "solver")
    resolved = resolve_participants(
        [ParticipantConfig(name="solver", model="tiny", adapter=pattern), RANDOM]
    )
    names = [p.name for p in resolved]
    assert names == ["solver@step-4", "solver@step-8", "solver@step-12", "random-v0"]
    assert resolved[0].adapter == str(run / "checkpoints/step-00000004/adapters/solver")
    assert resolved[0].config.adapter == resolved[0].adapter
    # unnamed, and several policies per step: the policy is named as well
    every = str(run / "checkpoints" / "step-*" / "adapters" / "*")
    names = [p.name for p in resolve_participants([ParticipantConfig(model="tiny", adapter=every)])]
    assert names == [
        "tiny+adapter@step-4/solver",
        "tiny+adapter@step-8/judge",
        "tiny+adapter@step-8/solver",
        "tiny+adapter@step-12/solver",
    ]
    with pytest.raises(ConfigError, match="adapter glob .* matches nothing"):
        resolve_participants([ParticipantConfig(model="tiny", adapter=str(run / "x*")), RANDOM])


def test_an_adapter_for_another_base_is_refused_naming_the_participant_and_both_bases(
    tmp_path: Path,
) -> None:
    other = make_adapter(tmp_path / "solver", base="smollm2-135m")
    with pytest.raises(ConfigError) as err:
        resolve_participants(
            [ParticipantConfig(name="theirs", model="tiny", adapter=str(other)), RANDOM]
        )
    message = str(err.value)
    assert message.startswith("participant 'theirs': ")
    assert "made for base model 'smollm2-135m', but the served base is 'tiny'" in message
    assert "\n" not in message  # one problem, one line
    # a path that is no adapter, and one that is not there, are named too, all at once
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError) as err:
        resolve_participants(
            [
                ParticipantConfig(model="tiny", adapter=str(tmp_path / "empty")),
                ParticipantConfig(model="tiny", adapter=str(tmp_path / "missing")),
                RANDOM,
            ]
        )
    assert "participant 'tiny+empty': " in str(err.value)
    assert "is not an adapter: it needs adapter_config.json" in str(err.value)
    assert f"participant 'tiny+missing': no adapter directory '{tmp_path / 'missing'}'" in str(
        err.value
    )


def test_a_poker_participant_is_read_through_its_adapter(tmp_path: Path) -> None:
    pytest.importorskip("pyspiel")
    game = GameConfig(id="kuhn-poker-v0")
    sampling = {"temperature": 1.0}
    base, moved, fresh = resolve_participants(
        [
            ParticipantConfig(name="base", model="tiny", dtype="float32"),
            ParticipantConfig(
                name="moved", model="tiny", dtype="float32",
                adapter=str(make_adapter(tmp_path / "moved", noise=2.0)),
            ),
            ParticipantConfig(
                name="fresh", model="tiny", dtype="float32",
                adapter=str(make_adapter(tmp_path / "fresh", noise=0.0)),
            ),
        ]
    )  # fmt: skip
    for p in (base, moved, fresh):
        p.config.sampling.temperature = sampling["temperature"]
    readings = [participant_exploitability(p, game) for p in (base, moved, fresh)]
    assert all(r is not None and math.isfinite(r["exploitability"]) for r in readings)
    by_base, by_moved, by_fresh = (r["exploitability"] for r in readings)  # type: ignore[index]
    assert by_fresh == pytest.approx(by_base, abs=1e-6)  # B = 0: the adapter is the base
    assert abs(by_moved - by_base) > 1e-4


def test_a_choice_participant_is_read_as_it_plays() -> None:
    """An ``act: choice`` participant never replies outside its legal replies, so its reading
    has no invalid mass; read as a generating player (the tiny model's replies are never a
    legal action) it had all of it."""
    pytest.importorskip("pyspiel")
    game = GameConfig(id="kuhn-poker-v0")
    generating, choosing = resolve_participants(
        [
            ParticipantConfig(name="gen", model="tiny", dtype="float32"),
            ParticipantConfig(name="choice", model="tiny", dtype="float32", act="choice"),
        ]
    )
    for p in (generating, choosing):
        p.config.sampling.temperature = 1.0
    gen, choice = (participant_exploitability(p, game) for p in (generating, choosing))
    assert gen is not None and choice is not None
    assert gen["invalid_mass"] > 0.99
    assert choice["invalid_mass"] == 0.0
