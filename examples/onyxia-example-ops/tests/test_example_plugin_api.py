"""The plugin API version an operator package declares, checked when the registry discovers it.

Matching: the installed ``example-ops`` entry point targets the protocol this onyxia-core provides and
loads without a warning. Mismatched: the same distribution re-marked for another major, and a second,
distribution-less entry point made here, are refused with a `PluginVersionError` that names the
package (or entry point) and both versions; nothing of theirs gets registered.
"""

from __future__ import annotations

import sys
import types
import warnings
from importlib.metadata import EntryPoint, entry_points

import pytest

import onyxia_example_ops
from onyxia.core import PLUGIN_API_VERSION, OperatorRegistry, PluginVersionError, plugin_api
from onyxia.core import registry as registry_module
from onyxia.core.plugin_api import PLUGIN_API_ATTRIBUTE, check_plugin_api
from onyxia_example_ops import DOMAIN

GROUP = "onyxia.operators"


def _example_entry_point() -> EntryPoint:
    (ep,) = [ep for ep in entry_points(group=GROUP) if ep.value == "onyxia_example_ops:register"]
    return ep


def _other_major() -> str:
    return f"{int(PLUGIN_API_VERSION.split('.')[0]) + 1}.0"


def test_installed_package_declares_a_matching_version() -> None:
    ep = _example_entry_point()
    assert ep.dist is not None and ep.dist.name == "onyxia-example-ops"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a declared, compatible version loads silently
        assert check_plugin_api(ep, ep.load()) == "1.0"
        registry = OperatorRegistry().discover()
    assert registry.get(DOMAIN, "ScaledTanh", 1) is not None
    assert "example-ops" in registry.plugins


def test_same_package_on_another_major_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _other_major()
    monkeypatch.setattr(onyxia_example_ops.register, PLUGIN_API_ATTRIBUTE, target)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [_example_entry_point()])
    registry = OperatorRegistry()
    message = (
        rf"operator package 'onyxia-example-ops' {onyxia_example_ops.__version__} .*example-ops.* "
        rf"targets plugin API {target}, but this onyxia-core provides plugin API {PLUGIN_API_VERSION}"
    )
    with pytest.raises(PluginVersionError, match=message):
        registry.discover()
    assert registry.get(DOMAIN, "ScaledTanh", 1) is None and registry.plugins == []


def test_distribution_less_entry_point_on_another_major_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second plugin beside the example, made here: a module in sys.modules and a bare EntryPoint."""
    calls: list[OperatorRegistry] = []
    module = types.ModuleType("onyxia_future_ops")

    @plugin_api(_other_major())
    def register(registry: OperatorRegistry) -> None:
        calls.append(registry)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    future = EntryPoint(name="future-ops", value="onyxia_future_ops:register", group=GROUP)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [_example_entry_point(), future])
    registry = OperatorRegistry()
    message = (
        rf"entry point 'future-ops' = onyxia_future_ops:register\) targets plugin API {_other_major()}, "
        rf"but this onyxia-core provides plugin API {PLUGIN_API_VERSION}"
    )
    with pytest.raises(PluginVersionError, match=message):
        registry.discover()
    assert calls == [] and registry.plugins == ["example-ops"]  # the matching one loaded first, the other never ran
