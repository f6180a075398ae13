"""Run: .venv/bin/python -m pytest -q tests/arena/tournament/test_config.py"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.core.registry import Entry
from arena.policies.factory import backends
from arena.tournament.config import ParticipantConfig, TournamentConfig, load_tournament_config
from arena.tournament.participants import parse_participant, resolve_participants

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("tournament*.yaml")))
def test_every_shipped_tournament_config_resolves(name: str) -> None:
    config = load_tournament_config(str(CONFIGS / name))
    participants = resolve_participants(config.participants, config.games)
    assert len({p.name for p in participants}) == len(participants) >= 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["schedule=swiss"], "not one of"),
        (["pairs=0"], "pairs must be at least 1"),
        (["participants.0.model=tiny"], "exactly one of bot and model"),
        (["participants.2.backend=openai"], "needs base_url"),
        (["pairz=3"], "did you mean 'pairs'"),
        # a second entry replayed the first's match ids: resume skipped it, ratings counted both
        (["games:=[{id: nim-v0}, {id: nim-v0}]"], r"games\[1\]: nim-v0 is listed twice"),
        (["participants.2.act=chose"], "participants\\[2\\].act"),
        (["participants.2.backend=hff"], "unknown policy backend 'hff'; did you mean 'hf'"),
        (["participants.2.backend=scripted"], "a bot plays as `bot:`, not as a scripted backend"),
    ],
)
def test_bad_configs_name_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_tournament_config(str(CONFIGS / "tournament.yaml"), overrides)


class Rules:
    """A stand-in plugin backend (never built here)."""


@pytest.fixture
def plugin_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    """A backend registered as a plugin's, for this test only."""
    backends.ids()  # the installed plugins first, so that none is read after the patch
    monkeypatch.setitem(backends._entries, "rules", Entry("rules", Rules, plugin="mypkg"))
    return "rules"


def test_a_plugin_backends_model_is_passed_as_is_and_served_on_the_bus(plugin_backend: str) -> None:
    configs = [
        ParticipantConfig(name=f"rules-{t}", model="gpt-x/not-a-path", backend="rules", tokenizer=t)
        for t in ("smollm2-135m", "tiny")
    ]
    config = TournamentConfig(participants=[*configs, ParticipantConfig(bot="random-v0")])
    first, second, _ = resolve_participants(config.participants, config.games)
    assert (first.kind, first.model, first.plugin, first.tokenizer) == (
        "model", "gpt-x/not-a-path", True, "smollm2-135m",
    )  # fmt: skip
    assert first.describe() == "rules model gpt-x/not-a-path"
    # a plugin reads its prompts with its participant's tokenizer: one actor per tokenizer
    assert second.server_key == ("gpt-x/not-a-path", "rules", "auto", "tiny") != first.server_key
    with pytest.raises(ConfigError, match=r"adapter 'a' needs backend hf .*, not rules"):
        TournamentConfig(participants=[ParticipantConfig(model="m", backend="rules", adapter="a")])


def test_checkpoint_globs_become_one_participant_per_step(tmp_path: Path) -> None:
    for step in (4, 12, 8):
        model = tmp_path / "run" / "checkpoints" / f"step-{step:08d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    config = parse_participant(str(tmp_path / "run" / "checkpoints" / "step-*"), name="mine")
    resolved = resolve_participants([config, parse_participant("random-v0")])
    assert [p.name for p in resolved] == ["mine@step-4", "mine@step-8", "mine@step-12", "random-v0"]
    assert resolved[0].model == str(tmp_path / "run" / "checkpoints" / "step-00000004" / "model")
    assert resolved[0].server_key != resolved[1].server_key


def checkpoints(root: Path, *runs_and_steps: tuple[str, int]) -> None:
    for run, step in runs_and_steps:
        model = root / run / "checkpoints" / f"step-{step:08d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")


def test_a_glob_over_several_runs_names_each_participant_by_run_as_well(tmp_path: Path) -> None:
    # the seeds of a study, each run in runs/<name>/<time>/: before, every seed's step 12 was
    # named run@step-12 and the glob was refused as using one name twice
    checkpoints(
        tmp_path / "runs",
        ("learning-s0/20261126-0900", 12),
        ("learning-s1/20261126-1000", 12),
        ("learning-s0/20261126-0900", 4),
    )
    config = parse_participant(str(tmp_path / "runs/learning-s*/*/checkpoints/step-*"), "run")
    resolved = resolve_participants([config, parse_participant("random-v0")])
    assert [p.name for p in resolved] == [
        "run@learning-s0/step-4",
        "run@learning-s0/step-12",
        "run@learning-s1/step-12",
        "random-v0",
    ]
    assert resolved[2].model == str(
        tmp_path / "runs/learning-s1/20261126-1000/checkpoints/step-00000012/model"
    )
    # two runs of one config: their time directories tell them apart
    checkpoints(tmp_path / "runs", ("selfplay/20261127-0800", 2), ("selfplay/20261128-0800", 2))
    config = parse_participant(str(tmp_path / "runs/selfplay/*/checkpoints/step-*"), "run")
    names = [p.name for p in resolve_participants([config, parse_participant("random-v0")])]
    assert names[:2] == ["run@20261127-0800/step-2", "run@20261128-0800/step-2"]


def test_the_command_line_form_reads_bots_and_models() -> None:
    assert parse_participant("minimax-v0").bot == "minimax-v0"
    assert parse_participant("minimax-v9").bot == "minimax-v9"  # a typo is named as a bot
    assert parse_participant("smollm2-135m").model == "smollm2-135m"


def test_a_name_that_yaml_read_as_a_boolean_is_refused_with_the_quoting(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("participants:\n  - {name: off, bot: random-v0}\n  - {bot: random-v0}\n")
    config = load_tournament_config(path)
    assert config.participants[0].name == "False"
    with pytest.raises(ConfigError) as err:
        resolve_participants(config.participants, config.games)
    assert str(err.value) == (
        "participant name 'False': YAML reads an unquoted yes, no, on, off, true or false as a "
        'boolean; quote the name (name: "off")'
    )
