"""Chaos run: faults of every kind, one at a time or together, in one training run; then what
it lost.

Starts ``arena train configs/smoke.yaml`` (the tiny model, async, ``--rollouts`` rollout
actors, no evaluation; ``--config``, ``--mode`` and ``--set KEY=VALUE`` overrides run another
shape: a population run, a LoRA run, a role game) and, for ``--minutes``, injects a fault every
``--every`` seconds, the kinds in a seeded order (each kind once before any repeats, so a run of
a few faults covers every kind):

- ``kill_rollout``, ``kill_inference``, ``kill_learner``, ``kill_broker``: SIGKILL of that child
  (a random rollout actor); detected when the launcher logs its exit in ``events.log``;
- ``stop_actor``: SIGSTOP of a random rollout actor, the inference actor or the learner for
  30-60 s (seeded; ``--stop-seconds``), then SIGCONT; detected when the run names it hung (:mod:`arena.run.hangs`);
  its detection times give ``hang_detect_s_max``;
- ``stop_broker``: SIGSTOP of the run's own broker for as long, then SIGCONT; detected when the
  run names it hung and kills it to restart it (its time counts in ``hang_detect_s_max`` too);
- ``disk_full``, last: the run directory is on a tmpfs of ``--disk-mb`` mounted for the run,
  and the fault fills it and keeps it full. No run recovers from that: it must end with a clear
  message naming the disk and a non-zero exit status (``disk_full_end``), its last checkpoint
  intact, which the resume below (the disk freed) starts from; the resume's end is this fault's
  recovery. Where the host cannot mount a tmpfs it is skipped and the JSON says why.

With ``--overlap`` the faults are combinations instead, injected at one instant or at a moment
of the run's own recovery (:mod:`chaos_overlap`: the learner killed while the broker is stopped,
the inference actor killed while a rollout actor is stopped, the learner killed mid-save and
killed again the moment its replacement resumed, three deaths at once, every rollout actor at
once), each detected when all its parts are; ``disk_full`` still comes last, and the ``resume=``
run is killed the moment its learner resumed and resumed again (``kill_resume``). A stopped
child must stay stopped past the run's ``bus.heartbeat_timeout`` to be a hang: pass
``--set bus.heartbeat_timeout=5`` to a config whose timeout (10 s by default) the 8-12 s stops
of the test would not pass.

A policy request that never returns is what ``stop_actor`` of the inference actor does to every
request in flight; a simulator that never returns has no injection point outside the game's
code and is not injected (``skipped`` says so).

Each fault waits for the previous one to recover (a step logged after its detection). The run
is then stopped with SIGKILL (its children follow it), resumed with ``resume=`` for two more
steps, and checked from its own records:

- every step 1..N is in ``metrics.jsonl``, taken by the learner or recovered from its
  checkpoint (``steps_missing``), and the resume completed (``resume_ok``);
- ``episodes_trained_twice``: episode ids in more than one step's batch, over the steps that
  stand (the learner logs each step's ids, ``trainers/inbox.py``; a step a restarted learner
  rolled back is replaced by its redo), for each learner (a named policy's own too);
- ``episodes_lost``: episodes collects reported that never reached the learner (the
  coordinator's ``received X of Y reported episodes`` events); ``episodes_failed`` (episodes
  that failed in play and were counted, not trained) is reported beside it.

Prints one JSON line: faults injected by kind, recoveries, detection and recovery times (each,
and the median per kind), ``episodes_lost``, ``episodes_trained_twice``, ``hang_detect_s_max``.

Usage: nice python bench/chaos.py --minutes 10 --every 90 --seed 1 [--out DIR] [--rollouts 3]
       [--faults N] (at most N faults: ``--faults 7 --every 1`` is one of each kind, back to
       back, each after the previous one recovered: ``tests/bench/test_chaos.py``)
       [--overlap] [--config PATH] [--mode async|sync] [--set KEY=VALUE ...]
       (``--overlap --faults 8 --every 1``: each combination once, then the disk)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from chaos_overlap import OVERLAPS, inject_overlap, kill, resumes, stop

from arena.run.preload import PRELOAD_ENV

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
KINDS = (
    "kill_rollout",
    "kill_inference",
    "kill_learner",
    "kill_broker",
    "stop_actor",
    "stop_broker",
)
"""Faults the run recovers from, in a seeded order; ``disk_full`` comes last (see below)."""
SKIPPED = {"simulator_never_returns": "no injection point outside the game's own code"}
RECOVERY_LIMIT = 240.0
"""Seconds a fault may take to recover before the bench counts it unrecovered and goes on."""


def train_args(run_dir: Path, args: argparse.Namespace) -> list[str]:
    """``arena train`` of ``--config`` (smoke.yaml) in ``--mode`` with ``--rollouts`` rollout
    actors, endless, no evaluation, restarts unbounded, ``--set`` overrides on top."""
    rollouts = args.rollouts
    return [
        "train", args.config, f"run_dir={run_dir}", f"mode={args.mode}", "steps=100000",
        f"rollout.actors={rollouts}", "learner.batch.batch_samples=1",
        "eval.games=0", "eval.exploitability=false",
        "rollout.max_restarts=1000", "learner_max_restarts=1000",
        "inference_max_restarts=1000", "bus.max_restarts=1000", *args.set,
    ]  # fmt: skip


def on_the_bus(run_dir: Path, kids: dict[str, int], wait: float = 120.0) -> list[str]:
    """The children but the broker that are registered with the run's broker under their own
    pid (``arena status --json``), once at least one is; all of them when none is in time."""
    from arena.run.addresses import local_address

    deadline = time.time() + wait
    while True:
        status = subprocess.run(
            [sys.executable, "-m", "arena", "status", local_address(run_dir), "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        with contextlib.suppress(ValueError):
            registered = {(a["name"], a["pid"]) for a in json.loads(status.stdout or "[]")}
            names = sorted(n for n, pid in kids.items() if n != "broker" and (n, pid) in registered)
            if len(names) == len([n for n in kids if n != "broker"]) or (
                names and time.time() > deadline
            ):
                return names
        if time.time() > deadline:
            return sorted(n for n in kids if n != "broker")
        time.sleep(1.0)


RUN_ENV = {name: value for name, value in os.environ.items() if name != PRELOAD_ENV}
"""The runs' environment: their learners, inference and rollout actors forked by the run's own
preload server, under its launcher, where :func:`children` finds them (a shared server's are
not)."""


def children(parent: int) -> dict[str, int]:
    """The run's children by name (``broker``, ``inference-0``, ``learner``, ``rollout-<i>``):
    those of the launcher ``parent``, and those its preload server forked (the learners and the
    inference actors, arena/run/preload.py), whose command line is one title string."""
    processes = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode().replace("\0", " ").split()
        except OSError:
            continue
        processes[int(entry)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    servers = {pid for pid, (ppid, cmd) in processes.items() if ppid == parent and "preload" in cmd}
    found = {}
    for pid, (ppid, cmd) in processes.items():
        if (ppid != parent and ppid not in servers) or "arena" not in cmd or pid in servers:
            continue
        args = cmd[cmd.index("arena") + 1 :]
        if "broker" in args[:2]:
            found["broker"] = pid
        elif "learner" in args[:2]:  # a named policy's own learner: ``--name learner-<policy>``
            name = args[args.index("--name") + 1] if "--name" in args else "learner"
            found[name] = pid
        elif "--actor-name" in args:
            found[args[args.index("--actor-name") + 1]] = pid
        elif "--index" in args:
            found[f"rollout-{args[args.index('--index') + 1]}"] = pid
    return found


def rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def events(run_dir: Path) -> str:
    path = run_dir / "events.log"
    return path.read_text(errors="replace") if path.exists() else ""


class Chaos:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = out
        self.mount: Path | None = None
        self.skipped = dict(SKIPPED)
        self.records: list[dict[str, Any]] = []

    # -- setup ---------------------------------------------------------------------------
    def prepare(self) -> Path:
        mount = self.out / "disk"
        mount.mkdir(parents=True, exist_ok=True)
        size = f"size={self.args.disk_mb}m"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mount)],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            self.mount = mount
        else:
            self.skipped["disk_full"] = (
                f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
            )
        return mount / "run"

    def kinds(self) -> list[str]:
        if self.args.overlap:  # each once, in their order, before any repeats
            return list(OVERLAPS) * 100
        kinds = list(KINDS)
        order: list[str] = []
        while len(order) < 1000:
            batch = list(kinds)
            self.rng.shuffle(batch)
            order += batch
        return order

    # -- faults --------------------------------------------------------------------------
    def inject(self, kind: str, proc: subprocess.Popen, run_dir: Path) -> dict[str, Any]:
        """Inject ``kind`` (one of :data:`KINDS`, or with ``--overlap`` one of
        :data:`chaos_overlap.OVERLAPS`); its record names the ``markers`` that ``events.log``
        must show for it to count as detected and the ``stops`` (pid, until) to release."""
        if self.args.overlap:
            return inject_overlap(
                kind,
                lambda: children(proc.pid),
                lambda: on_the_bus(run_dir, children(proc.pid)),
                run_dir,
                self.rng,
                self.args.stop_seconds,
            )
        kids = children(proc.pid)
        record: dict[str, Any] = {"kind": kind, "targets": [], "markers": [], "stops": []}
        if kind.startswith("kill_"):
            name = self.rng.choice(sorted(n for n in kids if n.startswith(kind[5:])))
            record["at"] = time.time()
            kill(name, kids[name], record)
            return record
        # stop_broker: the broker is on no bus, it is the bus; the run kills it once silent
        # (hangs.py). stop_actor: a hang is of an actor on the bus: one restarted by an earlier
        # fault and still starting up has no heartbeat to miss yet (and a stopped start-up is
        # named by the run's waits, not as a hang), so the target is drawn among those registered
        name = "broker" if kind == "stop_broker" else self.rng.choice(on_the_bus(run_dir, kids))
        record["at"] = time.time()
        stop(name, kids[name], record["at"] + self.rng.uniform(*self.args.stop_seconds), record)
        return record

    def fill_disk(self, proc: subprocess.Popen) -> None:
        """The last fault: the run directory's disk fills up and stays full. A run cannot
        recover from that; it must end with a clear message and a non-zero exit status, its last
        checkpoint intact (the resume that follows starts from it once the disk is freed)."""
        assert self.mount is not None
        record: dict[str, Any] = {"kind": "disk_full", "targets": ["disk"], "at": time.time()}
        print("chaos: disk_full disk", file=sys.stderr, flush=True)
        filler = self.mount / "filler"
        with open(filler, "wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * (1 << 20))
        try:
            proc.wait(timeout=RECOVERY_LIMIT)
            record["detected"] = time.time()  # the run ended
            out = (self.out / "train.out").read_text(errors="replace")
            record["exit_status"] = proc.returncode
            said = [x for x in out.splitlines() if "no space left" in x.lower() or " is full" in x]
            record["message"] = said[-1][-300:] if said else ""
        except subprocess.TimeoutExpired:
            record["exit_status"] = None  # still running with its disk full
        filler.unlink()
        self.records.append(record)

    def follow(self, record: dict[str, Any], proc: subprocess.Popen, run_dir: Path) -> None:
        """Wait for the fault's detection (every marker in ``events.log``) and its recovery (a
        step logged after the detection), releasing each stopped process at its time."""
        stops = list(record["stops"])
        last_row: dict[str, Any] | None = None
        while time.time() - record["at"] < RECOVERY_LIMIT and proc.poll() is None:
            now = time.time()
            for pid, until in [s for s in stops if now >= s[1]]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                stops.remove([pid, until])
            text = events(run_dir)
            if "detected" not in record and all(m in text for m in record["markers"]):
                record["detected"] = now
                last_row = (rows(run_dir) or [None])[-1]
            logged = (rows(run_dir) or [None])[-1]  # a step logged since detection
            if "detected" in record and "recovered" not in record and logged != last_row:
                record["recovered"] = time.time()
            if "recovered" in record and not stops:
                break
            time.sleep(0.25)
        for pid, _ in stops:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    # -- the run -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        run_dir = self.prepare()
        with open(self.out / "train.out", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "arena", *train_args(run_dir, self.args)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=RUN_ENV,
            )
        started = time.time()
        try:
            while len(rows(run_dir)) < 2:  # the run is up and stepping
                if proc.poll() is not None or time.time() - started > 300:
                    raise SystemExit(f"the run did not start: see {self.out / 'train.out'}")
                time.sleep(0.5)
            t0 = time.time()
            end = t0 + self.args.minutes * 60
            recoverable = self.args.faults - (self.mount is not None)
            for i, kind in enumerate(self.kinds()):
                at = t0 + (i + 1) * self.args.every
                if at >= end or proc.poll() is not None or i == recoverable:
                    break
                while time.time() < at:
                    time.sleep(0.5)
                record = self.inject(kind, proc, run_dir)
                print(f"chaos: {kind} {record['targets']}", file=sys.stderr, flush=True)
                self.follow(record, proc, run_dir)
                self.records.append(record)
            alive = proc.poll() is None
            if alive and self.mount is not None:
                self.fill_disk(proc)
            proc.send_signal(signal.SIGKILL)  # the children follow the launcher
            proc.wait()
        finally:
            proc.kill()
        time.sleep(3)
        last = max((r["step"] for r in rows(run_dir)), default=0)
        if self.args.overlap:
            self.kill_resume(run_dir, last + 2)
        resumed = self.resume(run_dir, last + 2)
        for record in self.records:  # a full disk, a killed resume: the recovery is the resume
            if record["kind"] in ("disk_full", "kill_resume") and resumed.returncode == 0:
                record["recovered"] = time.time()
        result = self.report(run_dir, alive, resumed.returncode == 0, last + 2)
        self.keep_records(run_dir)
        return result

    def resume(self, run_dir: Path, steps: int) -> subprocess.CompletedProcess:
        resumed = subprocess.run(
            [sys.executable, "-m", "arena", "train", self.args.config, f"resume={run_dir}",
             f"steps={steps}"],
            capture_output=True, text=True, cwd=ROOT, timeout=600, env=RUN_ENV,
        )  # fmt: skip
        with open(self.out / "resume.out", "a") as f:
            f.write(resumed.stdout + resumed.stderr)
        return resumed

    def kill_resume(self, run_dir: Path, steps: int) -> None:
        """The overlap mode's last fault: the ``resume=`` run killed (SIGKILL of its launcher,
        its children follow) the moment its learner has resumed, then resumed again."""
        before = resumes(run_dir)
        with open(self.out / "resume.out", "a") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "arena", "train", self.args.config, f"resume={run_dir}",
                 f"steps={steps}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=RUN_ENV,
            )  # fmt: skip
        deadline = time.time() + RECOVERY_LIMIT
        while proc.poll() is None and time.time() < deadline and resumes(run_dir) == before:
            time.sleep(0.01)
        record: dict[str, Any] = {"kind": "kill_resume", "targets": ["resume"], "at": time.time()}
        record["mid_run"] = proc.poll() is None  # else it ended (or failed) before its learner
        proc.kill()
        proc.wait()
        print("chaos: kill_resume", file=sys.stderr, flush=True)
        self.records.append(record)
        time.sleep(3)

    def keep_records(self, run_dir: Path) -> None:
        """The records outlive the tmpfs: copied next to the JSON."""
        target = self.out / "records"
        for name in ("metrics.jsonl", "events.log"):
            if (run_dir / name).exists():
                target.mkdir(exist_ok=True)
                shutil.copy(run_dir / name, target / name)
        if (run_dir / "logs").is_dir():
            shutil.copytree(run_dir / "logs", target / "logs", dirs_exist_ok=True)
        if self.mount is not None:
            subprocess.run(["umount", "-l", str(self.mount)], check=False)

    # -- the records -----------------------------------------------------------------------
    def report(self, run_dir: Path, alive: bool, resume_ok: bool, steps: int) -> dict[str, Any]:
        table = rows(run_dir)
        # a step the learner took (with a loss, or none where no turn had any signal: a role
        # game on the untrained tiny model), or one its checkpoint holds
        logged = {
            r["step"]
            for r in table
            if "learner/loss" in r or "learner/step" in r or r.get("recovered")
        }
        detect: dict[str, list[float]] = defaultdict(list)
        recover: dict[str, list[float]] = defaultdict(list)
        for r in self.records:
            if "detected" in r:
                detect[r["kind"]].append(round(r["detected"] - r["at"], 1))
            if "recovered" in r:
                recover[r["kind"]].append(round(r["recovered"] - r["at"], 1))
        text = events(run_dir)
        lost = sum(
            int(y) - int(x)
            for x, y in re.findall(r"the learner received (\d+) of (\d+) reported episodes", text)
        )
        hangs = [
            r["detected"] - r["at"]
            for r in self.records
            if any(t.startswith("stop:") for t in r.get("targets", [])) and "detected" in r
        ]
        return {
            "minutes": self.args.minutes,
            "every_s": self.args.every,
            "seed": self.args.seed,
            "faults": dict(Counter(r["kind"] for r in self.records)),
            "overlap": self.args.overlap,
            "config": Path(self.args.config).name,
            "mode": self.args.mode,
            "set": self.args.set,
            "targets": [f"{r['kind']}:{','.join(r['targets'])}" for r in self.records],
            "mid_save": [r["mid_save"] for r in self.records if "mid_save" in r],
            "resume_killed_mid_run": [r["mid_run"] for r in self.records if "mid_run" in r],
            "recovered": dict(Counter(r["kind"] for r in self.records if "recovered" in r)),
            "skipped": self.skipped,
            "detect_s": dict(detect),
            "recover_s": dict(recover),
            "detect_s_median": {k: statistics.median(v) for k, v in detect.items()},
            "recover_s_median": {k: statistics.median(v) for k, v in recover.items()},
            "hang_detect_s_max": round(max(hangs), 1) if hangs else None,
            "disk_full_end": [
                {"exit_status": r.get("exit_status"), "message": r.get("message")}
                for r in self.records
                if r["kind"] == "disk_full"
            ],
            "steps": steps,
            "steps_missing": sorted(set(range(1, steps + 1)) - logged),
            "run_alive_at_end": alive,
            "resume_ok": resume_ok,
            "episodes_trained_twice": sum(
                trained_twice(log) for log in sorted((run_dir / "logs").glob("learner*.log"))
            ),
            "episodes_lost": lost,
            "episodes_failed": int(sum(r.get("episodes_failed", 0) for r in table)),
            "re_leased": max((r.get("leases/re_leased", 0) for r in table), default=0),
            "episodes_failed_max_step": max(
                (r.get("episodes_failed", 0) for r in table), default=0
            ),
        }


def trained_twice(learner_log: Path) -> int:
    """Episode ids in more than one standing step's batch, from the learner's log: each step's
    ``took N episodes: IDS`` line, its ``step N:`` line, and ``resumed from ... at step K``
    (a restarted learner: the steps past K were rolled back and are redone)."""
    standing: dict[int, list[str]] = {}
    took: list[str] | None = None
    for line in learner_log.read_text(errors="replace").splitlines():
        if (m := re.search(r"took \d+ episodes: (.*)$", line)) is not None:
            took = m.group(1).split()
        elif (m := re.search(r"arena.learner: step (\d+): ", line)) is not None:
            if took is not None:
                standing[int(m.group(1))] = took
            took = None
        elif (m := re.search(r"resumed from .* at step (\d+)", line)) is not None:
            for step in [s for s in standing if s > int(m.group(1))]:
                del standing[step]
            took = None
    counts = Counter(i for ids in standing.values() for i in ids)
    return sum(1 for n in counts.values() if n > 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=90.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rollouts", type=int, default=3)
    parser.add_argument(
        "--faults", type=int, default=-1, help="stop after this many faults (-1: no limit)"
    )
    parser.add_argument("--disk-mb", type=int, default=512)
    parser.add_argument("--config", default=SMOKE, help="the run's config (default smoke.yaml)")
    parser.add_argument("--mode", default="async", choices=("async", "sync"))
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config override"
    )
    parser.add_argument(
        "--overlap", action="store_true", help="faults together (bench/chaos_overlap.py)"
    )
    parser.add_argument(
        "--stop-seconds",
        type=float,
        nargs=2,
        default=(30.0, 60.0),
        metavar=("LO", "HI"),
        help="a stopped actor stays stopped a seeded time in [LO, HI] seconds (default 30 60)",
    )
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="arena-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(Chaos(args, out).run()), flush=True)


if __name__ == "__main__":
    main()
