"""``arena train``: one training run, from its config to its processes and their coordination.

- :mod:`arena.run.config`: the run config (every section, one docstring per field), and
  :mod:`arena.run.config_checks`: its checks that read several sections at once.
- :mod:`arena.run.run_dir`: the run directory and the settings that depend on it;
  :mod:`arena.run.addresses`: where the run's broker is; :mod:`arena.run.resources`: threads
  and devices; :mod:`arena.run.validation`: the checks before anything starts;
  :mod:`arena.run.plan`: what ``--dry-run`` prints.
- :mod:`arena.run.processes`: which ``arena`` subcommands a run starts, with which flags.
- :mod:`arena.run.launcher`: starts, watches, restarts and stops those child processes.
- :mod:`arena.run.coordinator`: the step loop (sync or async) over the bus.
- :mod:`arena.run.directory`: who is on the bus (the broker's directory), and
  :mod:`arena.run.roster`: the actors a run waits for, and the commands that start the missing
  ones (actors started elsewhere join a run through an external broker).
- :mod:`arena.run.collection` (sync collects and leased jobs), :mod:`arena.run.stream` (async
  collection, paced by the staleness bound), :mod:`arena.run.weight_sync`,
  :mod:`arena.run.population`, :mod:`arena.run.evaluation`: the concerns the coordinator calls,
  one module each.
- :mod:`arena.run.run_log`: metrics, events, transcripts and the console.
"""
