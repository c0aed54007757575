"""`python -m onyxia.cli` is the `onyxia` command."""

from onyxia.cli.main import main

raise SystemExit(main())
