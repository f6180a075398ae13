"""Weights in motion: a learner's state dict, versioned, cut into buckets, checked on receipt.

One module per step, each importing only those above it:

- :mod:`arena.weights.buckets`: the format. A version of a state dict cut into ``weights``
  buckets with a crc32 each, a tensor's entry (name, dtype, shape, where its bytes are), and
  the checks every update passes (:func:`~arena.weights.buckets.check_tensor`).
- :mod:`arena.weights.shm`: the same-host transport. A version is written once into a
  safetensors file in ``/dev/shm``; buckets only reference it, and receivers map it read-only.
- :mod:`arena.weights.assembler`: buckets of either form in, one complete and validated state
  dict out (:class:`~arena.weights.assembler.WeightAssembler`); a partial or corrupt update is
  refused and the old weights keep serving.
- :mod:`arena.weights.publisher`: the sender. Puts each version on topic ``weights.<name>`` as
  references to a shared-memory file, or as bytes on the bus where no file can be shared, and
  serves the bytes to receivers on other hosts
  (:class:`~arena.weights.publisher.WeightPublisher`).
- :mod:`arena.weights.receiver`: the served side. Takes buckets by every route (mapped file,
  bus frames, a fetch from the publisher, a checkpoint directory) and hands a checked update to
  the caller, who applies it between batches (:class:`~arena.weights.receiver.WeightReceiver`).

Dtype names, sizes and safetensors codes come from :mod:`arena.core.dtypes`. Import the modules
themselves: this file imports nothing, so a process loads only the steps it uses. It holds the
refusal words that acknowledgements carry, which the trainer reads without torch.
"""

NEEDS_FULL = "needs a full update"
"""The words of a refusal of a delta (an update with ``since``) by a receiver that does not serve
the version it was made against: the publisher answers them by publishing every tensor again."""

NOT_NEWER = "is not newer than"
"""The words of a refusal of a version already served: a re-publish (every learner publishes its
weights when it starts), which acknowledgements carry in their reason and no one need report."""
