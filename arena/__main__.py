"""``python -m arena`` is the ``arena`` command (for ``torchrun -m arena learner ...``)."""

from arena.cli import main

raise SystemExit(main())
