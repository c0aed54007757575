"""The API check on a tiny package made here: released, then changed, then announced (run by ``nox -s api``).

A throw-away tree under tmp_path mimics the repository (``packages/onyxia-tiny`` with its pyproject,
``_version.py``, CHANGELOG.md and sources); its 0.1.0 snapshot is written the way a release writes one,
then public signatures change, and the check must fail until the changelog's Unreleased section names
each changed symbol under "### Breaking", and only then pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_check
from changelog import announced_breaking, released_versions

DIST = "onyxia-tiny"
RELEASED = '''"""A tiny public API."""

__all__ = ["Greeter", "greet"]


def greet(name: str, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


class Greeter:
    def hello(self, name: str) -> str:
        return greet(name)
'''
# `punctuation` becomes keyword-only, and `hello` gains a required parameter: two breaking changes
CHANGED = RELEASED.replace("name: str, punctuation", "name: str, *, punctuation").replace(
    "self, name: str)", "self, name: str, loud: bool)"
)
CHANGELOG = """# Changelog

## [Unreleased]

{unreleased}
## [0.1.0] - 2026-11-29

### Added

- `onyxia_tiny.greet`, `onyxia_tiny.Greeter`.
"""


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository root holding onyxia-tiny 0.1.0, released: its snapshot written, sources unchanged."""
    project = tmp_path / "packages" / DIST
    package = project / "src" / "onyxia_tiny"
    package.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "{DIST}"\ndynamic = ["version"]\n\n'
        '[tool.hatch.version]\npath = "src/onyxia_tiny/_version.py"\n'
    )
    (package / "_version.py").write_text('__version__ = "0.1.0"\n')
    (package / "__init__.py").write_text(RELEASED)
    _changelog(tmp_path, "")
    monkeypatch.setitem(api_check.PUBLIC_MODULES, DIST, ("onyxia_tiny",))
    (snapshot,) = api_check.write_snapshots([DIST], tmp_path)
    assert snapshot == project / "api" / "0.1.0.json"
    assert json.loads(snapshot.read_text())["public_modules"] == ["onyxia_tiny"]
    return tmp_path


def _changelog(root: Path, unreleased: str) -> None:
    (root / "packages" / DIST / "CHANGELOG.md").write_text(CHANGELOG.format(unreleased=unreleased))


def _change_signatures(root: Path) -> None:
    (root / "packages" / DIST / "src" / "onyxia_tiny" / "__init__.py").write_text(CHANGED)


def _failing_symbols(root: Path) -> list[str]:
    failures = api_check.check([DIST], root)
    return sorted(symbol for symbol in ("onyxia_tiny.greet", "onyxia_tiny.Greeter.hello") if _names(failures, symbol))


def _names(failures: list[str], symbol: str) -> bool:
    return any(f"`{symbol}`" in failure for failure in failures)


def test_unchanged_release_passes(tiny: Path) -> None:
    assert api_check.check([DIST], tiny) == []


def test_changed_signatures_fail_without_a_changelog_entry(tiny: Path) -> None:
    _change_signatures(tiny)
    failures = api_check.check([DIST], tiny)
    assert _failing_symbols(tiny) == ["onyxia_tiny.Greeter.hello", "onyxia_tiny.greet"]
    assert any("punctuation" in f for f in failures) and any("loud" in f for f in failures)


def test_each_symbol_must_be_announced_under_breaking(tiny: Path) -> None:
    _change_signatures(tiny)
    # under another heading, or naming only the module: not an announcement
    _changelog(
        tiny,
        "### Changed\n\n- `onyxia_tiny.greet`: `punctuation` is keyword-only.\n\n### Breaking\n\n- `onyxia_tiny`\n",
    )
    assert _failing_symbols(tiny) == ["onyxia_tiny.Greeter.hello", "onyxia_tiny.greet"]
    _changelog(tiny, "### Breaking\n\n- `onyxia_tiny.greet`: `punctuation` is keyword-only.\n")
    assert _failing_symbols(tiny) == ["onyxia_tiny.Greeter.hello"]


def test_announcing_every_changed_symbol_passes(tiny: Path) -> None:
    _change_signatures(tiny)
    _changelog(
        tiny,
        "### Breaking\n\n- `onyxia_tiny.greet`: `punctuation` is keyword-only.\n"
        "- `onyxia_tiny.Greeter`: `hello` takes `loud`.\n",  # a class covers its members
    )
    assert api_check.check([DIST], tiny) == []


def test_announcement_is_read_from_unreleased_only(tiny: Path) -> None:
    _change_signatures(tiny)
    text = CHANGELOG.format(unreleased="").replace(
        "### Added", "### Breaking\n\n- `onyxia_tiny.greet`\n- `onyxia_tiny.Greeter`\n\n### Added"
    )
    changelog = tiny / "packages" / DIST / "CHANGELOG.md"
    changelog.write_text(text)  # announced, but under the released 0.1.0
    assert announced_breaking(changelog) == set() and released_versions(changelog) == ["0.1.0"]
    assert _failing_symbols(tiny) == ["onyxia_tiny.Greeter.hello", "onyxia_tiny.greet"]


def test_public_module_must_state_all(tiny: Path) -> None:
    init = tiny / "packages" / DIST / "src" / "onyxia_tiny" / "__init__.py"
    init.write_text(RELEASED.replace('__all__ = ["Greeter", "greet"]\n', ""))
    with pytest.raises(SystemExit, match=r"onyxia_tiny: a public module must state __all__"):
        api_check.check([DIST], tiny)
