"""One module per ``arena`` subcommand (see :mod:`arena.cli`)."""
