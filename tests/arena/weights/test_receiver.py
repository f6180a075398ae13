"""Reading a checkpoint for the ``load`` command: a Hugging Face directory checked against the
served parameters before any tensor is used (tiny model, in one process).

Run with ``.venv/bin/python -m pytest -q tests/arena/weights/test_receiver.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from arena.models import tiny_config, tiny_model
from arena.weights.buckets import WeightUpdateError
from arena.weights.receiver import read_checkpoint


@pytest.fixture(scope="module")
def served() -> dict[str, torch.Tensor]:
    model, _ = tiny_model(seed=0)
    return model.state_dict()


def saved(folder: Path, seed: int = 1, **kwargs: object) -> tuple[Path, dict[str, torch.Tensor]]:
    model, _ = tiny_model(seed=seed)
    model.save_pretrained(folder, **kwargs)
    return folder, model.state_dict()


def test_a_saved_model_loads_with_its_tied_embedding_left_out(
    served: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    folder, expected = saved(tmp_path)
    state = read_checkpoint(str(folder), served)
    assert set(state) == set(served) - {"lm_head.weight"}  # save_pretrained drops the tied copy
    assert all(torch.equal(state[k], expected[k]) for k in state)


def test_sharded_checkpoints_load(served: dict[str, torch.Tensor], tmp_path: Path) -> None:
    folder, expected = saved(tmp_path, max_shard_size="2MB")
    assert (folder / "model.safetensors.index.json").is_file()
    state = read_checkpoint(str(folder), served)
    assert all(torch.equal(state[k], expected[k]) for k in state) and len(state) == len(served) - 1


def test_a_float32_checkpoint_is_cast_for_a_bfloat16_server(tmp_path: Path) -> None:
    folder, expected = saved(tmp_path)
    bf16 = tiny_model(seed=0, dtype="bfloat16")[0].state_dict()
    state = read_checkpoint(str(folder), bf16)
    assert all(t.dtype == torch.bfloat16 for t in state.values())
    assert torch.equal(state["model.norm.weight"], expected["model.norm.weight"].bfloat16())


def test_mismatches_and_bad_paths_are_refused(
    served: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    with pytest.raises(WeightUpdateError, match="no directory"):
        read_checkpoint(str(tmp_path / "missing"), served)
    with pytest.raises(WeightUpdateError, match="neither model.safetensors"):
        read_checkpoint(str(tmp_path), served)
    config = tiny_config(49152)
    config.hidden_size, config.intermediate_size = 32, 64
    LlamaForCausalLM(config).save_pretrained(tmp_path / "narrow")
    with pytest.raises(WeightUpdateError, match=r"got float32\[.*\], model has float32"):
        read_checkpoint(str(tmp_path / "narrow"), served)
    untied = {**served, "lm_head.weight": served["lm_head.weight"].clone()}
    folder, _ = saved(tmp_path / "tied")
    with pytest.raises(WeightUpdateError, match="missing, e.g. lm_head.weight"):
        read_checkpoint(str(folder), untied)  # a separate head cannot come from a tied file
