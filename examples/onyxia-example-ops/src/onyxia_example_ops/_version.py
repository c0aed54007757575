"""onyxia-example-ops' version: the one place it is written (pyproject's `[tool.hatch.version]` reads it)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
