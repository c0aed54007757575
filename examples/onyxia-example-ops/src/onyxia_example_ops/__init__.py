"""onyxia_example_ops — a third-party operator package, the template for writing your own.

It lives outside the ``onyxia`` namespace and depends on onyxia-core only. Its pyproject declares
``register`` under the ``onyxia.operators`` entry-point group; `OperatorRegistry.discover()`
(which `core_operator_registry()` runs) calls it, and models using ``com.example::ScaledTanh``
compile and run with no other change. ``@plugin_api("1.0")`` declares the onyxia-core plugin protocol
version ``register`` and ``ScaledTanh`` were written against; `discover()` refuses the package, naming
it and both versions, on a core whose protocol has another major version (docs/releasing.md).
"""

from onyxia.core import OperatorRegistry, plugin_api
from onyxia_example_ops._version import __version__ as __version__
from onyxia_example_ops.scaled_tanh import DOMAIN, ScaledTanh

__all__ = ["DOMAIN", "ScaledTanh", "register"]


@plugin_api("1.0")
def register(registry: OperatorRegistry) -> None:
    registry.register("ScaledTanh", ScaledTanh(), domain=DOMAIN)
