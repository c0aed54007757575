"""`python -m onyxia.cli` is the `onyxia` command."""

from onyxia.cli.main import main

__all__: list[str] = []  # run as a script, nothing to import

raise SystemExit(main())
