"""Builds Onyxia's op-model suite with the real tools (torch exporters, onnxruntime's quantizers and
transformer optimizer), seeded random weights, and records onnxruntime's outputs (see README.md)."""

__all__: list[str] = []
