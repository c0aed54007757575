"""Signal processing: DFT, STFT, MelWeightMatrix and the cosine-sum windows.

An op belongs here when it computes a spectrum or the constants that spectral front ends multiply
by (windows, mel filter banks). The windows and the mel matrix depend only on scalars, so they fold
on the host (a window also runs on the GPU when its size comes at run time); DFT and STFT share one
kernel (`spectral.py`, `spectral.wgsl`) that sums each output bin directly.
"""

from onyxia.core import FamilyKey, Operator
from onyxia.operators.signal.dft import DFT, DftOp
from onyxia.operators.signal.mel import MEL, MelWeightMatrixOp
from onyxia.operators.signal.stft import STFT, StftOp
from onyxia.operators.signal.windows import WINDOWS, WindowOp

__all__ = ["DFT", "MEL", "SIGNAL", "STFT", "WINDOWS", "DftOp", "MelWeightMatrixOp", "StftOp", "WindowOp"]

SIGNAL: dict[FamilyKey, Operator] = {}
SIGNAL.update(DFT.items())
SIGNAL.update(STFT.items())
SIGNAL.update(MEL.items())
SIGNAL.update(WINDOWS.items())
