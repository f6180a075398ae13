"""``arena deploy``: a run's processes as a Slurm job or as Kubernetes objects.

A run is a set of ``arena`` subcommands talking over one bus; ``arena train`` starts them as
local children, and a cluster starts the very same command lines
(:func:`arena.run.processes.actor_commands`) on other machines, with a ``tcp://`` broker
address, keys, and each process's own advertised host (an inference actor reads what it
serves from the run's ``config.yaml``, :func:`arena.run.processes.inference_argv`, wherever it
runs). This package only renders:

- :mod:`arena.deploy.spec`: the processes and their resources, as plain data;
- :mod:`arena.deploy.slurm`: an ``sbatch`` script (one heterogeneous job, a step per process);
- :mod:`arena.deploy.k8s`: manifests (Secret, ConfigMap, broker StatefulSet and Service,
  inference Deployments, learner and coordinator Jobs, rollout StatefulSet), written by
  :mod:`arena.deploy.files`.

:mod:`arena.commands.deploy` reads the config and fills the spec. ``docs/deploy.md`` says how
to use what comes out.
"""

from arena.deploy.spec import KINDS, Deployment, Process, Resources, kind_of

__all__ = ["KINDS", "Deployment", "Process", "Resources", "kind_of"]
