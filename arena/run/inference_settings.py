"""Inference actors whose settings differ from the run's, named in a warning.

Inference actors started by hand (the multi-host recipe, a scheduler's script) take their
settings from their own flags, which nothing ties to the run's config: an actor started with
``--model tiny --name main`` batches 32 requests and waits 20 ms where the run says 16 and 10.
Every inference actor publishes the settings it serves with in its heartbeat status
(``settings``: :func:`arena.policies.config.shared_settings`, every field but those that may
differ per actor, :data:`~arena.policies.config.PER_ACTOR`). :class:`SettingsCheck` compares
those of each actor serving the run's policy with the run's ``inference`` section and
``model``, and names each actor that differs, once per difference. ``arena inference --config
RUN_DIR/config.yaml`` starts an actor with the run's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from arena.policies.config import shared_settings
from arena.run.config import RunConfig


def run_settings(config: RunConfig) -> dict[str, Any]:
    """The settings every inference actor of the run's policy should serve with."""
    served = replace(config.inference, name=config.learner.name, model=config.model)
    return shared_settings(served)


def differences(expected: Mapping[str, Any], published: Mapping[str, Any]) -> list[str]:
    """``"max_batch 32 (the run: 16)"`` for each setting ``published`` gives otherwise than
    ``expected`` (a setting it does not publish, from an older Arena, is not compared)."""
    return [
        f"{key} {published[key]!r} (the run: {value!r})"
        for key, value in expected.items()
        if key in published and published[key] != value
    ]


class SettingsCheck:
    """Called with each listing of the broker's directory; warns (``say``) about every inference
    actor of the run's policy whose published settings differ from the run's, once for each
    actor and set of differences."""

    def __init__(self, config: RunConfig, run_dir: Path, say: Callable[[str], None]) -> None:
        self.service = f"policy:{config.learner.name}"
        self.expected = run_settings(config)
        self.config_path = run_dir / "config.yaml"
        self.say = say
        self.warned: dict[str, list[str]] = {}
        """Actor name -> the differences it was named for last."""

    def __call__(self, actors: list[dict[str, Any]]) -> None:
        for actor in actors:
            if self.service not in actor.get("services", ()):
                continue
            published = (actor.get("status") or {}).get("settings")
            if not isinstance(published, Mapping):
                continue  # no heartbeat yet, or an actor that publishes none
            found = differences(self.expected, published)
            if not found or self.warned.get(actor["name"]) == found:
                continue
            self.warned[actor["name"]] = found
            self.say(
                f"inference actor {actor['name']} ({actor.get('host')}:{actor.get('pid')}) serves "
                f"{self.service} with settings unlike the run's inference section: "
                f"{', '.join(found)}; `arena inference --config {self.config_path}` takes the "
                "run's"
            )
