"""How a tournament serves its model participants (:mod:`arena.tournament.serving`): one
inference actor per distinct model, each given its share of the cores.

Run with ``.venv/bin/python -m pytest -q tests/arena/tournament/test_serving.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import arena.tournament.serving as serving
from arena.run.launcher import ChildDied, Launcher
from arena.tournament.config import TournamentConfig, load_tournament_config
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

    def stop_all(self) -> None:
        pass


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
    bus_dir = Path(seating._bus_dir or "")
    assert bus_dir.is_dir()
    asyncio.run(seating.close())  # the broker's directory, in the temp dir, goes with it
    assert not bus_dir.exists()
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


def test_an_actor_that_dies_mid_play_is_restarted_and_a_third_death_stops_the_play(
    tmp_path: Path,
) -> None:
    """The dead-actor fault, with real child processes: while matches (or `arena eval`'s
    episodes) play, :meth:`Seating.supervise` starts a crashed inference actor again, and one
    that dies more than ``MAX_RESTARTS`` times cancels the play with ``ChildDied`` naming it.
    `arena eval` watched no actor: a killed one left every request waiting out
    inference.timeout (600 s), where a tournament restarted it."""
    seating = serving.Seating(TournamentConfig(), [], tmp_path)
    seating.launcher = Launcher(tmp_path)
    # a broker, SIGKILLed once: the play waits for its restart and goes on
    seating.launcher.start(
        "broker", ["broker", "--bind", f"ipc://{tmp_path}/bus.sock"], restartable=True
    )
    broker = seating.launcher.children["broker"]

    async def until_restarted() -> str:
        broker.max_restarts = 1
        first = broker.process.pid
        os.kill(first, signal.SIGKILL)
        while broker.process.pid == first:
            await asyncio.sleep(0.05)
        return "played"

    assert asyncio.run(seating.supervise(until_restarted())) == "played"
    assert broker.restarts == 1 and broker.process.poll() is None

    # an actor that cannot find its broker exits 1 at once, as often as it is started
    argv = ["ping", f"ipc://{tmp_path}/none.sock", "--timeout", "0.1"]
    seating.launcher.start(
        "inference-model-0", argv, restartable=True, max_restarts=serving.MAX_RESTARTS
    )
    cancelled: list[bool] = []

    async def matches() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    started = time.monotonic()
    with pytest.raises(ChildDied, match=r"^inference-model-0 \(pid \d+\) exited with code 1;"):
        asyncio.run(seating.supervise(matches()))
    assert cancelled == [True] and time.monotonic() - started < 30
    assert seating.launcher.children["inference-model-0"].restarts == serving.MAX_RESTARTS == 2
    seating.launcher.stop_all()
