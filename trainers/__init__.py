"""Learning from records: the shared-weight learner and its parts. Knows nothing of games.

- ``config``      one dataclass per config section (LearnerConfig and its sections)
- ``advantages``  turn-level returns; batch / ema / group / broadcast advantages (pure)
- ``batch``       Episode -> per-turn samples -> padded micro-batches with a loss mask
- ``filters``     staleness bound; zero-advantage, void and overlong filters
- ``losses``      PPO clip (asymmetric, dual), truncated IS, k3 KL, entropy, aggregations
- ``logprobs``    the model's logprobs and entropies on the trained tokens only
- ``inbox``       validated, de-duplicated episodes waiting for a step
- ``optim``       AdamW and the LR schedule
- ``precision``   the autocast dtype; float32 weights rounded to bf16 once where the learner
                  or its sampler computes in bf16
- ``policy``      loading the model, LoRA, the KL reference, HF weights out
- ``checkpoint``  atomic, pickle-free checkpoints
- ``distributed`` torchrun ranks, DDP / FSDP2, batch sharing
- ``learner``     the Learner (in-process) and ``python -m trainers.learner``
- ``actor``       the Learner on the bus (service ``learner``)
"""
