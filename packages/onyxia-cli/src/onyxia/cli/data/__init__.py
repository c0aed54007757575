"""Package data of the CLI: the built-in demo model and its default inputs.

`make_demo_model.py` writes both files; they are committed so `onyxia run` works offline.
"""

__all__: list[str] = []
