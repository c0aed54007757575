"""``FuseConvEpilogue``: a Conv's activation and residual Add folded into its kernel (com.onyxia FusedConv).

The rules are `onyxia.operators.vision.conv_fusion`'s. It must run before FuseElementwise, which would
otherwise take the activation (SiLU's Sigmoid and Mul) into an elementwise kernel of its own. The FusedConv op
it produces is `onyxia.operators.vision.conv.CONV_ONYXIA`, which the registry must know (com.onyxia domain).
"""

from __future__ import annotations

from onyxia.core.rewrite import RewritePass
from onyxia.operators.vision.conv_fusion import CONV_FUSIONS

__all__ = ["FuseConvEpilogue"]


class FuseConvEpilogue(RewritePass):
    name = "FuseConvEpilogue"
    rules = CONV_FUSIONS
