"""Named LoRA adapters: the arithmetic by hand, mixed batches, gradients kept apart, and the
peft directory format that peft itself (and vLLM) loads.

Run with ``.venv/bin/python -m pytest -q tests/arena/models/test_lora.py``.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn

from arena.models.adapter_shape import (
    DEFAULT_ALPHA,
    DEFAULT_RANK,
    DEFAULT_TARGET_MODULES,
    AdapterError,
    AdapterShape,
)
from arena.models.lora import (
    adapter_buffers,
    adapter_flat,
    adapter_layout,
    adapter_names,
    adapter_parameters,
    adapter_state,
    add_adapters,
    load_adapter_state,
    route,
    unflatten_adapter,
)
from arena.models.lora_files import read_adapter, save_adapter

SHAPE = AdapterShape(r=2, alpha=4.0, target_modules=("q_proj", "v_proj"))


def logits(model: nn.Module, ids: torch.Tensor, rows: list[str | None]) -> torch.Tensor:
    with torch.no_grad(), route(model, rows):
        return model(input_ids=ids).logits


def perturbed(model: nn.Module, name: str, seed: int) -> None:
    """Give adapter ``name`` non-zero B (a fresh adapter is the base exactly)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in adapter_parameters(model, name):
            param.add_(torch.randn(param.shape, generator=generator) * 0.05)


def test_one_layer_by_hand() -> None:
    """in 2, out 1, r 1, alpha 2 (scale 2): y = x.w + b + 2 (x.a) B."""
    base = nn.Linear(2, 1)
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[1.0, 2.0]]))
        base.bias.copy_(torch.tensor([0.5]))
    holder = nn.Sequential()
    holder.add_module("q_proj", base)
    add_adapters(holder, ["a"], AdapterShape(r=1, alpha=2.0, target_modules=("q_proj",)))
    layer = holder.q_proj
    with torch.no_grad():
        layer.lora_A["a"].copy_(torch.tensor([[3.0, -1.0]]))
        layer.lora_B["a"].copy_(torch.tensor([[0.25]]))
    x = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    # row 0: 1 + 2 + 0.5 = 3.5, x.a = 2, + 2 * 2 * 0.25 = 1 -> 4.5
    # row 1: 2 + 0.5 = 2.5, x.a = 6, + 2 * 6 * 0.25 = 3 -> 5.5
    with route(holder, ["a", "a"]):
        assert holder(x).flatten().tolist() == pytest.approx([4.5, 5.5])
    with route(holder, ["a", None]):  # the second row through the base alone
        assert holder(x).flatten().tolist() == pytest.approx([4.5, 2.5])
    assert holder(x).flatten().tolist() == pytest.approx([3.5, 2.5])  # outside route: the base


def test_a_new_adapter_is_the_base_and_keeps_the_base_names(tiny_model) -> None:
    model, _ = tiny_model
    names = set(model.state_dict())
    ids = torch.tensor([[1, 5, 9, 12]])
    before = logits(model, ids, [None])
    add_adapters(model, ["proposer", "solver"], SHAPE)
    assert adapter_names(model) == ["proposer", "solver"]
    assert names <= set(model.state_dict())  # the base weights keep their names
    torch.testing.assert_close(logits(model, ids, ["solver"]), before, rtol=0, atol=0)
    with pytest.raises(AdapterError, match="already has an adapter named 'solver'"):
        add_adapters(model, ["solver"], SHAPE)
    with pytest.raises(AdapterError, match="'keys' cannot name an adapter"):
        add_adapters(model, ["keys"], SHAPE)


def test_a_mixed_batch_equals_one_forward_per_adapter(tiny_model) -> None:
    model, _ = tiny_model
    add_adapters(model, ["a", "b"], SHAPE)
    perturbed(model, "a", 1)
    perturbed(model, "b", 2)
    ids = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 10], [11, 12, 13, 14]])
    mixed = logits(model, ids, ["b", None, "a"])
    alone = [logits(model, ids[i : i + 1], [n]) for i, n in enumerate(["b", None, "a"])]
    torch.testing.assert_close(mixed, torch.cat(alone), rtol=0, atol=1e-5)
    assert not torch.allclose(mixed[0], logits(model, ids[:1], ["a"])[0], atol=1e-3)


def test_each_adapters_gradient_stays_its_own(tiny_model) -> None:
    model, _ = tiny_model
    add_adapters(model, ["a", "b"], SHAPE)
    perturbed(model, "a", 1)
    perturbed(model, "b", 2)
    ids = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 10]])
    with route(model, ["a", "a"]):
        model(input_ids=ids).logits.sum().backward()
    assert all(
        p.grad is not None and p.grad.abs().sum() > 0 for p in adapter_parameters(model, "a")
    )
    assert all(p.grad is None for p in adapter_parameters(model, "b"))


def test_route_refuses_an_unknown_adapter(tiny_model) -> None:
    model, _ = tiny_model
    with pytest.raises(AdapterError, match="holds no adapters"):
        logits(model, torch.tensor([[1, 2]]), ["judge"])
    add_adapters(model, ["proposer", "solver"], SHAPE)
    with pytest.raises(AdapterError, match="no adapter named 'judge'; held: proposer, solver"):
        logits(model, torch.tensor([[1, 2]]), ["judge"])


def test_peft_loads_what_save_adapter_writes(tiny_model, tmp_path) -> None:
    """The directory is peft's own format: peft's model gives the same logits as ours."""
    from peft import PeftModel

    model, _ = tiny_model
    base = copy.deepcopy(model)
    add_adapters(model, ["solver"], SHAPE)
    perturbed(model, "solver", 3)
    path = save_adapter(tmp_path / "solver", model, "solver", base="tiny")
    config = json.loads((path / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["base_model_name_or_path"]) == (
        2,
        4.0,
        "tiny",
    )
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    peft_model = PeftModel.from_pretrained(base, str(path)).eval()
    with torch.no_grad():
        theirs = peft_model(input_ids=ids).logits
    torch.testing.assert_close(logits(model, ids, ["solver"]), theirs, rtol=0, atol=1e-5)


def test_read_adapter_round_trips_and_refuses_another_base(tiny_model, tmp_path) -> None:
    model, _ = tiny_model
    add_adapters(model, ["solver", "twin"], SHAPE)
    perturbed(model, "solver", 3)
    path = save_adapter(tmp_path / "solver", model, "solver", base="tiny")
    shape, state = read_adapter(path, base="tiny")
    assert shape == SHAPE
    load_adapter_state(model, "twin", state)
    ids = torch.tensor([[3, 4, 5]])
    torch.testing.assert_close(logits(model, ids, ["twin"]), logits(model, ids, ["solver"]))
    with pytest.raises(
        AdapterError, match="made for base model 'tiny', but the served base is 'smollm2-135m'"
    ):
        read_adapter(path, base="smollm2-135m")
    with pytest.raises(AdapterError, match="is not an adapter"):
        read_adapter(tmp_path, base="tiny")
    (path / "adapter_config.json").write_text("{}")
    with pytest.raises(AdapterError, match="not a LoRA adapter config"):
        read_adapter(path, base="tiny")


def test_load_adapter_state_refuses_a_partial_or_misshapen_state(tiny_model) -> None:
    model, _ = tiny_model
    add_adapters(model, ["a"], SHAPE)
    state = adapter_state(model, "a")
    key = next(iter(state))
    with pytest.raises(AdapterError, match=f"missing tensor {key}"):
        load_adapter_state(model, "a", {k: v for k, v in state.items() if k != key})
    with pytest.raises(AdapterError, match="has shape"):
        load_adapter_state(model, "a", {**state, key: torch.zeros(1, 1)})


def test_an_adapter_lives_in_one_buffer(tiny_model) -> None:
    """Every layer's A and B are views of the adapter's buffer, in layer order: an update
    copied into the buffer is the adapter (what a weight update ships)."""
    model, _ = tiny_model
    add_adapters(model, ["a", "b"], SHAPE)
    flat = adapter_flat(model, "a")
    assert flat.numel() == sum(p.numel() for p in adapter_parameters(model, "a"))
    with torch.no_grad():
        flat.copy_(torch.arange(flat.numel(), dtype=flat.dtype))
    first = adapter_parameters(model, "a")[0]
    assert first.flatten()[:3].tolist() == [0.0, 1.0, 2.0]
    assert float(adapter_flat(model, "b").abs().sum()) > 0  # b untouched: its A is random
    assert sorted(adapter_buffers(model)) == ["lora_adapter.a", "lora_adapter.b"]
    model.to(torch.float64)  # a cast after adding moves the pairs out of the buffer
    with pytest.raises(AdapterError, match="no longer lives in its buffer"):
        adapter_flat(model, "a")


def test_a_buffer_is_read_back_by_its_layout_on_a_model_without_adapters(tiny_model) -> None:
    """A server holding no buffer (the vllm backend) cuts an update by :func:`adapter_layout`
    of a plain meta-device model, and gets exactly the peft tensors the adapter holds."""
    model, _ = tiny_model
    config = copy.deepcopy(model.config)
    add_adapters(model, ["a"], SHAPE)
    perturbed(model, "a", seed=3)
    with torch.device("meta"):
        plain = type(model)(config)
    layout = adapter_layout(plain, SHAPE)
    assert [key for key, _ in layout] == list(adapter_state(model, "a"))
    assert layout[:2] == [
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", (2, 64)),
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", (64, 2)),
    ]
    tensors = unflatten_adapter("a", adapter_flat(model, "a"), layout)
    for key, want in adapter_state(model, "a").items():
        assert torch.equal(tensors[key], want), key
    with pytest.raises(AdapterError, match=r"an update of shape \(5,\), but its buffer holds"):
        unflatten_adapter("a", torch.zeros(5), layout)


def test_one_default_shape_for_the_learner_the_policies_and_vllm() -> None:
    """``learner.lora``, :class:`AdapterShape` and a vLLM engine started with ``enable_lora``
    read one default, :mod:`arena.models.lora`'s: a second default cannot creep back."""
    from arena.core.errors import ConfigError
    from arena.policies.vllm_lora import engine_lora_targets
    from trainers.config import LoRAConfig

    learner, shape = LoRAConfig(), AdapterShape()
    assert shape.target_modules is DEFAULT_TARGET_MODULES and "lm_head" not in shape.target_modules
    assert (shape.r, shape.alpha) == (DEFAULT_RANK, DEFAULT_ALPHA)
    assert AdapterShape.of(learner) == shape and isinstance(AdapterShape.of(learner).alpha, float)
    assert learner.target_modules is not LoRAConfig().target_modules  # a fresh list each
    engine: dict[str, object] = {"enable_lora": True}
    engine_lora_targets(engine)
    assert tuple(engine["lora_target_modules"]) == DEFAULT_TARGET_MODULES  # type: ignore[arg-type]
    given = {"enable_lora": True, "lora_target_modules": ["q_proj"]}
    engine_lora_targets(given)
    assert given["lora_target_modules"] == ["q_proj"]  # settings given win
    with pytest.raises(ConfigError, match="does not adapt lm_head"):
        engine_lora_targets({"enable_lora": True, "lora_target_modules": ["q_proj", "lm_head"]})
    off: dict[str, object] = {}
    engine_lora_targets(off)
    assert off == {}  # LoRA off: nothing named
