"""onyxia-cli's version: the one place it is written (pyproject's `[tool.hatch.version]` reads it into the wheel's
metadata, so `pip show`, `importlib.metadata` and `onyxia.cli.__version__` agree, from a wheel or a source tree).

Bump it in the commit that moves CHANGELOG.md's "Unreleased" section under the new version (docs/releasing.md)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
