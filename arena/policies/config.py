"""The settings of a policy and of the inference actor that serves it: one set of names and
defaults for YAML run configs, for ``arena inference`` flags and for :func:`make_policy`.

:class:`InferenceConfig` extends :class:`PolicyConfig` with how the actor batches requests and
takes weight updates; ``arena inference`` derives its flags from it
(:func:`arena.core.config.add_arguments`), and a run config's ``inference`` section is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from arena.core.errors import ConfigError
from arena.core.limits import WEIGHT_UPDATE
from arena.policies.types import check_keys


@dataclass
class PolicyConfig:
    """Which policy to build and how. Fields a backend does not use are ignored by it."""

    backend: str = "hf"
    """Policy backend: ``hf`` (transformers), ``vllm``, ``remote`` (an inference actor over the
    bus), ``openai`` (an HTTP endpoint), ``scripted`` (a bot or a function), or a plugin's
    (entry-point group ``arena.policies``, docs/plugins.md)."""
    model: str = "smollm2-135m"
    """Model spec for ``hf``/``vllm``: ``smollm2-135m`` (the embedded default), ``tiny`` (tests)
    or a local Hugging Face directory; the model name sent to an ``openai`` endpoint; for a plugin
    backend, whatever it makes of it (an API model name, a path...), passed as is."""
    tokenizer: str = "smollm2-135m"
    """A plugin backend or ``openai``: the model spec whose tokenizer and chat template rendered
    the token ids of the prompts it is sent (``arena.models.load_tokenizer(config.tokenizer)``
    reads them back; ``openai`` counts the tokens of a reply sent without ids with it); a
    tournament participant's ``tokenizer`` is passed here. ``hf``/``vllm`` use ``model``'s
    own."""
    name: str = "main"
    """Policy name: an inference actor serves it as ``policy:<name>``; ``remote`` calls that."""
    dtype: str = "auto"
    """Weights and compute dtype for local backends: float32, bfloat16, float16, or ``auto``:
    bfloat16 where this machine computes it measurably faster than float32 (a GPU, or a CPU
    with native bf16), float32 elsewhere; measured once per process and logged."""
    device: str = "auto"
    """Torch device for local backends: ``auto`` (CUDA when there is one), cpu, cuda, cuda:1."""
    max_batch: int = 32
    """Most requests generated together in one batch."""
    attention: str = "auto"
    """``hf``: the attention kernel (``eager``, ``sdpa``, ...); ``auto`` is eager on CPU, where
    it decodes batches faster, and the model's default elsewhere."""
    prefix_cache_mb: float = 512
    """``hf``: megabytes of prompt-prefix KV blocks kept for the current weights (dropped at
    every weight change, least recently used evicted first; 0: none), so a prompt is computed
    only past the longest prefix an earlier request of the same weights and adapter shared. A
    fixed size rather than a share of the host: the blocks live on the model's device, and
    512 MB is what an fp32 SmolLM2-135M needs for ~11k tokens (46 KB a token), a step's worth of
    distinct Tic-Tac-Toe prompts' new blocks, while a few percent of this 23 GB host or of a GPU."""
    static_decode: str = "auto"
    """``hf``: how to decode. ``on``: a preallocated KV cache per batch shape, no host sync per
    token (stop criteria checked every 16 tokens on CUDA), each step captured as a CUDA graph on
    CUDA (:mod:`arena.policies.static_decode`); ``off``: the per-token loop, which drops each
    finished request from the batch; ``auto``: ``on`` on CUDA, ``off`` elsewhere (on CPU the
    static path measured no faster, bench/gpu_check.py). Same tokens and logprobs either way
    for greedy and seeded requests. Needs a full-attention model on the ``eager`` or ``sdpa``
    kernel (``auto`` otherwise falls back to the loop; ``on`` is refused, saying why)."""
    seed: int = 0
    """Seed of the sampler for requests that bring no seed of their own."""
    address: str | None = None
    """``remote``: the broker address (ipc:// or tcp://)."""
    timeout: float = 120.0
    """``remote``/``openai``: seconds to wait for one reply before failing. In a run config's
    ``inference`` section: the same bound on each policy request of the run's rollout actors
    and evaluations (the inference actor itself does not use it)."""
    base_url: str | None = None
    """``openai``: endpoint root, e.g. ``http://127.0.0.1:8000/v1``."""
    api_key_env: str = "OPENAI_API_KEY"
    """``openai``: the environment variable holding the key (configs never hold keys)."""
    bot: str | None = None
    """``scripted``: ``"module:Factory"`` of a bot with ``act(env, agent)`` or a callable."""
    engine: dict[str, Any] = field(default_factory=dict)
    """``vllm``: extra keyword arguments for ``vllm.LLM`` (e.g. ``max_model_len``)."""
    adapters: dict[str, str] = field(default_factory=dict)
    """``hf``/``vllm``: named LoRA adapters served beside the base, name -> a peft adapter
    directory made for ``model`` (one made for another base is refused at load, naming both). A request names
    its adapter in its sampling params (``adapter``); one it does not hold fails alone."""
    default_adapter: str = ""
    """``hf``: the adapter (one of ``adapters``) that serves a request naming none: a shared
    policy trained as a LoRA adapter (``learner.lora``), served unmerged on the frozen base so
    that a bf16 base does not round its small updates away. ``arena train`` sets it; empty: such
    a request plays the base alone."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyConfig:
        """From a mapping; an unknown key is refused, naming the nearest valid one."""
        check_keys(data, [f.name for f in fields(cls)], "policy config")
        return cls(**data)


@dataclass
class InferenceConfig(PolicyConfig):
    """An inference actor: the policy it serves, how it batches, how it takes weights."""

    actors: int = 1
    """In a run config: how many inference actors of the shared base ``arena train`` starts
    itself (requests are balanced across every one on the bus, those started elsewhere
    included). One process is one actor. With 0 it starts no inference actor at all, neither
    a named policy's own nor a population's pool actors: they join from elsewhere
    (``arena/run/inference_actors.py``)."""
    max_wait_ms: float = 20.0
    """How long the first request of a batch waits for others to join it."""
    max_queue: int = 4096
    """Most requests waiting; past it new requests get a ``busy`` error."""
    weight_timeout: float = WEIGHT_UPDATE
    """Seconds an incomplete weight update may take before it is dropped."""
    shm_weights: bool = True
    """Map same-host shared-memory weight files; off, their bytes are fetched over the bus."""
    hang_timeout: float | None = None
    """Seconds one backend call (a batch, a weight update) may run before the actor takes its
    engine for wedged: it then withholds its heartbeats, so the broker declares it dead within
    ``bus.heartbeat_timeout`` and ``arena train`` kills and restarts it. None: 30 s, or 4 times
    the slowest call this actor has made when that is longer, so a wedge is found in under a
    minute and a slow batch on a loaded host is no hang. A number: that bound, fixed (a run
    whose batches outgrow it is stopped, naming the batch time)."""
    max_oom_batches: int = 3
    """Batches in a row that may fail out of memory (the backend raised torch's
    ``OutOfMemoryError``, ``MemoryError`` or an error saying "out of memory") before the actor
    takes itself for unable to serve: it fails that batch's requests like any failed batch's,
    then exits (status 1) with one line naming the error, so that ``arena train`` restarts it
    (``inference_max_restarts``) and, if it keeps failing, stops naming that line. A batch out of
    memory is first served in halves, down to one request (and the actor serves batches no
    larger than the largest part that fit, as ``arena status`` says, until
    ``oom_regrow_batches``): it fails only where one request runs out of memory alone, and then only its own requests; any
    other outcome resets the count. 0: never exits."""
    oom_regrow_batches: int = 64
    """After a batch ran out of memory and the actor cut its batch size to the largest part
    that fit (see ``max_oom_batches``), this many batches in a row filled the cut size without
    running out make the actor double it again, back up to ``max_batch`` (a warning says
    each move, ``arena status`` the size now): a shortage that passes costs throughput for a
    while, not for the actor's life. 0: a cut size stays."""

    def __post_init__(self) -> None:
        if self.hang_timeout is not None and not self.hang_timeout > 0:
            raise ConfigError(
                f"inference.hang_timeout must be > 0 seconds, got {self.hang_timeout}"
            )
        if self.max_oom_batches < 0:
            raise ConfigError(f"inference.max_oom_batches must be >= 0, got {self.max_oom_batches}")
        if self.oom_regrow_batches < 0:
            raise ConfigError(
                f"inference.oom_regrow_batches must be >= 0, got {self.oom_regrow_batches}"
            )


NOT_FLAGS = ("actors", "engine", "adapters", "address")
"""Fields of :class:`InferenceConfig` that ``arena inference`` takes no flag for: ``actors`` is
run-level (how many actors), ``engine`` and ``adapters`` are mappings (``--engine KEY=VALUE``,
``--adapter NAME=PATH``), and the policy's own ``address`` is the actor's (``--address``)."""


PER_ACTOR = ("actors", "name", "seed", "device", "address", "timeout")
"""Fields of :class:`InferenceConfig` that may differ between the inference actors of one run:
how many there are, which policy each serves, its sampler's seed, its host's device, the
broker it connects to and ``timeout`` (the requesters' bound, which the actor does not use). Every other field is a setting they share with the run's ``inference``
section (:func:`shared_settings`)."""


def shared_settings(config: InferenceConfig) -> dict[str, Any]:
    """The fields of ``config`` that every inference actor of a run serves with alike (all but
    :data:`PER_ACTOR`): what an inference actor publishes in its status as ``settings``, and
    what ``arena train`` compares with its own ``inference`` section (and ``model``)."""
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name not in PER_ACTOR}
