"""The "your own policy backend" tutorial of ``docs/plugins.md``, run as written.

Its module and entry point are installed as a real distribution (``tests/tutorials.py``); a
fresh process builds the backend by name and checks what ``generate`` returns for each prompt
form and what ``score`` says, a run refuses it as its trained backend in one line saying where it
can play, and ``arena tournament`` plays the tutorial's tournament against ``random-v0``, the
backend served by a real inference actor process. ``arena play --against rules --backend
first-legal`` plays it with moves piped to stdin (and a named policy's checkpoint given to it),
and refuses a bad ``--backend`` or a backend that cannot load in one line.

Here, not in ``tests/games``: those tests give every process an empty model cache, and the
backend reads its prompts with SmolLM2's tokenizer, which an empty cache extracts first.

Run with `.venv/bin/python -m pytest -q tests/arena/tournament/test_backend_tutorial.py`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.tutorials import block, install, python

BACKEND = "<!-- backend tutorial:"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory on ``PYTHONPATH`` that holds the tutorial's package as installed."""
    site = tmp_path_factory.mktemp("site")
    points = install(site, BACKEND, "arena.policies")
    assert points == {"first-legal": "mypkg.first_legal:FirstLegal"}
    return site


def arena(
    site: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return python(site, "-m", "arena", *args, stdin=stdin, env=env)


CONTRACT = """
import json
from arena.policies.factory import make_policy
from arena.policies.types import PolicyError, Prompt, SamplingParams

policy = make_policy({"backend": "first-legal", "model": "rules", "name": "rules"})
messages = [{"role": "user", "content": "Legal actions: 3, 7, 9\\nYou are player_0."}]
rendered = policy.chat.prompt_ids(Prompt(messages=messages))
out = {}
for form, prompt in (("messages", messages), ("ids", Prompt(ids=rendered))):
    g = policy.generate([prompt], SamplingParams(temperature=0.7))[0]
    out[form] = [g.text, g.finish_reason, g.version, len(g.token_ids), len(g.prompt_ids)]
g = policy.generate([messages], SamplingParams(max_new_tokens=2))[0]
out["cut"] = [g.text, g.finish_reason, len(g.token_ids)]
try:
    policy.score([messages], [[[1]]])
except PolicyError as err:
    out["score"] = err.code
out["rendered"] = len(rendered)
print(json.dumps(out))
"""


def test_the_tutorials_backend_answers_by_its_contract_and_a_run_refuses_to_train_it(
    site: Path,
) -> None:
    done = python(site, "-c", CONTRACT)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # "<answer>3</answer>": SmolLM2 reads "<", "answer", ">", "3", "</", "answer", ">"
    assert out["messages"][:4] == out["ids"][:4] == ["<answer>3</answer>", "stop", 0, 7]
    assert out["messages"][4] == out["ids"][4] == out["rendered"]  # the same ids read
    assert out["cut"] == ["<answer", "length", 2]
    assert out["score"] == "unsupported"
    refused = arena(
        site, "train", "configs/smoke.yaml", "inference.backend=first-legal", "--dry-run"
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "arena train: bad config: inference.backend = 'first-legal' is a plugin policy backend "
        "(from mypkg), but a run trains its policy and only hf and vllm take weight updates; "
        "play it as a tournament participant (backend: first-legal), with `arena eval --model M "
        "--backend first-legal`"
    ), refused.stderr
    assert refused.stderr.count("\n") == 1


def test_the_tutorials_backend_plays_its_tournament_against_random(
    site: Path, tmp_path: Path
) -> None:
    config = tmp_path / "first_legal.yaml"
    config.write_text(block(BACKEND, "yaml"))
    done = arena(site, "tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    assert "first-legal (first-legal model rules), random (bot random-v0)" in done.stdout
    records = [json.loads(line) for line in (tmp_path / "out" / "matches.jsonl").open()]
    assert len(records) == 4  # pairs: 2, each seat-swapped
    assert sorted(r["seats"].index("first-legal") for r in records) == [0, 0, 1, 1]
    for record in records:
        seat = record["seats"].index("first-legal")
        assert record["forfeit"] is None and record["termination"] != "illegal"
        assert record["invalid"][seat] == 0  # it only ever names a legal cell
        assert record["tokens"][seat] == 7 * record["turns"][seat]  # "<answer>N</answer>"
    ratings = json.loads((tmp_path / "out" / "ratings.json").read_text())["ratings"]
    assert set(ratings) == {"first-legal", "random"}


def play_against(participant: str, backend: str = "first-legal") -> tuple[str, ...]:
    """``arena play tictactoe-v0`` against ``participant`` served by ``backend``."""
    return ("play", "tictactoe-v0", "--against", participant, "--backend", backend)


def test_a_person_plays_the_tutorials_backend_in_the_terminal(site: Path) -> None:
    """``arena play --against rules --backend first-legal``: the backend moves first and always
    names the lowest free cell (1, 2, 4), so O at 5, 3 and 7 wins on the anti-diagonal."""
    done = arena(
        site,
        *play_against("rules"),
        "--seat",
        "second",
        "--seed",
        "0",
        stdin="5\n3\n7\n",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("loading rules on backend first-legal ...\n")
    assert "tictactoe-v0 against first-legal model rules, seed 0" in out
    replies = [line for line in out.splitlines() if line.startswith("model replied: ")]
    assert replies == [f"model replied: <answer>{cell}</answer>" for cell in (1, 2, 4)]
    assert "rules (player_0) played: 4" in out
    assert "result: you win; returns: rules -1, you +1 (ended: win)" in out


@pytest.mark.parametrize(
    ("against", "backend", "error"),
    [
        ("minimax-v0", "first-legal", "--backend first-legal serves a model, not bot 'minimax-v0'"),
        (
            "rules",
            "first-legall",
            "--backend: unknown policy backend 'first-legall'; did you mean 'first-legal'?",
        ),
        ("rules", "openai", "--backend openai: a model is served here by hf, vllm or a plugin"),
    ],
)
def test_arena_play_refuses_a_bad_backend_in_one_line(
    site: Path, against: str, backend: str, error: str
) -> None:
    done = arena(site, *play_against(against, backend))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"arena play: bad config: {error}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert "loading" not in done.stdout  # refused before any model loads


def test_arena_play_names_a_backend_that_cannot_load_its_model(site: Path, tmp_path: Path) -> None:
    """The tutorial's backend fails to build where its tokenizer cannot be extracted (a model
    cache under a file): one line naming the participant, the model and the backend."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = arena(
        site,
        *play_against("rules"),
        env={"ARENA_CACHE_DIR": str(blocker / "cache")},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "arena play: bad config: participant 'rules': cannot load rules on backend first-legal: "
        "policy backend 'first-legal' (mypkg.first_legal:FirstLegal, plugin mypkg): failed to "
        "build: NotADirectoryError"
    ), done.stderr
    assert done.stderr.count("\n") == 1
    assert "your move>" not in done.stdout


def test_arena_play_gives_a_plugin_backend_a_named_policys_checkpoint(
    site: Path, tmp_path: Path
) -> None:
    """``--against RUN:POLICY --backend first-legal``: as ``arena eval`` does, the backend gets
    the newest checkpoint's directory of that policy, prompted with the run's game settings and
    replying as long as that policy did (12 tokens; the run's 6 would cut the 7 of
    ``<answer>1</answer>``)."""
    run_dir = tmp_path / "run"
    for step in ("step-00000001", "step-00000003"):
        model = run_dir / "checkpoints" / "policies" / "responder" / step / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    (run_dir / "config.yaml").write_text(
        "model: tiny\n"
        "games: [{id: tictactoe-v0, kwargs: {max_retries: 1}}]\n"
        "sampling: {max_new_tokens: 6}\n"
        "policies:\n"
        "  responder: {model: tiny, sampling: {max_new_tokens: 12}}\n"
        "seat_policies: {player_0: responder}\n"
    )
    checkpoint = run_dir / "checkpoints" / "policies" / "responder" / "step-00000003"
    done = arena(
        site,
        *play_against(f"{run_dir}:responder"),
        "--seat",
        "second",
        "--seed",
        "0",
        stdin="quit\n",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{run_dir}:responder: its newest checkpoint, step-00000003 ({checkpoint})"
    assert lines[1] == (
        "as trained: game {'max_retries': 1}, role player-v0 {}, replies of at most 12 tokens"
    )
    assert f"tictactoe-v0 against first-legal model {checkpoint}, seed 0" in done.stdout
    assert "model replied: <answer>1</answer>" in done.stdout
