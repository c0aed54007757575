"""The version of the protocol between onyxia-core and operator packages, and the check made at discovery.

An operator package (an ``onyxia.operators`` entry point) is written against onyxia-core's plugin
protocol: the `Operator` methods and ctx objects (`InferenceCtx`, `FoldCtx`, `PlanCtx`, `PlanBuilder`),
the `Pass` protocol and `Stage`, and `OperatorRegistry`'s registration methods. That protocol has its
own version, `PLUGIN_API_VERSION` ("major.minor"), moved apart from onyxia-core's release version:
a new optional method or ctx helper is a minor step; removing or changing anything a plugin calls or
implements is a major one (docs/releasing.md).

A plugin declares the version it was written for on the object its entry point names::

    @plugin_api("1.0")  # a literal: the version you wrote against, never PLUGIN_API_VERSION itself
    def register(registry: OperatorRegistry) -> None: ...

Compatibility rule: a plugin targeting ``M.m`` loads on a core providing ``M'.m'`` when ``M == M'``
and ``m <= m'`` (the same major; a plugin may use what its minor added, so the core must have it).
Anything else raises `PluginVersionError` from `OperatorRegistry.discover`, naming the distribution
and both versions: an error, not a warning, because a plugin on another major fails later and
obscurely (a missing ctx method mid-compile) or, worse, plans kernels under changed rules, and a
registry that quietly skipped it would leave its ops "unsupported" with no hint why. pip keeps the two
apart anyway when the plugin pins ``onyxia-core`` to a compatible range; this catches what slips past.
A plugin that declares nothing predates the declaration and is taken as ``1.0`` with a
`PluginApiWarning` (it loads on 1.x, and will be refused by a 2.x core).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import TypeVar

from onyxia.core.errors import OnyxiaError

__all__ = [
    "PLUGIN_API_ATTRIBUTE",
    "PLUGIN_API_VERSION",
    "PluginApiWarning",
    "PluginVersionError",
    "check_plugin_api",
    "is_compatible",
    "plugin_api",
]

PLUGIN_API_VERSION = "1.0"
PLUGIN_API_ATTRIBUTE = "__onyxia_plugin_api__"  # set by `plugin_api` on the entry point's object
_UNDECLARED = "1.0"  # what a plugin written before declarations existed was written for
_VERSION = re.compile(r"(\d+)\.(\d+)")

_T = TypeVar("_T")


class PluginVersionError(OnyxiaError):
    """An operator package targets a plugin API version this onyxia-core does not provide."""


class PluginApiWarning(UserWarning):
    """An operator package declares no plugin API version (taken as 1.0)."""


def plugin_api(version: str) -> Callable[[_T], _T]:
    """Mark an entry point's object (the ``register`` function) as written for plugin API `version`."""
    _parse(version, f"plugin_api({version!r})")

    def mark(target: _T) -> _T:
        setattr(target, PLUGIN_API_ATTRIBUTE, version)
        return target

    return mark


def is_compatible(target: str, provided: str = PLUGIN_API_VERSION) -> bool:
    """Whether a plugin written for `target` loads on a core providing `provided`: same major, minor not newer."""
    (major, minor), (have_major, have_minor) = _parse(target, "target"), _parse(provided, "provided")
    return major == have_major and minor <= have_minor


def check_plugin_api(ep: EntryPoint, target: object, provided: str = PLUGIN_API_VERSION) -> str:
    """Check `target` (what `ep` loaded) against `provided`; return the version it targets.

    Raises `PluginVersionError` naming the package, its version and both API versions when they are
    incompatible or the declaration is no "major.minor" string; warns `PluginApiWarning` when absent."""
    who = _describe(ep)
    declared = getattr(target, PLUGIN_API_ATTRIBUTE, None)
    if declared is None:
        warnings.warn(
            f"{who} declares no plugin API version; taken as {_UNDECLARED} (onyxia-core provides {provided}). "
            f'Mark its entry point with @onyxia.core.plugin_api("{provided}") once it is checked against it.',
            PluginApiWarning,
            stacklevel=3,
        )
        declared = _UNDECLARED
    if not isinstance(declared, str) or not _VERSION.fullmatch(declared):
        raise PluginVersionError(f'{who} declares plugin API version {declared!r}; expected "major.minor", e.g. "1.0"')
    if not is_compatible(declared, provided):
        raise PluginVersionError(
            f"{who} targets plugin API {declared}, but this onyxia-core provides plugin API {provided} "
            f"(a plugin loads on the same major version with a minor no newer than the core's): install a "
            f"release of the plugin written for API {provided.split('.')[0]}.x, or an onyxia-core providing {declared}"
        )
    return declared


def _describe(ep: EntryPoint) -> str:
    """How messages name a plugin: operator package 'dist' 1.2 (entry point 'name' = module:attr), or the entry
    point alone when no distribution provides it."""
    dist = getattr(ep, "dist", None)
    where = f"entry point '{ep.name}' = {ep.value}"
    if dist is None:
        return f"operator plugin ({where})"
    return f"operator package '{dist.name}' {dist.version} ({where})"


def _parse(version: str, what: str) -> tuple[int, int]:
    match = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise PluginVersionError(f'{what}: plugin API versions are "major.minor" strings, e.g. "1.0"; got {version!r}')
    return int(match.group(1)), int(match.group(2))
