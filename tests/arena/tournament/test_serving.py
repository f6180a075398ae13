"""How a tournament serves its model participants (:mod:`arena.tournament.serving`): one
inference actor per distinct model, each given its share of the cores.

Run with ``.venv/bin/python -m pytest -q tests/arena/tournament/test_serving.py``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

import arena.tournament.serving as serving
from arena.tournament.config import load_tournament_config
from arena.tournament.participants import resolve_participants

CONFIG = """
participants:
  - {name: random, bot: random-v0}
  - {name: fp32, model: tiny, dtype: float32}
  - {name: greedy, model: tiny, dtype: float32, sampling: {temperature: 0.0}}
  - {name: bf16, model: tiny, dtype: bfloat16}
games: [{id: kuhn-poker-v0}]
"""


class StartedEnough(Exception):
    """Raised where the servers would be waited for: the test has what it checks by then."""


class RecordingLauncher:
    """Takes the children a tournament starts, starting none."""

    started: dict[str, dict[str, str]] = {}

    def __init__(self, log_dir: Path) -> None:
        RecordingLauncher.started = {}

    def start(self, name: str, argv: list[str], **options: Any) -> None:
        RecordingLauncher.started[name] = dict(options.get("env") or {})


def start_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    (tmp_path / "t.yaml").write_text(CONFIG)
    config = load_tournament_config(str(tmp_path / "t.yaml"))
    participants = resolve_participants(config.participants, config.games)
    monkeypatch.setattr(serving, "Launcher", RecordingLauncher)

    def no_actor(*args: Any, **kwargs: Any) -> None:
        raise StartedEnough

    monkeypatch.setattr(serving, "Actor", no_actor)
    seating = serving.Seating(config, participants, tmp_path)
    with pytest.raises(StartedEnough):
        asyncio.run(seating.start())
    return RecordingLauncher.started


def test_each_inference_actor_gets_its_share_of_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two distinct models (fp32 twice, bf16 once) play at once: two actors, each with half of
    the cores (at least one thread), where all of them each would oversubscribe."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    started = start_servers(tmp_path, monkeypatch)
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))
    assert started == {
        "broker": {},
        "inference-model-0": {"OMP_NUM_THREADS": share},
        "inference-model-1": {"OMP_NUM_THREADS": share},
    }


def test_omp_num_threads_in_the_environment_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    started = start_servers(tmp_path, monkeypatch)
    assert started == {"broker": {}, "inference-model-0": {}, "inference-model-1": {}}


def test_a_model_backed_simulator_says_whose_model_it_talks_through(tmp_path: Path) -> None:
    """arena eval's reference user: llm-user-v0 talks through the evaluated participant's
    model. Beside a bot there is none (every episode failed, 'LLMUser needs a model'): refused
    up front. Beside a model, the seat says whose, and that the run's own user policy is not
    the one playing (it silently was the evaluated model)."""
    import games
    from arena.core.errors import ConfigError
    from arena.models import load_tokenizer
    from arena.play.config import GameConfig, PlayConfig, SimulatorConfig
    from arena.play.seating import SeatFactory
    from arena.policies.chat import ChatFormat
    from arena.tournament.config import ParticipantConfig, TournamentConfig

    user = SimulatorConfig(id="llm-user-v0", policy="userlm")
    game = GameConfig("retail-v0", simulators={"user": user})
    bot = ParticipantConfig(bot="retail-agent-v0")
    config = TournamentConfig(participants=[bot], games=[game])
    with pytest.raises(ConfigError) as caught:
        serving.Seating(config, resolve_participants([bot], [game], minimum=1), tmp_path)
    assert str(caught.value).startswith(
        "retail-v0 seat user: simulator llm-user-v0 talks through the evaluated participant's "
        "model, but 'retail-agent-v0' is a bot"
    )
    scripted = GameConfig("retail-v0", simulators={"user": SimulatorConfig()})
    seating = serving.Seating(TournamentConfig(participants=[bot], games=[scripted]), [], tmp_path)
    env = games.make("retail-v0")
    assert seating.reference("m", scripted, env, "user", 0).name == "scripted-user-v0"
    seating = serving.Seating(TournamentConfig(participants=[], games=[game]), [], tmp_path)
    seating._factories["m"] = SeatFactory(  # a model participant's, its policy never asked here
        PlayConfig(games=[game], policy_name="m"), object(), ChatFormat(load_tokenizer("tiny"))
    )
    seat = seating.reference("m", game, env, "user", 0)
    assert seat.name == "llm-user-v0 on m (its run's policy userlm is not served here)"
