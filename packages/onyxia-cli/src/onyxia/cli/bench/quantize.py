"""Symmetric 4-bit block quantization in MatMulNBits' layout, byte-identical to onnxruntime's quantizer.

onnxruntime's `MatMulNBitsQuantizer` (`is_symmetric=True`) calls MLAS `MlasQuantizeBlockwise`, which per
block of `block_size` values along K of column n takes the value of largest magnitude `m` (sign kept),
sets `scale = m / -8`, and stores `clamp(roundf(w * (1 / scale) + 8), 0, 15)` (float32 arithmetic, halves
rounded away from zero) two per byte, low nibble first. Doing the same in numpy lets the synthesizer
stream a 270m model without loading it whole into the quantizer and without importing onnxruntime;
`test_bench_synth.py` checks the bytes against the quantizer's own output.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dequantize_q4_symmetric", "quantize_q4_symmetric"]

_ZERO_POINT = np.float32(8.0)  # implicit in symmetric MatMulNBits (no zero_points input)


def quantize_q4_symmetric(weight: np.ndarray, block_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """`weight` float32 [K, N] -> (packed uint8 [N, K/block, block/2], scales float32 [N, K/block])."""
    if weight.ndim != 2 or block_size % 2 or weight.shape[0] % block_size:
        # MLAS leaves a partial last block's padding bytes in a layout this module does not reproduce
        raise ValueError(f"expected a 2-D weight with K a multiple of {block_size}, got shape {weight.shape}")
    k, n = weight.shape
    blocks = k // block_size
    columns = np.ascontiguousarray(weight.T, dtype=np.float32).reshape(n, blocks, block_size)
    largest, smallest = columns.max(axis=2), columns.min(axis=2)
    peak = np.where(np.abs(largest) > np.abs(smallest), largest, smallest)
    scales = (peak / np.float32(-8.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        reciprocal = np.where(scales != 0, np.float32(1.0) / scales, np.float32(0.0)).astype(np.float32)
    shifted = (columns * reciprocal[..., None]).astype(np.float32) + _ZERO_POINT
    floor = np.floor(shifted)
    rounded = floor + (shifted - floor >= np.float32(0.5))  # roundf: halves away from zero (all >= 0 here)
    nibbles = np.clip(rounded, 0, 15).astype(np.uint8)
    packed = nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)
    return packed, scales


def dequantize_q4_symmetric(packed: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 [K, N] weight MatMulNBits multiplies by: (nibble - 8) * scale[n, k / block]."""
    n, blocks, half = packed.shape
    nibbles = np.empty((n, blocks, half * 2), dtype=np.float32)
    nibbles[..., 0::2] = packed & 0x0F
    nibbles[..., 1::2] = packed >> 4
    values = (nibbles - _ZERO_POINT) * scales[..., None]
    return np.ascontiguousarray(values.reshape(n, -1).T)
