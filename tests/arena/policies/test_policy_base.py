"""The policy interface's value types: validation, wire round trips, clear errors.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_policy_base.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.bus import decode, encode
from arena.policies.config import PolicyConfig
from arena.policies.factory import load_object, make_policy
from arena.policies.types import (
    Generation,
    InvalidRequest,
    Prompt,
    SamplingParams,
    as_prompt,
    per_request,
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -1),
        ("top_k", 2.5),
        ("max_new_tokens", 0),
        ("stop", [""]),
        ("stop_token_ids", [-3]),
        ("seed", "7"),
        ("temperature", True),
    ],
)
def test_invalid_sampling_params_name_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidRequest, match=field):
        SamplingParams(**{field: value})


def test_sampling_params_round_trip_and_typo_hint() -> None:
    params = SamplingParams(temperature=0.7, top_k=5, stop=["</answer>"], seed=3)
    assert SamplingParams.from_dict(params.to_dict()) == params
    assert SamplingParams.from_dict(None) == SamplingParams()
    with pytest.raises(InvalidRequest, match="did you mean 'temperature'"):
        SamplingParams.from_dict({"temprature": 0.5})
    with pytest.raises(InvalidRequest, match="must be a map"):
        SamplingParams.from_dict([1, 2])


def test_prompts_from_messages_ids_or_both() -> None:
    chat = as_prompt([{"role": "user", "content": "hi"}])
    assert chat.messages is not None and chat.ids is None
    ids = as_prompt([1, 2, 3])
    assert ids.ids is not None and ids.ids.dtype == np.int32 and ids.messages is None
    both = Prompt.from_dict(
        {"ids": np.array([5, 6]), "messages": [{"role": "user", "content": "x"}]}
    )
    assert both.ids.tolist() == [5, 6] and both.messages[0]["content"] == "x"
    with pytest.raises(InvalidRequest, match="needs messages, ids"):
        Prompt()
    with pytest.raises(InvalidRequest, match="message 0"):
        Prompt(messages=[{"role": "user"}])
    with pytest.raises(InvalidRequest, match="1-D array of ints"):
        Prompt(ids=np.array([1.5, 2.0]))
    with pytest.raises(InvalidRequest, match="did you mean 'messages'"):
        Prompt.from_dict({"mesages": []})
    with pytest.raises(InvalidRequest, match="3 prompts but 2"):
        per_request([SamplingParams()] * 2, 3)


def test_generation_travels_as_frames() -> None:
    gen = Generation(
        prompt_ids=np.arange(5, dtype=np.int32),
        token_ids=np.array([7, 8], np.int32),
        logprobs=np.array([-0.5, -1.5], np.float32),
        text="ab",
        finish_reason="stop",
        version=3,
        extra={"action": 2},
    )
    _, frames = encode("reply", gen.to_dict(), src="a", dst="b", reply_to="x")
    assert len(frames) == 4  # header + three arrays as raw frames, no msgpack lists
    back = Generation.from_dict(decode(frames).body)
    assert back.token_ids.tolist() == [7, 8] and back.version == 3 and back.extra == {"action": 2}
    assert back.conversation_ids.tolist() == [0, 1, 2, 3, 4, 7, 8]


def test_make_policy_errors_are_clear() -> None:
    with pytest.raises(InvalidRequest, match="did you mean 'vllm'"):
        make_policy({"backend": "vlm"})
    with pytest.raises(InvalidRequest, match="did you mean 'model'"):
        make_policy({"modle": "tiny"})
    with pytest.raises(InvalidRequest, match="needs 'address'"):
        make_policy(PolicyConfig(backend="remote"))
    with pytest.raises(InvalidRequest, match="module:attribute"):
        load_object("no_colon")
