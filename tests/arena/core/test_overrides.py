"""Command-line overrides (arena/core/overrides.py): ``key=value`` merges, ``key:=value``
replaces, and a new id drops the old one's arguments. Config loading only, no processes.

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_overrides.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.core.overrides import Override
from arena.run.config import load_run_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
TOOLS = CONFIGS / "smoke_tools.yaml"  # retail-v0, its user a scripted-user-v0 with latency 0.5
USER = "games.0.simulators.user"


def user(*overrides: str):
    return load_run_config(TOOLS, overrides).games[0].simulators["user"]


def test_parse_tells_merge_from_replace() -> None:
    assert Override.parse("a.b=1") == Override("a.b", "1", replace=False)
    assert Override.parse("a.b:={x: 1}") == Override("a.b", "{x: 1}", replace=True)
    assert Override.parse("a=x=y").text == "x=y"  # the first '=' splits
    for bad in ("steps", ":=3", "=3"):
        with pytest.raises(ConfigError, match="key=value"):
            Override.parse(bad)


def test_a_new_simulator_id_drops_the_old_kwargs() -> None:
    assert user().kwargs == {"latency": 0.5}
    changed = user(f"{USER}.id=llm-user-v0")
    assert changed.id == "llm-user-v0" and changed.kwargs == {}
    assert changed.timeout == 30  # only the arguments go: the rest of the seat stays
    # the same id is no change: its kwargs stay
    assert user(f"{USER}.id=scripted-user-v0").kwargs == {"latency": 0.5}
    # a new id inside a mapping, without kwargs, is a new id too
    assert user(f"{USER}={{id: llm-user-v0}}").kwargs == {}
    assert user(f"{USER}={{id: llm-user-v0, kwargs: {{max_turns: 2}}}}").kwargs == {"max_turns": 2}


def test_kwargs_given_beside_a_new_id_are_the_new_ones_in_any_order() -> None:
    after = user(f"{USER}.id=llm-user-v0", f"{USER}.kwargs.max_turns=3")
    before = user(f"{USER}.kwargs.max_turns=3", f"{USER}.id=llm-user-v0")
    assert after.kwargs == before.kwargs == {"max_turns": 3}


def test_a_new_role_or_game_id_drops_its_arguments_too() -> None:
    game = load_run_config(TOOLS, ["games.0.role=my-role-v0"]).games[0]
    assert game.role_kwargs == {} and game.kwargs == {"max_retries": 1, "max_turns": 16}
    game = load_run_config(CONFIGS / "smoke.yaml", ["games.0.id=connect-four-v0"]).games[0]
    assert game.kwargs == {} and game.role_kwargs == {"prefill": True}


def test_replace_leaves_nothing_of_the_old_mapping() -> None:
    assert user(f"{USER}.kwargs:={{}}").kwargs == {}
    assert user(f"{USER}.kwargs:={{persona: x}}").kwargs == {"persona": "x"}
    assert user(f"{USER}.kwargs={{persona: x}}").kwargs == {"latency": 0.5, "persona": "x"}
    # a dataclass mapping replaced: the schema's defaults under the new value
    fresh = user(f"{USER}:={{id: llm-user-v0}}")
    assert (fresh.id, fresh.kwargs, fresh.timeout) == ("llm-user-v0", {}, 60.0)
    # a new entry of a mapping of dataclasses, and a list of dataclasses
    config = load_run_config(TOOLS, ["games.0.simulators.agent:={id: llm-user-v0}"])
    assert config.games[0].simulators["agent"].id == "llm-user-v0"
    config = load_run_config(TOOLS, ["games:=[{id: kuhn-poker-v0}]", "steps:=3"])
    assert [g.id for g in config.games] == ["kuhn-poker-v0"] and config.games[0].kwargs == {}
    assert config.steps == 3


def test_merging_an_empty_mapping_is_refused_with_the_replace_syntax() -> None:
    with pytest.raises(ConfigError, match=r"kwargs:=\{\} replaces it"):
        user(f"{USER}.kwargs={{}}")
    # over an empty mapping it changes nothing and says nothing
    assert load_run_config(TOOLS, ["games.0.roles={}"]).games[0].roles == {}


def test_a_replaced_mapping_is_still_checked_against_the_schema() -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        load_run_config(TOOLS, [f"{USER}:={{id: llm-user-v0, bogus: 1}}"])


def test_a_malformed_yaml_value_names_the_override() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(TOOLS, ["games:=[{id: nim-v0"])
    message = str(err.value)
    assert message.startswith("command line: override 'games:=[{id: nim-v0': malformed YAML")
    assert "\n" not in message


def test_an_index_past_the_end_of_a_list_says_how_long_it_is() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(TOOLS, ["games.3.id=nim-v0"])  # smoke_tools.yaml has one game
    assert str(err.value) == (
        "command line: games.3.id: games has 1 entry, so there is no games.3; "
        "games:=[...] gives the whole list"
    )


def test_a_mapping_the_shell_split_at_its_spaces_says_to_quote_it() -> None:
    # `games.0.kwargs={max_turns: 4, max_retries: 1}` typed unquoted reaches us in four words
    words = ["steps=3", "games.0.kwargs={max_turns:", "4,", "max_retries:", "1}", "seed=2"]
    with pytest.raises(ConfigError) as err:
        load_run_config(CONFIGS / "smoke.yaml", words)
    assert str(err.value) == (
        "override 'games.0.kwargs={max_turns:' ends inside a mapping or list that '4,' continues: "
        "the shell split one value at its spaces; quote it: "
        "'games.0.kwargs={max_turns: 4, max_retries: 1}'"
    )
    quoted = load_run_config(CONFIGS / "smoke.yaml", ["games.0.kwargs={max_turns: 4}"])
    assert quoted.games[0].kwargs == {"max_retries": 1, "max_turns": 4}
