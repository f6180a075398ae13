"""Named LoRA adapters on one frozen base model: a policy per role, several in one batch.

:func:`add_adapters` swaps each targeted ``nn.Linear`` for a :class:`LoRALinear`, which keeps the
base weight (the same parameter, under the same state-dict name) and holds one low-rank pair per
named adapter::

    y = x W^T + b + (alpha / r) * (x A_k^T) B_k^T      a row routed to adapter k
    y = x W^T + b                                      a row routed to the base (None)

``A_k`` starts random and ``B_k`` zero, as in peft, so a new adapter plays exactly as the base.
Which adapter each row of a batch uses is set by :func:`route` for the forwards inside it; rows
of different adapters share one forward, and each adapter's gradient reaches only its own pair.

An adapter's tensors go by peft's names (``base_model.model.<module>.lora_A.weight``), so on
disk it is a peft LoRA directory (:mod:`arena.models.lora_files`) that peft and vLLM load.

This module is the one home of adapters: their layers, routing and layout (peft's tensor names,
and the one buffer per adapter that a weight update carries); their shape and defaults
(:class:`AdapterShape`, :data:`DEFAULT_RANK`, :data:`DEFAULT_ALPHA`,
:data:`DEFAULT_TARGET_MODULES`) are defined beside it, without torch, in :mod:`arena.models.adapter_shape`, so a config is read
without importing torch.
"""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from arena.models.adapter_shape import DEFAULT_SHAPE, AdapterError, AdapterShape

PEFT_PREFIX = "base_model.model."


class _Router:
    """Which rows of the batch use which adapter, shared by every adapted layer of a model."""

    def __init__(self) -> None:
        self.groups: list[tuple[str, torch.Tensor | None]] = []
        """(adapter, rows) for the current forwards: rows None (every row), a long tensor of
        row indices, or a float ``[rows]`` mask of 1s and 0s (:func:`route_masks`)."""


HALF = (torch.bfloat16, torch.float16)
"""Base dtypes whose adapted layers compute their adapters' branch in float32."""


class LoRALinear(nn.Linear):
    """A linear layer with any number of named LoRA pairs beside its frozen weight."""

    def __init__(self, base: nn.Linear, shape: AdapterShape, router: _Router) -> None:
        nn.Module.__init__(self)  # the base's parameters are taken, not allocated again
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight = base.weight
        self.bias = base.bias
        self.scale = shape.scale
        self.rank = shape.r
        self.lora_A = nn.ParameterDict()
        self.lora_B = nn.ParameterDict()
        self.router = router

    @property
    def adapter_numel(self) -> int:
        """Elements of one adapter's pair in this layer."""
        return self.rank * (self.in_features + self.out_features)

    def add(self, name: str, generator: torch.Generator, storage: torch.Tensor) -> None:
        """Adapter ``name``'s pair, as views of ``storage`` (:attr:`adapter_numel` elements)."""
        split = self.rank * self.in_features
        a = storage[:split].view(self.rank, self.in_features)
        bound = 1.0 / math.sqrt(self.in_features)  # kaiming_uniform(a=sqrt(5)), as nn.Linear
        start = torch.empty(a.shape, dtype=torch.float32).uniform_(
            -bound, bound, generator=generator
        )
        with torch.no_grad():
            a.copy_(start)
            storage[split:].zero_()
        self.lora_A[name] = nn.Parameter(a)
        self.lora_B[name] = nn.Parameter(storage[split:].view(self.out_features, self.rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype in HALF:
            # A half-precision base (bf16 serving): its matmul stays in its dtype, but each
            # adapter's branch and the sum are float32, and so is what the layer returns. Added
            # in bf16, a trained delta below half the output's rounding step is lost, and so is
            # most of a small step's effect: in SmolLM2-135M a step that moves a log-probability
            # by 0.09 in float32 moved it by 0.02-0.06 served in bf16 (tests/arena/models/
            # test_lora_precision.py). The float32 residual stream carries the delta on.
            out = super().forward(x.to(self.weight.dtype)).float()
            x = x.float()
        else:
            out = super().forward(x)
        for name, rows in self.router.groups:
            a, b = self.lora_A[name], self.lora_B[name]
            if rows is None:
                out = out + (x @ a.T) @ b.T * self.scale
            elif rows.is_floating_point():
                mask = rows.view(-1, *([1] * (x.dim() - 1)))
                out = out + (x @ a.T) @ b.T * (mask * self.scale)
            else:
                out = out.index_add(0, rows, (x[rows] @ a.T) @ b.T * self.scale)
        return out


def adapted_layers(model: nn.Module) -> dict[str, LoRALinear]:
    """The model's LoRA layers by module name, in model order. Found once, when its adapters are
    first added: a walk of every module takes milliseconds, which an adapter weight update (and
    every routed forward) would otherwise pay each time."""
    layers = getattr(model, "_arena_adapted_layers", None)
    if layers is None:
        return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    return dict(layers)


def adapter_names(model: nn.Module) -> list[str]:
    """The adapters ``model`` holds, in the order they were added."""
    layers = adapted_layers(model)
    return list(next(iter(layers.values())).lora_A) if layers else []


def target_layers(model: nn.Module, shape: AdapterShape) -> list[tuple[str, nn.Linear]]:
    """The linear layers an adapter of ``shape`` adapts, by module name, in model order: the
    order of every adapter's buffer."""
    return [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in shape.target_modules
    ]


def add_adapters(
    model: nn.Module, names: Sequence[str], shape: AdapterShape = DEFAULT_SHAPE, seed: int = 0
) -> None:
    """Give ``model`` one adapter per name (each the base exactly until trained). A model that
    has adapters keeps them and its shape; adding a name it holds is an error."""
    layers = adapted_layers(model)
    if not layers:
        router = _Router()
        targets = target_layers(model, shape)
        if not targets:
            raise AdapterError(f"the model has no linear layer named {shape.target_modules}")
        for name, module in targets:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            layer = LoRALinear(module, shape, router)
            setattr(parent, child, layer)
            layers[name] = layer
        model._arena_adapted_layers = dict(layers)  # type: ignore[assignment]
        if first_weight(layers).dtype in HALF:
            _cast_inputs_of_plain_linears(model)
    held = adapter_names(model)
    for name in names:
        if not name or hasattr(nn.ParameterDict, name) or "." in name:
            raise AdapterError(f"{name!r} cannot name an adapter (empty, dotted or reserved)")
        if name in held:
            raise AdapterError(f"the model already has an adapter named {name!r}")
        # each adapter's start depends on its name and the seed, not on what else is added
        generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        # One buffer per adapter, every layer's pair a view of it: an update of the adapter is
        # one tensor to check and copy, however many layers it spans (bench/adapters.py).
        # float32 whatever the base's dtype: a small trained B keeps its every bit, and a
        # weight update (float32 from the learner) is copied in unrounded
        flat = torch.empty(
            sum(layer.adapter_numel for layer in layers.values()),
            dtype=torch.float32,
            device=first_weight(layers).device,
        )
        offset = 0
        for layer in layers.values():
            layer.add(name, generator, flat[offset : offset + layer.adapter_numel])
            offset += layer.adapter_numel
        _flat_buffers(model)[name] = flat
        held.append(name)
    if not hasattr(model, "_arena_adapter_shape"):
        model._arena_adapter_shape = shape  # type: ignore[assignment]


def first_weight(layers: Mapping[str, LoRALinear]) -> torch.Tensor:
    return next(iter(layers.values())).weight


def _cast_inputs_of_plain_linears(model: nn.Module) -> None:
    """Adapted layers of a half-precision base return float32 (:class:`LoRALinear`); the
    linear layers without adapters (``lm_head``) take their input in their own dtype."""

    def cast(module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return (args[0].to(module.weight.dtype), *args[1:])

    for module in model.modules():
        if type(module) is nn.Linear and module.weight.dtype in HALF:
            module.register_forward_pre_hook(cast)


def _flat_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    buffers = getattr(model, "_arena_adapter_flat", None)
    if buffers is None:
        buffers = {}
        model._arena_adapter_flat = buffers  # type: ignore[assignment]
    return buffers


def adapter_flat(model: nn.Module, name: str) -> torch.Tensor:
    """The one buffer that holds every tensor of adapter ``name`` (its layers' A and B are
    views of it, in layer order): what an adapter weight update carries."""
    flat = _flat_buffers(model).get(name)
    if flat is None:
        raise AdapterError(f"no adapter named {name!r}; held: {', '.join(adapter_names(model))}")
    first = next(iter(adapted_layers(model).values())).lora_A[name]
    if first.untyped_storage().data_ptr() != flat.untyped_storage().data_ptr():
        raise AdapterError(
            f"adapter {name!r} no longer lives in its buffer (the model was moved or cast "
            "after its adapters were added): add adapters after .to(device, dtype)"
        )
    return flat


def adapter_shape(model: nn.Module) -> AdapterShape:
    """The shape the model's adapters were made with."""
    shape = getattr(model, "_arena_adapter_shape", None)
    if shape is None:
        raise AdapterError("the model has no adapters")
    return shape


@contextlib.contextmanager
def route(model: nn.Module, rows: Sequence[str | None]) -> Iterator[None]:
    """Run the forwards inside with row ``i`` of the batch through adapter ``rows[i]`` (None:
    the base alone). Unknown names raise :class:`AdapterError` before anything runs."""
    layers = adapted_layers(model)
    wanted = {name for name in rows if name is not None}
    if wanted and not layers:
        raise AdapterError(f"the model holds no adapters, asked for {sorted(wanted)[0]!r}")
    if not layers:
        yield
        return
    held = adapter_names(model)
    unknown = sorted(wanted - set(held))
    if unknown:
        raise AdapterError(f"no adapter named {unknown[0]!r}; held: {', '.join(held)}")
    router = next(iter(layers.values())).router
    device = next(iter(layers.values())).weight.device
    groups: list[tuple[str, torch.Tensor | None]] = []
    for name in dict.fromkeys(n for n in rows if n is not None):
        index = [i for i, n in enumerate(rows) if n == name]
        every = len(index) == len(rows)
        groups.append((name, None if every else torch.tensor(index, device=device)))
    previous, router.groups = router.groups, groups
    try:
        yield
    finally:
        router.groups = previous


@contextlib.contextmanager
def route_masks(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Like :func:`route`, but each adapter's rows given as a float ``[rows]`` mask (1: the row
    uses it), every adapter's branch computed for every row and multiplied by its mask: the
    forwards inside then launch the same kernels on the same tensors whichever rows use which
    adapter, so a CUDA graph captured once replays for any routing written into the masks
    (:mod:`arena.policies.static_decode`). Costs an adapter's low-rank branch on rows that do
    not use it."""
    layers = adapted_layers(model)
    if not layers:
        if masks:
            raise AdapterError(f"the model holds no adapters, asked for {sorted(masks)[0]!r}")
        yield
        return
    held = adapter_names(model)
    unknown = sorted(set(masks) - set(held))
    if unknown:
        raise AdapterError(f"no adapter named {unknown[0]!r}; held: {', '.join(held)}")
    router = next(iter(layers.values())).router
    previous, router.groups = router.groups, list(masks.items())
    try:
        yield
    finally:
        router.groups = previous


FLAT_PREFIX = "lora_adapter."
"""An adapter weight update names each adapter's buffer ``lora_adapter.<name>``."""


def adapter_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every adapter's buffer (:func:`adapter_flat`) as ``lora_adapter.<name>``: what an
    adapter-only weight update carries, one tensor per adapter."""
    return {f"{FLAT_PREFIX}{name}": adapter_flat(model, name) for name in adapter_names(model)}


def adapter_layout(model: nn.Module, shape: AdapterShape) -> list[tuple[str, tuple[int, int]]]:
    """Peft name and shape of each tensor in one adapter's buffer (:func:`adapter_flat`), in
    buffer order, for an adapter of ``shape`` on ``model`` (a meta-device copy will do): how a
    server that holds no such buffer (the vllm backend) reads an adapter weight update."""
    layout = []
    for module, layer in target_layers(model, shape):
        layout.append((f"{PEFT_PREFIX}{module}.lora_A.weight", (shape.r, layer.in_features)))
        layout.append((f"{PEFT_PREFIX}{module}.lora_B.weight", (layer.out_features, shape.r)))
    return layout


def unflatten_adapter(
    name: str, flat: torch.Tensor, layout: Sequence[tuple[str, tuple[int, int]]]
) -> dict[str, torch.Tensor]:
    """Adapter ``name``'s buffer cut into its tensors under peft's names (views of ``flat``),
    as :func:`adapter_layout` lays them out; a buffer of another size is refused."""
    sizes = [math.prod(shape) for _, shape in layout]
    if flat.dim() != 1 or flat.numel() != sum(sizes):
        raise AdapterError(
            f"adapter {name!r}: an update of shape {tuple(flat.shape)}, but its buffer holds "
            f"{sum(sizes)} elements"
        )
    parts = torch.split(flat, sizes)
    return {key: part.view(shape) for (key, shape), part in zip(layout, parts, strict=True)}


def adapter_parameters(model: nn.Module, name: str) -> list[nn.Parameter]:
    """The trainable tensors of one adapter (its A and B in every adapted layer)."""
    layers = adapted_layers(model).values()
    return [p for layer in layers for p in (layer.lora_A[name], layer.lora_B[name])]


def adapter_state(model: nn.Module, name: str) -> dict[str, torch.Tensor]:
    """CPU copies of one adapter's tensors under peft's names."""
    if name not in adapter_names(model):
        raise AdapterError(f"no adapter named {name!r}; held: {', '.join(adapter_names(model))}")
    state = {}
    for module, layer in adapted_layers(model).items():
        for part, tensors in (("lora_A", layer.lora_A), ("lora_B", layer.lora_B)):
            state[f"{PEFT_PREFIX}{module}.{part}.weight"] = tensors[name].detach().to("cpu")
    return state


@torch.no_grad()
def load_adapter_state(model: nn.Module, name: str, state: Mapping[str, torch.Tensor]) -> None:
    """Copy an adapter's tensors (peft names, every one of them) into adapter ``name``."""
    current = dict(_named_tensors(model, name))
    missing, unknown = set(current) - set(state), set(state) - set(current)
    if missing or unknown:
        example = sorted(missing or unknown)[0]
        raise AdapterError(
            f"adapter {name!r}: {'missing' if missing else 'unexpected'} tensor {example}"
        )
    for key, tensor in state.items():
        target = current[key]
        if tuple(tensor.shape) != tuple(target.shape):
            raise AdapterError(
                f"adapter {name!r}: {key} has shape {tuple(tensor.shape)}, "
                f"the model's is {tuple(target.shape)}"
            )
        target.copy_(tensor)


def _named_tensors(model: nn.Module, name: str) -> Iterator[tuple[str, nn.Parameter]]:
    if name not in adapter_names(model):
        raise AdapterError(f"no adapter named {name!r}; held: {', '.join(adapter_names(model))}")
    for module, layer in adapted_layers(model).items():
        yield f"{PEFT_PREFIX}{module}.lora_A.weight", layer.lora_A[name]
        yield f"{PEFT_PREFIX}{module}.lora_B.weight", layer.lora_B[name]
