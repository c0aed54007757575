"""com.microsoft MatMulNBits: A [..., K] times 4-bit block-quantized weights B [N, n_blocks, block_size / 2].

What onnxruntime's quantizer and the onnxruntime-genai builder emit for every linear layer of an
int4 LLM. Weights stay packed on the GPU (see `packing`) and are dequantised in the shader,
``W[n, k] = (nibble - zero_point) * scale[n, k / block_size]``, with the zero point 8 when the
input is absent, two 4-bit zero points per byte, or floats of the scales' dtype.

Numerics: products and sums are f32 whatever the activation dtype, which is onnxruntime's
``accuracy_level`` 0. Levels 1-4 let onnxruntime's CPU kernel quantize the activations to int8
(the Gemma fixtures use 4), so their outputs differ from level 0 and from this op by quantization
noise; the attribute is accepted and ignored.

Two kernels share one shader: a GEMV for decode (M <= GEMV_MAX_M rows, one workgroup per COLS
columns, threads splitting K) and a 32 x 32 tiled kernel for prefill. With a symbolic M both are
planned and each dispatches zero workgroups when M is on the other's side of the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import DataType, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, SymbolicDim, TensorType, shape_of
from onyxia.core.load import load_wgsl  # noqa: F401  (placeholder, replaced below)
