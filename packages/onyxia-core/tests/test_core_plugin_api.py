"""The plugin API version rule (onyxia.core.plugin_api) and its check in `OperatorRegistry.discover`.

The example operator package's tests cover a real installed distribution; here entry points are
stand-ins with and without a distribution, so every branch of the rule is exercised."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest

from onyxia.core import (
    PLUGIN_API_VERSION,
    OperatorRegistry,
    PluginApiWarning,
    PluginVersionError,
    is_compatible,
    plugin_api,
)
from onyxia.core import registry as registry_module
from onyxia.core.plugin_api import PLUGIN_API_ATTRIBUTE, check_plugin_api


@pytest.mark.parametrize(
    ("target", "provided", "compatible"),
    [
        ("1.0", "1.0", True),
        ("1.0", "1.3", True),  # a newer minor keeps everything a 1.0 plugin uses
        ("1.3", "1.0", False),  # the plugin may use what 1.3 added
        ("2.0", "1.9", False),
        ("1.9", "2.0", False),
        ("10.2", "10.11", True),  # numbers, not strings
    ],
)
def test_same_major_and_no_newer_minor(target: str, provided: str, compatible: bool) -> None:
    assert is_compatible(target, provided) is compatible


def test_declaration_marks_the_object() -> None:
    @plugin_api("1.0")
    def register(registry: OperatorRegistry) -> None: ...

    assert getattr(register, PLUGIN_API_ATTRIBUTE) == "1.0"
    with pytest.raises(PluginVersionError, match=r"plugin_api\('one'\).*\"major.minor\""):
        plugin_api("one")


def _recorder(calls: list[OperatorRegistry]) -> Callable[[OperatorRegistry], None]:
    """A fresh `register` function (attributes can be set on it, unlike on ``calls.append``)."""

    def register(registry: OperatorRegistry) -> None:
        calls.append(registry)

    return register


def _entry_point(name: str, target: object, dist: tuple[str, str] | None = None) -> SimpleNamespace:
    distribution = SimpleNamespace(name=dist[0], version=dist[1]) if dist else None
    return SimpleNamespace(name=name, value=f"{name}_module:register", load=lambda: target, dist=distribution)


def test_mismatch_names_the_package_and_both_versions() -> None:
    register = plugin_api("7.1")(lambda registry: None)
    ep = _entry_point("future", register, ("onyxia-future-ops", "3.2.0"))
    with pytest.raises(PluginVersionError) as caught:
        check_plugin_api(ep, register, provided="1.4")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "operator package 'onyxia-future-ops' 3.2.0" in message and "entry point 'future'" in message
    assert "targets plugin API 7.1, but this onyxia-core provides plugin API 1.4" in message


def test_a_malformed_declaration_is_an_error() -> None:
    def register(registry: OperatorRegistry) -> None: ...

    setattr(register, PLUGIN_API_ATTRIBUTE, 1.0)  # a float, not "1.0"
    with pytest.raises(PluginVersionError, match=r"declares plugin API version 1.0; expected \"major.minor\""):
        check_plugin_api(_entry_point("sloppy", register), register)  # type: ignore[arg-type]


def test_undeclared_plugin_loads_with_a_warning_as_1_0(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[OperatorRegistry] = []
    register = _recorder(calls)
    ep = _entry_point("legacy", register, ("onyxia-legacy-ops", "0.3.0"))
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [ep])
    with pytest.warns(PluginApiWarning, match=r"'onyxia-legacy-ops' 0.3.0.*declares no plugin API version"):
        registry = OperatorRegistry().discover()
    assert calls == [registry] and registry.plugins == ["legacy"]
    # ... and a core on another major refuses it: undeclared means written for 1.0
    with pytest.warns(PluginApiWarning), pytest.raises(PluginVersionError, match="targets plugin API 1.0"):
        check_plugin_api(ep, register, provided="2.0")  # type: ignore[arg-type]


def test_discover_refuses_a_mismatch_before_registering(monkeypatch: pytest.MonkeyPatch) -> None:
    major = int(PLUGIN_API_VERSION.split(".")[0])
    calls: list[OperatorRegistry] = []
    good = _entry_point("good", plugin_api(PLUGIN_API_VERSION)(_recorder(calls)), ("onyxia-good-ops", "1.0.0"))
    bad = _entry_point("bad", plugin_api(f"{major + 1}.0")(_recorder(calls)), ("onyxia-bad-ops", "9.0.0"))
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [good, bad])
    registry = OperatorRegistry()
    with pytest.raises(PluginVersionError, match=rf"'onyxia-bad-ops' 9.0.0 .*plugin API {major + 1}.0"):
        registry.discover()
    assert calls == [registry] and registry.plugins == ["good"]  # the bad one's register never ran
