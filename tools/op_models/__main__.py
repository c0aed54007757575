"""``python -m op_models`` (from tools/): see generate.py."""

from .generate import main

__all__: list[str] = []

raise SystemExit(main())
