"""Named policies in one learner: an adapter each on the frozen base, trained in one step.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_adapters.py``.
"""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
import torch
from synthetic import make_config, two_seat_episodes
from test_learner_actor import ActorThread, running_broker, wait_for

from arena.bus import BlockingActor
from arena.models.lora import adapter_flat
from arena.models.lora_files import read_adapter
from arena.records import Episode
from arena.weights.buckets import NEEDS_FULL
from arena.weights.cuda_ipc import NEEDS_BYTES
from trainers.learner import Learner
from trainers.learner_actor import LearnerActor

BASE_PARAMS = ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight")


def played_by(episodes: list[Episode], adapters: dict[str, str | None]) -> list[Episode]:
    """The episodes with seat p0 played by ``adapters['p0']``, p1 by ``adapters['p1']``."""
    for ep in episodes:
        for seat, assignment in ep.seats.items():
            assignment.adapter = adapters[seat]
    return episodes


def learner(tmp_path: Path | None = None, **extra: dict) -> Learner:
    sections = {
        "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        "advantage": {"mode": "batch", "key": ["game", "agent"]},
        **extra,
    }
    config = make_config(**sections)
    config.adapters = {"first": "", "second": ""}
    if tmp_path is not None:
        config.checkpoint.dir = str(tmp_path)
        config.checkpoint.every = 1
    return Learner(config)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], part: str) -> bool:
    return any(not torch.equal(before[k], after[k]) for k in before if part in k)


def test_a_step_moves_only_the_adapters_that_played(tmp_path: Path) -> None:
    trainer = learner()
    model = trainer.model
    assert not any(p.requires_grad for n, p in model.named_parameters() if ".lora_" not in n)
    before = snapshot(model)
    trainer.add_episodes(played_by(two_seat_episodes(4), {"p0": "first", "p1": "first"}))
    metrics = trainer.step()
    after = snapshot(model)
    assert changed(before, after, ".lora_B.first") and not changed(before, after, ".second")
    assert all(torch.equal(before[k], after[k]) for k in BASE_PARAMS)
    assert metrics["policy/first/turns"] == 16 and metrics["policy/second/turns"] == 0
    assert metrics["grad_norm/first"] > 0 and metrics["grad_norm/second"] == 0


def test_both_adapters_train_in_one_step_each_on_its_own_turns() -> None:
    """One step over seats played by two adapters moves each by the turns of its seat only: it
    equals a learner that trains the first adapter alone on the same episodes (the other
    seat's turns left out). The batch's size scales the loss (a mean over turns), so AdamW's
    eps is made negligible: its first step is then lr * sign(gradient), which any leak of the
    other seat's turns into this adapter's gradient would change."""
    episodes = two_seat_episodes(4)
    constant = {"optim": {"lr": 1e-3, "eps": 1e-30}}
    both = learner(**constant)
    both.add_episodes(played_by(episodes, {"p0": "first", "p1": "second"}))
    metrics = both.step()
    assert metrics["policy/first/turns"] == 8 and metrics["policy/second/turns"] == 8
    assert metrics["grad_norm/first"] > 0 and metrics["grad_norm/second"] > 0
    # the same turns of p0 alone (p1's left out as played by an adapter it does not train)
    alone = learner(**constant)
    alone.adapters.names.remove("second")
    alone.add_episodes(played_by(two_seat_episodes(4), {"p0": "first", "p1": "second"}))
    alone_metrics = alone.step()
    assert alone_metrics["policy/first/turns"] == 8
    assert alone.state.counters["rejected_adapter"] == 8
    # advantages are per (game, agent), so p0's are the same in both runs: so is its adapter
    a = {k: v for k, v in both.model.state_dict().items() if ".first" in k}
    b = {k: v for k, v in alone.model.state_dict().items() if ".first" in k}
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)


def test_turns_of_the_base_or_an_unknown_adapter_are_left_out_and_counted() -> None:
    trainer = learner()
    trainer.add_episodes(played_by(two_seat_episodes(2), {"p0": "judge", "p1": None}))
    metrics = trainer.step()
    assert trainer.state.counters["rejected_adapter"] == 8
    assert metrics["samples"] == 0


def test_weight_updates_carry_the_adapters_alone() -> None:
    """One buffer per adapter, every layer's pair a view of it: 2 layers x (q: 64 -> 64 and
    v: 64 -> 32 in the tiny model) x r 4 = 4 * (128 + 96) * 2 = 1792 elements an adapter."""
    trainer = learner()
    exported = trainer.export_weights()
    assert sorted(exported) == ["lora_adapter.first", "lora_adapter.second"]
    assert [t.numel() for t in exported.values()] == [1792, 1792]
    with torch.no_grad():  # the buffer is the adapter: a change to a pair shows in it
        trainer.adapters.parameters("first")[1].add_(1.0)
    assert float(trainer.export_weights()["lora_adapter.first"].sum()) != float(
        exported["lora_adapter.first"].sum()
    )


def test_checkpoints_hold_each_adapter_and_a_resume_restores_them(tmp_path: Path) -> None:
    trainer = learner(tmp_path)
    trainer.add_episodes(played_by(two_seat_episodes(3), {"p0": "first", "p1": "second"}))
    trainer.step()
    checkpoint = tmp_path / "step-00000001"
    for name in ("first", "second"):
        shape, state = read_adapter(checkpoint / "adapters" / name, base="tiny")
        assert shape.r == 4 and state
    with pytest.raises(ValueError, match="made for base model 'tiny'"):
        read_adapter(checkpoint / "adapters" / "first", base="smollm2-135m")
    want = {k: v for k, v in trainer.model.state_dict().items() if ".lora_" in k}
    resumed = learner(tmp_path)
    assert resumed.state.step == 1
    got = {k: v for k, v in resumed.model.state_dict().items() if ".lora_" in k}
    assert want.keys() == got.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0)
    # the optimizer state came back too: one more step from each gives the same weights
    for each in (trainer, resumed):
        each.add_episodes(
            played_by(two_seat_episodes(2, start=50), {"p0": "first", "p1": "second"})
        )
        each.step()
    for key in want:
        torch.testing.assert_close(
            resumed.model.state_dict()[key], trainer.model.state_dict()[key], rtol=0, atol=1e-7
        )


def test_lora_and_named_policies_exclude_each_other() -> None:
    config = make_config(lora={"enabled": True})
    config.adapters = {"first": ""}
    with pytest.raises(ValueError, match="use one or the other"):
        Learner(config)


def test_a_delta_exports_only_the_adapters_that_changed() -> None:
    trainer = learner()
    first, second = "lora_adapter.first", "lora_adapter.second"
    assert sorted(trainer.export_weights(changed_only=True)) == [first, second]  # none sent yet
    assert trainer.export_weights(changed_only=True) == {}
    trainer.add_episodes(played_by(two_seat_episodes(4), {"p0": "first", "p1": "first"}))
    trainer.step()
    delta = trainer.export_weights(changed_only=True)
    assert list(delta) == [first]
    assert torch.equal(delta[first], adapter_flat(trainer.model, "first"))
    assert sorted(trainer.export_weights()) == [first, second]  # a full export is always whole


def test_the_learner_actor_sends_deltas_and_everything_again_when_a_delta_is_refused(
    tmp_path: Path,
) -> None:
    """Through a real broker: the start publish is whole; a step where only ``first`` played
    sends ``first`` alone, since version 0; a receiver's refusal that it needs a full update
    (it missed a version) brings every adapter again, with no ``since``."""
    address = f"ipc://{tmp_path}/bus.sock"
    with running_broker(address):
        updates: queue.Queue = queue.Queue()
        names: dict[tuple[int, int | None], set[str]] = {}

        def on_weights(msg) -> None:
            key = (msg.body["version"], msg.body.get("since"))
            names.setdefault(key, set()).update(t["name"] for t in msg.body["tensors"])
            if msg.body["bucket"] == msg.body["num_buckets"] - 1:
                updates.put(key)

        client = BlockingActor("client", address)
        client.actor.subscribe("weights.main", on_weights)
        client.start()
        learner_actor = LearnerActor(learner(), address)
        server = ActorThread(learner_actor)
        server.thread.start()
        both = {"lora_adapter.first", "lora_adapter.second"}
        try:
            assert wait_for(updates, lambda u: True) == (0, None)
            episodes = played_by(two_seat_episodes(3), {"p0": "first", "p1": "first"})
            client.call(
                {"op": "add", "episodes": [e.to_dict() for e in episodes]}, service="learner"
            )
            assert client.call({"op": "step"}, service="learner", timeout=60)["version"] == 1.0
            assert wait_for(updates, lambda u: True) == (1, 0)
            assert names[(1, 0)] == {"lora_adapter.first"} and names[(0, None)] == both
            client.publish(
                "weights_ack.main",
                {
                    "actor": "inference-0",
                    "version": 1,
                    "applied": False,
                    "serving": 2,
                    "reason": f"update 1 holds what changed since version 0, but version 2 is "
                    f"served: it {NEEDS_FULL}",
                    "transport": "shm",
                },
            )
            assert wait_for(updates, lambda u: True) == (1, None)
            assert names[(1, None)] == both
            # a receiver that could not open a CUDA IPC offer: noted by its device, sent bytes
            names.clear()
            client.publish(
                "weights_ack.main",
                {
                    "actor": "inference-1",
                    "version": 1,
                    "applied": False,
                    "serving": 0,
                    "reason": f"inference-1 on boot/GPU-1 {NEEDS_BYTES}",
                    "transport": "cuda_ipc",
                    "device": "boot/GPU-1",
                },
            )
            assert wait_for(updates, lambda u: True) == (1, None)
            assert names[(1, None)] == both
            assert learner_actor.publisher.receivers == {"inference-1": "boot/GPU-1"}
        finally:
            server.close()
            client.close()
        assert server.error is None


def test_each_adapters_rows_are_rescored_at_its_own_temperature() -> None:
    """Rows of an adapter sampled at its own temperature (loss.adapter_temperatures, from its
    policies.NAME.sampling) are scored as a learner at that temperature scores them, and the
    other rows at loss.temperature: generated tokens and choice turns alike, in one batch."""
    import numpy as np
    from test_microbatch import generated

    from trainers.microbatch import collate

    rng = np.random.default_rng(1)

    def ids(n: int) -> np.ndarray:
        return rng.integers(5, 400, n).astype(np.int32)

    samples = [generated(ids(6), ids(4), "a"), generated(ids(5), ids(3), "b")]
    for name in ("c", "d"):
        choice = generated(ids(7), ids(2), name)
        choice.choices, choice.choice_index = [ids(2), ids(1), ids(3)], 0
        choice.response_ids = choice.choices[0]
        choice.sampler_logprobs = np.array([-0.5], np.float32)
        samples.append(choice)
    for sample, adapter in zip(samples, ["first", "second", "first", "second"], strict=True):
        sample.adapter = adapter
    mb = collate(samples, pad_id=0)

    def elements(**loss: object) -> torch.Tensor:
        trainer = learner(loss=loss)
        with torch.no_grad():
            return trainer.update._elements(trainer.update.policy, mb)[0]

    mixed = elements(temperature=1.0, adapter_temperatures={"first": 0.5})
    half, one = elements(temperature=0.5), elements(temperature=1.0)
    # elements: 4 tokens of "a" (first), 3 of "b" (second), then turns "c" (first), "d" (second)
    first = torch.tensor([0, 1, 2, 3, 7])
    second = torch.tensor([4, 5, 6, 8])
    torch.testing.assert_close(mixed[first], half[first], rtol=0, atol=1e-6)
    torch.testing.assert_close(mixed[second], one[second], rtol=0, atol=1e-6)
    assert (half[first] - one[first]).abs().min() > 1e-3  # the temperature matters here
