"""Exports Onyxia's real-model suite (torchvision, transformers/optimum, a torch TTS upsampler) with
seeded random weights and records onnxruntime's outputs beside each file (see README.md)."""

__all__: list[str] = []
