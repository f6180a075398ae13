"""The "your own policy backend" tutorial of ``docs/plugins.md``, run as written.

Its module and entry point are installed as a real distribution (``tests/tutorials.py``); a
fresh process builds the backend by name and checks what ``generate`` returns for each prompt
form and what ``score`` says, a run refuses it as its trained backend in one line saying where it
can play, and ``arena tournament`` plays the tutorial's tournament against ``random-v0``, the
backend served by a real inference actor process.

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


def arena(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python(site, "-m", "arena", *args)


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
