"""Rollout inference on the embedded SmolLM2-135M: naive loop vs the batching service vs vLLM.

``--shape`` serves a random-init model of that shape instead (``bench/shapes.py``: for a machine
without weights; saved once to a temporary directory the actors load), ``--device`` picks where
both the local loop and the actors run (``auto``: CUDA where there is one).

Measured side by side in one run, on whatever machine this is, in each dtype (float32, the
default of ``arena.actors.inference``, and bfloat16, what ``configs/selfplay.yaml`` serves on CPU):

(a) sequential: one request at a time through :class:`~arena.policies.hf.HFPolicy` (a loop);
(b) service: the inference actor (HF backend, its own process) behind a broker, with 32
    requests in flight from concurrent requesters;
(c) vllm service: the same actor with the vLLM backend (float32), when vLLM is installed.

``speedup_service_vs_sequential`` is the bfloat16 pair (the CPU serving configuration);
``speedup_service_vs_sequential_fp32`` the float32 pair. Beside generated tokens/s it puts the
device's plain torch matmul rate (fp32 and bf16, this run) and the model FLOP rate the tokens
imply (tokens/s x 2 x parameters).

Then it times weight updates of the whole model (fp32: ~540 MB for 135M) published from this
process (the weights on ``--device``, as a learner holds them) to
the running float32 actor, from the first bucket until the actor acknowledges them: by the
default same-host path (a shared-memory file the actor maps, ``weight_update_s``) and by bytes
over the bus (``weight_update_bus_s``), against saving and loading a safetensors file in this
process (``disk_roundtrip_s``), in rounds of all three. The publisher's time to write the file is
included; medians of five rounds are reported, the first shared-memory update separately.

Prints a table, then one JSON line. ``--quick`` makes a short run (and skips vLLM unless
``--vllm`` is given). Under ``ARENA_PRELOAD`` (a shared ``arena preload --listen`` server, as in
the test suite) the actors are forked by that server, as a run's are; the vLLM row's
``startup`` then leaves out the actor's imports.

Usage: python bench/rollout.py [--quick] [--device auto|cpu|cuda] [--shape 135m|layers=..,hidden=..]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
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
from shapes import SHAPES, parameters, save_random_model

from arena.bus import BlockingActor
from arena.models import load_model, resolve_device
from arena.policies.hf import HFPolicy
from arena.policies.types import Generation, SamplingParams
from arena.run.preload import spawn_command
from arena.weights.publisher import WeightPublisher

TOPICS = [
    "the sea",
    "chess openings",
    "a small robot",
    "prime numbers",
    "autumn",
    "a lost key",
    "bread baking",
    "the moon",
    "a city at night",
    "learning to swim",
    "tea",
    "old maps",
]


DTYPES = {"float32": "fp32", "bfloat16": "bf16"}
"""Served dtypes, each measured sequentially and as a service: fp32 is arena.actors.inference's
default, bf16 what configs/selfplay.yaml serves on CPU."""


def prompts(n: int) -> list[list[dict[str, str]]]:
    return [
        [{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}]
        for i in range(n)
    ]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(
    dtype: torch.dtype, device: torch.device, size: int = 1024, seconds: float = 1.5
) -> float:
    size = size if device.type == "cpu" else 8192  # a GPU idles on 1024^3
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    a @ b  # warm up
    synchronize(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
        synchronize(device)
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
    address: str, name: str, model: torch.nn.Module, folder: Path, repeats: int = 5
) -> dict[str, list[float]]:
    """Seconds from publishing the first bucket to the actor's ``applied`` ack, per update, for
    each transport (``shm``: the default same-host path; ``bus``: bytes in the buckets), and a
    disk round trip (``disk``), in rounds of all three so they see the same machine load."""
    acks: queue.Queue[dict[str, Any]] = queue.Queue()
    publishers = {"shm": WeightPublisher(name), "bus": WeightPublisher(name, shm=False)}
    client = BlockingActor(f"bench-learner-{time.monotonic_ns()}", address)
    client.actor.subscribe(f"weights_ack.{name}", lambda m: acks.put(m.body))
    publishers["shm"].attach(client.actor)
    times: dict[str, list[float]] = {kind: [] for kind in publishers}
    version = 0
    with client:
        for _ in range(repeats):
            for kind, publisher in publishers.items():
                version += 1
                state = {k: v + 0.001 * version for k, v in model.state_dict().items()}
                start = time.perf_counter()
                publisher.publish(
                    state,
                    version,
                    functools.partial(client.publish, publisher.topic, mtype="weights"),
                )
                ack = acks.get(timeout=600)
                times[kind].append(time.perf_counter() - start)
                if not ack["applied"] or ack["version"] != version:
                    raise RuntimeError(f"the weight update was refused: {ack}")
                if ack["transport"] != kind:
                    raise RuntimeError(f"a {kind} update travelled by {ack['transport']}")
            times.setdefault("disk", []).extend(time_disk_roundtrips(model, folder, repeats=1))
    publishers["shm"].close()
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

    def __init__(
        self,
        folder: Path,
        name: str,
        backend: str,
        max_batch: int,
        dtype: str = "float32",
        model: str = "smollm2-135m",
        device: str = "auto",
    ) -> None:
        self.address = f"ipc://{folder}/{name}.sock"
        self.service = f"policy:{name}"
        python = sys.executable
        self.broker = subprocess.Popen(
            [python, "-m", "arena", "broker", "--bind", self.address, "--heartbeat-timeout", "60"],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.broker.stdout.readline()  # type: ignore[union-attr]
        argv = ["inference", "--address", self.address, "--name", name, "--backend", backend]
        argv += ["--model", model, "--device", device, "--dtype", dtype]
        argv += ["--max-batch", str(max_batch), "--max-wait-ms", "50"]
        with open(os.devnull, "wb") as out:  # forked by a shared preload server, where named
            self.actor = spawn_command(argv, dict(os.environ), out)
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
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if any)")
    parser.add_argument(
        "--shape",
        default=None,
        help=f"a random-init model of this shape instead of SmolLM2-135M: {', '.join(SHAPES)}, "
        "or layers=..,hidden=..[,heads=..,kv=..,inter=..] (bench/shapes.py)",
    )
    parser.add_argument(
        "--vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="include the vLLM backend (default: if installed, and not --quick)",
    )
    args = parser.parse_args()
    n_seq, n_service, max_new = (3, 32, 24) if args.quick else (16, 96, 64)
    use_vllm = importlib.util.find_spec("vllm") is not None and (
        args.vllm if args.vllm is not None else not args.quick
    )

    device = resolve_device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    folder = Path(tempfile.mkdtemp(prefix="arena-bench-", dir="/tmp"))
    spec = str(save_random_model(args.shape, folder / "model")) if args.shape else "smollm2-135m"
    title = f"random {args.shape}" if args.shape else "SmolLM2-135M-Instruct"
    model, tokenizer = load_model(spec, device=device)
    params = parameters(model)
    distinct = {t.data_ptr(): t.numel() * t.element_size() for t in model.state_dict().values()}
    megabytes = sum(distinct.values()) / 1e6  # a tied embedding once, as the shm file holds it
    fp32, bf16 = matmul_gflops(torch.float32, device), matmul_gflops(torch.bfloat16, device)
    rows: dict[str, dict[str, float]] = {}
    updates: dict[str, list[float]] = {}
    try:
        for dtype, label in DTYPES.items():
            served = model if dtype == "float32" else load_model(spec, dtype, device)[0]
            policy = HFPolicy(served, tokenizer)
            policy.generate(prompts(1), SamplingParams(max_new_tokens=2))  # warm up
            rows[f"sequential (HF {label}, loop)"] = run_sequential(policy, n_seq, max_new)
            del policy, served
            hf = Service(folder, f"hf-{label}", "hf", 32, dtype, spec, str(device))
            try:
                rows[f"service (HF {label}, 32 in flight)"] = run_service(
                    hf.address, hf.service, n_service, 32, max_new
                )
                if dtype == "float32":
                    updates = time_weight_updates(hf.address, f"hf-{label}", model, folder)
            finally:
                hf.close()
        if use_vllm:
            vllm = Service(folder, "vllm", "vllm", 32, model=spec, device=str(device))
            try:
                rows["vllm service (fp32, 32 in flight)"] = run_service(
                    vllm.address, vllm.service, n_service, 32, max_new
                )
                rows["vllm service (fp32, 32 in flight)"]["startup"] = vllm.startup
            finally:
                vllm.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def tok_s(key: str) -> float | None:
        row = rows.get(key)
        return row["tokens"] / row["seconds"] if row else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    seq, svc = tok_s("sequential (HF fp32, loop)"), tok_s("service (HF fp32, 32 in flight)")
    seq16, svc16 = tok_s("sequential (HF bf16, loop)"), tok_s("service (HF bf16, 32 in flight)")
    vll = tok_s("vllm service (fp32, 32 in flight)")
    print(
        f"{title}, {params / 1e6:.1f} M params, on {where}, {torch.get_num_threads()} torch "
        f"threads; max_new_tokens={max_new}, sampling at temperature 1"
    )
    print(
        f"{'setup':<34}{'requests':>9}{'tokens':>8}{'seconds':>9}{'tok/s':>9}{'req/s':>8}{'model GFLOP/s':>15}"
    )
    for key, row in rows.items():
        rate = row["tokens"] / row["seconds"]
        print(
            f"{key:<34}{row['requests']:>9}{row['tokens']:>8}{row['seconds']:>9.1f}{rate:>9.1f}"
            f"{row['requests'] / row['seconds']:>8.2f}{rate * 2 * params / 1e9:>15.1f}"
        )
    print(f"{'torch matmul':<34} fp32 {fp32:.1f} GFLOP/s, bf16 {bf16:.1f} GFLOP/s")
    shm_s, bus_s = statistics.median(updates["shm"]), statistics.median(updates["bus"])
    disks = updates["disk"]
    disk_s = statistics.median(disks)
    print(
        f"{'weight update, shared memory':<34} median {shm_s:.2f} s of {fmt(updates['shm'])} "
        f"({megabytes:.0f} MB fp32, publish to ack, file write included)"
    )
    print(
        f"{'weight update, bytes over the bus':<34} median {bus_s:.2f} s of {fmt(updates['bus'])}"
    )
    print(
        f"{'safetensors save + load':<34} median {disk_s:.2f} s of {fmt(disks)} "
        "(save, load, load_state_dict)"
    )
    fp32_service = rows["service (HF fp32, 32 in flight)"]
    result = {
        "bench": "rollout",
        "model": title,
        "shape": args.shape,
        "params": params,
        "device": where,
        "weights_mb": megabytes,
        "sequential_tok_s": seq,
        "service_tok_s": svc,
        "sequential_bf16_tok_s": seq16,
        "service_bf16_tok_s": svc16,
        "vllm_service_tok_s": vll,
        "sequential_req_s": rows["sequential (HF fp32, loop)"]["requests"]
        / rows["sequential (HF fp32, loop)"]["seconds"],
        "service_req_s": fp32_service["requests"] / fp32_service["seconds"],
        "service_mean_batch": fp32_service["mean_batch"],
        "service_bf16_mean_batch": rows["service (HF bf16, 32 in flight)"]["mean_batch"],
        "speedup_service_vs_sequential": ratio(svc16, seq16),
        "speedup_service_vs_sequential_fp32": ratio(svc, seq),
        "speedup_bf16_service_vs_fp32_sequential": ratio(svc16, seq),
        "speedup_vllm_vs_sequential": ratio(vll, seq),
        "matmul_gflops": fp32,
        "matmul_gflops_bf16": bf16,
        "model_gflops_achieved": svc * 2 * params / 1e9 if svc else None,
        "model_gflops_achieved_bf16": svc16 * 2 * params / 1e9 if svc16 else None,
        "weight_update_s": shm_s,
        "weight_update_first_s": updates["shm"][0],
        "weight_update_bus_s": bus_s,
        "disk_roundtrip_s": disk_s,
        "speedup_update_vs_disk": ratio(disk_s, shm_s),
        "speedup_update_bus_vs_disk": ratio(disk_s, bus_s),
        "quick": args.quick,
    }
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
