"""A run's directory and the settings that depend on it: a new ``<output_dir>/<name>/<time>/``,
a fixed ``run_dir`` or ``resume``'s, and the config resolved for the run (the learner's
checkpoint directory, batch and loss settings that follow from the run-level ones)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from arena.core import dtypes
from arena.core.errors import ConfigError
from arena.models.adapter_shape import SHARED_ADAPTER
from arena.run.addresses import free_port
from arena.run.bases import (
    lora_of,
    own_bases,
    policy_adapter_dir,
    shared_adapters,
    trained_bases,
)
from arena.run.config import RunConfig
from trainers.config import LoRAConfig


def make_run_dir(config: RunConfig) -> Path:
    """The run's directory: ``resume``'s, ``run_dir``, or a new ``<output_dir>/<name>/<time>/``."""
    if config.resume:
        run_dir = Path(config.resume)
        if not (run_dir / "config.yaml").exists():
            raise FileNotFoundError(
                f"resume={run_dir}: no config.yaml there; is it a run directory?"
            )
        return run_dir
    if config.run_dir:
        run_dir = Path(config.run_dir)
        if (run_dir / "config.yaml").exists():
            raise ConfigError(
                f"run_dir={run_dir} already holds a run; resume={run_dir} continues it"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
        return run_dir
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(config.output_dir) / config.name / stamp
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def recorded_run_dir(config: RunConfig, config_path: str | Path) -> Path:
    """The run directory of the run config read from ``config_path``: the ``run_dir`` it
    records (``arena train`` records it in the ``config.yaml`` it writes), wherever that file
    was copied or mounted (a Kubernetes ConfigMap, another host); the file's own directory for
    a config.yaml from before run directories were recorded."""
    return Path(config.run_dir) if config.run_dir else Path(config_path).parent


def resolve_for_run(config: RunConfig, run_dir: Path, write: bool = True) -> RunConfig:
    """Fill in what depends on the run directory and the run-level settings; ``run_dir``
    itself is recorded, absolute, so that the ``config.yaml`` written from this config names
    its run directory wherever it is read (:func:`recorded_run_dir`). ``write``: write the
    initial adapters into it; False names them only (``arena deploy``, whose run directory is
    the cluster's: its ``arena train`` writes them there)."""
    learner = config.learner
    learner = replace(
        learner,
        model=config.model,
        checkpoint=replace(
            learner.checkpoint,
            # absolute: a learner started by hand elsewhere reads it from learner.yaml
            dir=str(run_dir.resolve() / "checkpoints"),
            every=max(1, config.checkpoint_every),
            resume=True,
        ),
        batch=replace(
            learner.batch,
            max_response_tokens=config.sampling.max_new_tokens,
            # the trainer requests every step (in both modes); a learner stepping on
            # its own as well would take batches the trainer then finds missing
            batch_samples=0,
        ),
        # Training samples are drawn at sampling.temperature and the samplers report their
        # logprobs under that tempered distribution (arena/policies/sampling.py). The learner
        # divides its logits by the same T, so the policy it optimizes is the one that
        # sampled, and its importance ratios (TIS, PPO) compare that policy with itself. A
        # learner at T = 1 would take the gradient of another distribution than the samples'.
        loss=replace(learner.loss, temperature=config.sampling.temperature),
        sampled_in=sampling_dtype(config),
    )
    inference = config.inference
    adapter_policies = shared_adapters(config.play)
    if adapter_policies:
        # every process starts from the same adapters: the learner trains them, the
        # inference actors serve them until its first update
        adapters = write_initial_adapters(config, run_dir / "adapters", adapter_policies, write)
        # an adapter sampled at its own temperature or length is re-scored and filtered by its
        # own (trainers/microbatch.py MicroBatch.temperatures, trainers/filters.py)
        own = {name: config.play.sampling_of(name) for name in adapter_policies}
        temperatures = {
            n: s.temperature for n, s in own.items() if s.temperature != config.sampling.temperature
        }
        lengths = {
            n: s.max_new_tokens
            for n, s in own.items()
            if s.max_new_tokens != config.sampling.max_new_tokens
        }
        learner = replace(
            learner,
            adapters=adapters,
            loss=replace(learner.loss, adapter_temperatures=temperatures),
            batch=replace(learner.batch, adapter_max_response_tokens=lengths),
        )
        inference = replace(inference, adapters=adapters)
    elif learner.lora.enabled and inference.backend == "hf":
        # The shared policy's adapter is served unmerged on the frozen base, as named policies'
        # are: merged into bf16 weights, a step's small delta would be rounded away. It starts
        # fresh (the base exactly) until the learner's first update carries the trained one.
        adapters = write_initial_adapters(config, run_dir / "adapters", [SHARED_ADAPTER], write)
        learner = replace(learner, lora=replace(learner.lora, serve="adapter"))
        inference = replace(inference, adapters=adapters, default_adapter=SHARED_ADAPTER)
    if own_bases(config.play):
        # the policies with models of their own have learners of their own (arena/run/bases.py)
        known = [learner.name, *trained_bases(config.play)]
        learner = replace(
            learner, batch=replace(learner.batch, policy=learner.name, known_policies=known)
        )
        for name, spec in own_bases(config.play).items():
            if spec.lora is not None and spec.train and inference.backend == "hf" and write:
                write_initial_adapters(
                    config,
                    policy_adapter_dir(run_dir, name),
                    [SHARED_ADAPTER],
                    model=str(spec.model),
                    shape=lora_of(spec, config.learner.lora, f"policies.{name}"),
                )
    ray = config.ray
    if config.launcher == "ray" and config.bus.address is None and not ray.broker_port:
        ray = replace(ray, broker_port=free_port())  # the broker runs on this node
    return replace(
        config, learner=learner, inference=inference, ray=ray, run_dir=str(run_dir.resolve())
    )


def write_initial_adapters(
    config: RunConfig,
    folder: Path,
    names: list[str],
    write: bool = True,
    model: str | None = None,
    shape: LoRAConfig | None = None,
) -> dict[str, str]:
    """One fresh adapter per name (a named policy, or the shared policy's), the base exactly
    (B is zero), in ``shape`` (``learner.lora``'s by default) on ``model`` (the run's by
    default) and seeded by the run's seed, as peft directories under ``folder``; kept as they
    are when a resumed run finds them there, and not written without ``write``. Returns
    name -> absolute path."""
    from arena.models import load_model
    from arena.models.adapter_shape import AdapterShape
    from arena.models.lora import add_adapters
    from arena.models.lora_files import CONFIG_FILE, save_adapter

    model = model or config.model
    paths = {name: (folder / name).resolve() for name in names}
    missing = [name for name, path in paths.items() if not (path / CONFIG_FILE).exists()]
    if missing and write:
        weights, _ = load_model(model, dtype="float32", device="cpu")
        add_adapters(
            weights,
            missing,
            AdapterShape.of(shape or config.learner.lora),
            seed=config.learner.seed,
        )
        for name in missing:
            save_adapter(paths[name], weights, name, base=model)
    return {name: str(path) for name, path in paths.items()}


def sampling_dtype(config: RunConfig) -> str:
    """The dtype the run's inference actors hold the trained weights in (where it is bf16, the
    learner rounds its float32 weights to bf16 first): an explicit ``inference.dtype`` as it is;
    ``auto`` resolved on this machine where the run starts its inference actors here itself,
    and otherwise left ``auto`` for the learner to resolve on its own host (the machine that
    writes the config, a login node or a CPU coordinator, says nothing of the GPU nodes where a
    deployment's or a Ray cluster's inference actors run; the learner's host is of their kind)."""
    inference = config.inference
    elsewhere = inference.actors == 0 or config.launcher != "local"
    if inference.dtype == dtypes.AUTO and elsewhere:
        return dtypes.AUTO
    named = dtypes.DTYPES.get(dtypes.ALIASES.get(inference.dtype, inference.dtype))
    if named is not None and named.is_float:
        return named.name  # by its name: the run's own process needs no torch for it
    from arena.models import to_dtype  # auto measures this machine (torch); a bad name raises

    return str(to_dtype(inference.dtype, inference.device)).removeprefix("torch.")
