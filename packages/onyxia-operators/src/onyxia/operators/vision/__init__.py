"""Vision operators: Conv, ConvTranspose and the pools over 1 to 3 spatial axes, and Resize on NCHW images;
com.onyxia FusedConv (a Conv with its activation and residual add in the epilogue).

Part of onyxia.operators (IR -> plan). Imports onyxia.core and the shared operator helpers only (no
onnx, wgpu or onyxia.runtime). The window arithmetic all of them share lives in `geometry`.
"""

from onyxia.core import FamilyKey, Operator, merge_families
from onyxia.operators.vision.conv import CONV, CONV_ONYXIA, ConvOp
from onyxia.operators.vision.pool import POOL, PoolOp
from onyxia.operators.vision.resize import RESIZE, ResizeOp

__all__ = ["CONV", "CONV_ONYXIA", "POOL", "RESIZE", "VISION", "VISION_ONYXIA", "ConvOp", "PoolOp", "ResizeOp"]

VISION: dict[FamilyKey, Operator] = merge_families(CONV, POOL, RESIZE)
VISION_ONYXIA: dict[str, ConvOp] = dict(CONV_ONYXIA)  # com.onyxia FusedConv (`FuseConvEpilogue`)
