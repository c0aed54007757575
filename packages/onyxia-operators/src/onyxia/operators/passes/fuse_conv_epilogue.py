"""``FuseConvEpilogue``: what surrounds a conv folded into it, so the conv kernel does the work in one pass.

In rule order (`onyxia.operators.vision.conv_fusion.CONV_FUSIONS`): BatchNormalization and per-channel constant
Add/Sub/Mul/Div fold into the conv's weights (`conv_folds`); a ConvTranspose whose kernel equals its stride
becomes a pointwise Conv + DepthToSpace (`conv_upsample`); convs over a column or a depth-1 volume run on a 2-D
row view of the same bytes (`conv_axes`); an affine block before an unpadded conv folds into its weights and
paddle2onnx's spelled-out HardSwish is read as one (`conv_input_folds`); then the activation and a following
residual Add go into the kernel's epilogue (com.onyxia FusedConv). It must run before FuseElementwise, which would
otherwise take the activation (SiLU's Sigmoid and Mul) into an elementwise kernel of its own. The FusedConv op
it produces is `onyxia.operators.vision.conv.CONV_ONYXIA`, which the registry must know (com.onyxia domain).
"""

from __future__ import annotations

from onyxia.core.rewrite import RewritePass
from onyxia.operators.vision.conv_fusion import CONV_FUSIONS

__all__ = ["FuseConvEpilogue"]


class FuseConvEpilogue(RewritePass):
    """BatchNormalization and per-channel affine ops folded into a conv's weights, and its activation and a
    following residual Add into its epilogue (FusedConv), so the conv kernel does the work in one pass."""

    name = "FuseConvEpilogue"
    rules = CONV_FUSIONS
