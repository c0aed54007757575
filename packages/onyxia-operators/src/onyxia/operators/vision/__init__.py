"""Vision operators: Conv, ConvTranspose and the pools over 1 to 3 spatial axes, and Resize on NCHW images.

Part of onyxia.operators (IR -> plan). Imports onyxia.core and the shared operator helpers only (no
onnx, wgpu or onyxia.runtime). The window arithmetic all of them share lives in `geometry`.
"""

from onyxia.core import FamilyKey, Operator, merge_families
from onyxia.operators.vision.conv import CONV, ConvOp
from onyxia.operators.vision.pool import POOL, PoolOp
from onyxia.operators.vision.resize import RESIZE, ResizeOp

__all__ = ["CONV", "POOL", "RESIZE", "VISION", "ConvOp", "PoolOp", "ResizeOp"]

VISION: dict[FamilyKey, Operator] = merge_families(CONV, POOL, RESIZE)
