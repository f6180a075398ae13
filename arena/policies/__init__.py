"""Policies: prompts in, sampled tokens with logprobs out (see :mod:`arena.policies.base`)."""
