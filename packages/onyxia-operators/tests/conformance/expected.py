"""Selected ONNX node cases that are known not to pass, each with its root cause.

A case listed here must fail or be rejected (`test_conformance` fails a listed case that passes, so
the list stays honest). Cases whose inputs or outputs have no WebGPU storage type (float64,
bfloat16, string, sequences ...) are never listed: the harness rejects those by dtype on its own.
"""

__all__ = ["EXPECTED"]

EXPECTED: dict[str, str] = {}
