"""onyxia_example_ops — a third-party operator package, the template for writing your own.

It lives outside the ``onyxia`` namespace and depends on onyxia-core only. Its pyproject declares
``register`` under the ``onyxia.operators`` entry-point group; `OperatorRegistry.discover()`
(which `core_operator_registry()` runs) calls it, and models using ``com.example::ScaledTanh``
compile and run with no other change.
"""

from onyxia.core import OperatorRegistry
from onyxia_example_ops.scaled_tanh import DOMAIN, ScaledTanh

__all__ = ["DOMAIN", "ScaledTanh", "register"]


def register(registry: OperatorRegistry) -> None:
    registry.register("ScaledTanh", ScaledTanh(), domain=DOMAIN)
