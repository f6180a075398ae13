"""Rollout inference on the embedded SmolLM2-135M: naive loop vs the batching service vs vLLM.

Measured side by side in one run, on whatever machine this is:

(a) sequential: one request at a time through :class:`~arena.policies.hf.HFPolicy` (a loop);
(b) service: the inference actor (HF backend, its own process) behind a broker, with 32
    requests in flight from concurrent requesters;
(c) vllm service: the same actor with the vLLM backend, when vLLM is installed.

Beside generated tokens/s it puts the CPU's plain torch matmul rate (fp32 and bf16, this run)
and the model FLOP rate the tokens imply (tokens/s x 2 x parameters). Then it times a weight
update of the whole model (fp32, ~540 MB) published from this process to the running actor over
the bus, until the actor acknowledges it, against saving and loading a safetensors file.

Prints a table, then one JSON line. ``--quick`` makes a short run (and skips vLLM unless
``--vllm`` is given).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from arena.bus import BlockingActor
from arena.models import load_model
from arena.policies.base import Generation, SamplingParams
from arena.policies.hf import HFPolicy
from arena.weights import make_buckets

TOPICS = ["the sea", "chess openings", "a small robot", "prime numbers", "autumn", "a lost key",
          "bread baking", "the moon", "a city at night", "learning to swim", "tea", "old maps"]  # fmt: skip


def prompts(n: int) -> list[list[dict[str, str]]]:
    return [
        [{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}]
        for i in range(n)
    ]


def matmul_gflops(dtype: torch.dtype, size: int = 1024, seconds: float = 1.5) -> float:
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b  # warm up
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start) / 1e9


def run_sequential(policy: HFPolicy, n: int, max_new: int) -> dict[str, float]:
    tokens, start = 0, time.perf_counter()
    for i, chat in enumerate(prompts(n)):
        (gen,) = policy.generate([chat], SamplingParams(max_new_tokens=max_new, seed=i))
        tokens += len(gen.token_ids)
    elapsed = time.perf_counter() - start
    return {"requests": n, "tokens": tokens, "seconds": elapsed}


def run_service(
    address: str, service: str, n: int, in_flight: int, max_new: int
) -> dict[str, float]:
    """Keep ``in_flight`` requests outstanding (closed loop) until ``n`` are answered."""
    chats = prompts(n)
    done: queue.Queue[Generation] = queue.Queue()
    with BlockingActor(f"bench-requester-{time.monotonic_ns()}", address) as client:
        sent = 0

        def send() -> None:
            nonlocal sent
            body = {
                "prompt": {"messages": chats[sent]},
                "params": {"max_new_tokens": max_new, "seed": sent},
            }
            sent += 1
            future = client.request(body, service=service, timeout=1800)
            future.add_done_callback(lambda f: done.put(Generation.from_dict(f.result().body)))

        start = time.perf_counter()
        for _ in range(min(in_flight, n)):
            send()
        tokens = 0
        for _ in range(n):
            tokens += len(done.get(timeout=1800).token_ids)
            if sent < n:
                send()
        elapsed = time.perf_counter() - start
        status = client.call(service=f"{service}:status", timeout=30)
    sizes = status["batch_sizes"]
    return {
        "requests": n,
        "tokens": tokens,
        "seconds": elapsed,
        "mean_batch": sum(sizes) / max(len(sizes), 1),
    }


def time_weight_updates(
    address: str, name: str, model: torch.nn.Module, repeats: int = 3
) -> list[float]:
    """Seconds from publishing the first bucket to the actor's ``applied`` ack, per update."""
    acks: queue.Queue[dict[str, Any]] = queue.Queue()
    publisher = BlockingActor(f"bench-learner-{time.monotonic_ns()}", address)
    publisher.actor.subscribe(f"weights_ack.{name}", lambda m: acks.put(m.body))
    times = []
    with publisher:
        for version in range(1, repeats + 1):
            state = {k: v + 0.001 * version for k, v in model.state_dict().items()}
            start = time.perf_counter()
            for bucket in make_buckets(state, version=version):
                publisher.publish(f"weights.{name}", bucket, mtype="weights")
            ack = acks.get(timeout=600)
            times.append(time.perf_counter() - start)
            if not ack["applied"]:
                raise RuntimeError(f"the weight update was refused: {ack['reason']}")
    return times


def time_disk_roundtrips(model: torch.nn.Module, folder: Path, repeats: int = 3) -> list[float]:
    """Seconds to save the state as safetensors, load it back, and load it into the model."""
    # safetensors refuses tied (shared) tensors; drop the alias like save_pretrained does.
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        save_file(state, folder / "weights.safetensors")
        model.load_state_dict(load_file(folder / "weights.safetensors"), strict=False)
        times.append(time.perf_counter() - start)
    return times


def fmt(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


class Service:
    """A broker and one inference actor, each in its own process."""

    def __init__(self, folder: Path, name: str, backend: str, max_batch: int) -> None:
        self.address = f"ipc://{folder}/{name}.sock"
        self.service = f"policy:{name}"
        python = sys.executable
        self.broker = subprocess.Popen([python, "-m", "arena.cli", "broker", "--bind", self.address,
                                        "--heartbeat-timeout", "60"], stdout=subprocess.PIPE, text=True)  # fmt: skip
        self.broker.stdout.readline()  # type: ignore[union-attr]
        self.actor = subprocess.Popen([python, "-m", "arena.inference", "--address", self.address, "--name", name,
                                       "--backend", backend, "--model", "smollm2-135m", "--max-batch", str(max_batch),
                                       "--max-wait-ms", "50"], stdout=subprocess.DEVNULL)  # fmt: skip
        self.startup = self._wait_ready()

    def _wait_ready(self, timeout: float = 900) -> float:
        start = time.perf_counter()
        with BlockingActor(f"bench-probe-{time.monotonic_ns()}", self.address) as probe:
            while time.perf_counter() - start < timeout:
                if self.actor.poll() is not None:
                    raise RuntimeError(f"the inference actor exited with {self.actor.returncode}")
                if any(
                    self.service in a["services"]
                    for a in probe.call(service="broker.actors", timeout=10)
                ):
                    return time.perf_counter() - start
                time.sleep(0.2)
        raise TimeoutError(f"{self.service} did not come up within {timeout}s")

    def close(self) -> None:
        for proc in (self.actor, self.broker):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run (fewer requests and tokens)"
    )
    parser.add_argument("--vllm", action=argparse.BooleanOptionalAction, default=None,
                        help="include the vLLM backend (default: if installed, and not --quick)")  # fmt: skip
    args = parser.parse_args()
    n_seq, n_service, max_new = (3, 32, 24) if args.quick else (8, 96, 64)
    use_vllm = importlib.util.find_spec("vllm") is not None and (
        args.vllm if args.vllm is not None else not args.quick
    )

    model, tokenizer = load_model("smollm2-135m")
    params = sum(p.numel() for p in model.parameters())
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    policy = HFPolicy(model, tokenizer)
    policy.generate(prompts(1), SamplingParams(max_new_tokens=2))  # warm up
    rows: dict[str, dict[str, float]] = {
        "sequential (HF, loop)": run_sequential(policy, n_seq, max_new)
    }

    folder = Path(tempfile.mkdtemp(prefix="arena-bench-", dir="/tmp"))
    updates: list[float] = []
    disks: list[float] = []
    try:
        hf = Service(folder, "hf", "hf", 32)
        try:
            rows["service (HF, 32 in flight)"] = run_service(
                hf.address, hf.service, n_service, 32, max_new
            )
            updates = time_weight_updates(hf.address, "hf", model)
        finally:
            hf.close()
        disks = time_disk_roundtrips(model, folder)
        if use_vllm:
            vllm = Service(folder, "vllm", "vllm", 32)
            try:
                rows["vllm service (32 in flight)"] = run_service(
                    vllm.address, vllm.service, n_service, 32, max_new
                )
                rows["vllm service (32 in flight)"]["startup"] = vllm.startup
            finally:
                vllm.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def tok_s(key: str) -> float | None:
        row = rows.get(key)
        return row["tokens"] / row["seconds"] if row else None

    seq, svc, vll = (
        tok_s("sequential (HF, loop)"),
        tok_s("service (HF, 32 in flight)"),
        tok_s("vllm service (32 in flight)"),
    )
    print(f"SmolLM2-135M-Instruct, {params / 1e6:.1f} M params, fp32, {torch.get_num_threads()} torch threads; "
          f"max_new_tokens={max_new}, sampling at temperature 1")  # fmt: skip
    print(
        f"{'setup':<30}{'requests':>9}{'tokens':>8}{'seconds':>9}{'tok/s':>9}{'req/s':>8}{'model GFLOP/s':>15}"
    )
    for key, row in rows.items():
        rate = row["tokens"] / row["seconds"]
        print(f"{key:<30}{row['requests']:>9}{row['tokens']:>8}{row['seconds']:>9.1f}{rate:>9.1f}"
              f"{row['requests'] / row['seconds']:>8.2f}{rate * 2 * params / 1e9:>15.1f}")  # fmt: skip
    print(f"{'torch matmul 1024^3':<30} fp32 {fp32:.1f} GFLOP/s, bf16 {bf16:.1f} GFLOP/s")
    update_s, disk_s = statistics.median(updates), statistics.median(disks)
    print(
        f"{'weight update over the bus':<30} median {update_s:.2f} s of {fmt(updates)} (540 MB fp32, publish to ack)"
    )
    print(
        f"{'safetensors save + load':<30} median {disk_s:.2f} s of {fmt(disks)} (save, load, load_state_dict)"
    )
    result = {
        "sequential_tok_s": seq, "service_tok_s": svc, "vllm_service_tok_s": vll,
        "sequential_req_s": rows["sequential (HF, loop)"]["requests"] / rows["sequential (HF, loop)"]["seconds"],
        "service_req_s": rows["service (HF, 32 in flight)"]["requests"] / rows["service (HF, 32 in flight)"]["seconds"],
        "service_mean_batch": rows["service (HF, 32 in flight)"]["mean_batch"],
        "speedup_service_vs_sequential": svc / seq if seq and svc else None,
        "speedup_vllm_vs_sequential": vll / seq if seq and vll else None,
        "matmul_gflops": fp32, "matmul_gflops_bf16": bf16,
        "model_gflops_achieved": svc * 2 * params / 1e9 if svc else None,
        "weight_update_s": update_s, "weight_update_first_s": updates[0], "disk_roundtrip_s": disk_s,
        "speedup_update_vs_disk": disk_s / update_s if update_s and disk_s else None,
        "quick": args.quick,
    }  # fmt: skip
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
