"""``onyxia compare``'s parts: the inputs (`feeds`), onnxruntime's side (`reference`), Onyxia's side
(`capture`), one tensor against another (`tensors`) and the verdict (`report`). The command is
`onyxia.cli.commands.compare`, whose docstring states how the two graphs' tensors are matched."""

__all__: list[str] = []  # the modules are imported by name (onyxia.cli.compare.report, ...); nothing here
