"""Inference actors, learners and rollout actors the run needs and does not start: named the
moment they are gone, and again when they are back.

A run with ``inference.actors: 0`` (the hand-started recipe of ``docs/deploy.md``) waits for its
inference actors by name and prints the command of each (:mod:`arena.run.roster`); so does one
that waits for more than it starts, or for a simulator's. Nothing restarts those: the launcher
restarts only the run's own children (and :mod:`arena.run.hangs` kills its hung ones). Before,
one that died went unsaid: requests went to the others, or waited until one served again, and
the steps only slowed. Now the broker's notices tell: ``actor.left`` (it closed, e.g. Ctrl-C) and
``actor.dead`` (silent past ``bus.heartbeat_timeout``: killed, its host gone, hung) name it at
once in ``events.log`` and on the console, with the command line that starts it again
(:func:`~arena.run.roster.inference_command`); ``actor.joined`` says when it is back, under its
own name, or (for an actor started without ``--actor-name``, whose name holds its pid) when
another serving the same policy took its place.

A learner started by hand (``start_learner: false``: the run's own, serving ``learner``, and
each named policy's with a model of its own, serving ``learner:<policy>``) is named the same
way, with the command that starts it again (:func:`~arena.run.join_commands.start_command`: it
resumes from the run's newest checkpoint), and when it is back, under any name: a learner
service has one learner.

A rollout actor started by hand (``rollout-<I>``, from the run's join commands) is named the
same way, with the command that starts it again under its index: before, one that left was
noticed only when an order to it failed, and the run collected with fewer actors unsaid.

An actor of the run's own (named in its launcher) gets no such line: it is restarted, and the
launcher says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena.bus import Actor, Message
from arena.run.bases import MAIN_SERVICE, learner_services
from arena.run.config import RunConfig
from arena.run.directory import ROLLOUT_SERVICE, rollout_index
from arena.run.hangs import HangWatch
from arena.run.inference_actors import MAIN_ACTOR, named_inference
from arena.run.join_commands import start_command
from arena.run.launcher import Launcher
from arena.run.roster import inference_command

LEFT_TOPIC = "actor.left"
JOINED_TOPIC = "actor.joined"


def policy_service(info: dict[str, Any]) -> str | None:
    """The ``policy:<name>`` an actor's directory entry serves (not its ``:status``), else None."""
    for service in info.get("services") or ():
        if service.startswith("policy:") and service.count(":") == 1:
            return str(service)
    return None


class Departures:
    """Names the inference actors, learners and rollout actors the run does not start when they
    leave and when back."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        address: str,
        launcher: Launcher,
        on_event: Callable[[str], None],
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.address = address
        self.launcher = launcher
        self.on_event = on_event
        self.gone: dict[str, str] = {}
        """Actors named gone and not back yet: name -> the service it served."""
        self._named = set(named_inference(config, run_dir))
        self._learners = set(learner_services(config.play))

    def attach(self, actor: Actor, hangs: HangWatch) -> None:
        """Listen to the broker's notices (call before the actor starts); the death notices
        come through ``hangs``, which listens to them for the run's own hung children."""
        actor.subscribe(LEFT_TOPIC, self._on(lambda info: self.left(info, "left the bus")))
        actor.subscribe(JOINED_TOPIC, self._on(self.joined))
        hangs.listeners.append(lambda info: self.left(info, "was declared dead by the broker"))

    @staticmethod
    def _on(handle: Callable[[dict[str, Any]], Any]) -> Callable[[Message], None]:
        def on(msg: Message) -> None:
            if isinstance(msg.body, dict):
                handle(msg.body)

        return on

    def _own(self, name: str) -> bool:
        return name in self.launcher.children or name in self.launcher.expected

    def _learner_service(self, info: dict[str, Any]) -> str | None:
        """The learner service of the run's that ``info`` offers, else None."""
        return next((s for s in info.get("services") or () if s in self._learners), None)

    def _service(self, info: dict[str, Any]) -> str | None:
        """What ``info`` serves that the run waits for: a policy, one of its learners, or
        rollout (an actor named ``rollout-<I>``)."""
        rollout = ROLLOUT_SERVICE in (info.get("services") or ())
        if rollout and rollout_index(str(info.get("name"))) is not None:
            return ROLLOUT_SERVICE
        return policy_service(info) or self._learner_service(info)

    def left(self, info: dict[str, Any], how: str) -> bool:
        """``info`` (its directory entry) is gone (``how``): named with the command that starts
        it again if it is an inference actor or learner the run uses and does not start. True
        if named."""
        name, service = str(info.get("name")), self._service(info)
        if service is None or self._own(name):
            return False
        if service in self._learners:
            policy = None if service == MAIN_SERVICE else service.partition(":")[2]
            command = start_command(self.config, self.run_dir, self.address, "learner", policy)
        elif service == ROLLOUT_SERVICE:
            index = rollout_index(name)
            command = start_command(self.config, self.run_dir, self.address, "rollout", index=index)
        else:
            command = inference_command(self.config, self.run_dir, self.address, name, service)
        if command is None:
            return False  # it served a policy this run does not play
        self.gone[name] = service
        where = f"pid {info.get('pid')} on {info.get('host')}"
        self.on_event(
            f"{name} (serving {service}, {where}) {how}; this run did not start it, so nothing "
            f"restarts it: start it again with: {command}"
        )
        return True

    def joined(self, info: dict[str, Any]) -> bool:
        """``info`` registered: named if it is back (or, started without ``--actor-name``,
        serves the policy of one that is gone in its place). True if named."""
        name, service = str(info.get("name")), self._service(info)
        if name in self.gone:
            served = self.gone.pop(name)
            self.on_event(f"{name} (serving {served}) is back on the bus")
            return True
        stand_in = next(
            (
                gone
                for gone, served in self.gone.items()
                if served == service
                and service != ROLLOUT_SERVICE  # a rollout actor is back only under its index
                and (service in self._learners or not self._named_actor(gone))
            ),
            None,
        )
        if stand_in is None:
            return False
        del self.gone[stand_in]
        self.on_event(f"{name} joined serving {service}, in place of {stand_in}")
        return True

    def _named_actor(self, name: str) -> bool:
        """Whether ``name`` is one of the run's actor names, which only it takes again."""
        return name in self._named or MAIN_ACTOR.fullmatch(name) is not None
