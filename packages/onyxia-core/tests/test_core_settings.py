"""`onyxia.core.settings`: each type parsed from an environment mapping, bad values named, and the three
ways code changes a value (`override` for a block and one thread, `configure` for the process, `reload`
to read the environment again)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import onyxia.core.settings as settings_module
from onyxia.core import OnyxiaError
from onyxia.core.settings import SETTINGS_DOC, Settings, SettingsError, configure, override, reload, settings


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No ``ONYXIA_*`` variable set and no `configure` changes; the process's settings come back after."""
    for name, *_ in SETTINGS_DOC:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings_module, "_configured", {})
    monkeypatch.setattr(settings_module, "_from_environ", None)
    yield monkeypatch


def test_unset_and_empty_variables_keep_the_defaults() -> None:
    assert Settings.from_environ({}) == Settings()
    assert Settings.from_environ({name: "  " for name, *_ in SETTINGS_DOC}) == Settings()
    assert Settings() == Settings(
        debug=0,
        check=False,
        dump_ir=None,
        pass_stats=False,
        batch_passes=True,
        share_buffers=True,
        max_binding_bytes=None,
        backend=None,
        native_encode=True,
        cache_dir=None,
    )


def test_every_type_is_parsed_from_its_variable() -> None:
    parsed = Settings.from_environ(
        {
            "ONYXIA_DEBUG": "2",
            "ONYXIA_CHECK": "1",
            "ONYXIA_DUMP_IR": "/tmp/ir",
            "ONYXIA_PASS_STATS": "1",
            "ONYXIA_BATCH_PASSES": "0",
            "ONYXIA_SHARE_BUFFERS": " 0 ",
            "ONYXIA_MAX_BINDING_BYTES": "0x10000",
            "ONYXIA_BACKEND": "vulkan",
            "ONYXIA_NATIVE_ENCODE": "0",
            "ONYXIA_CACHE_DIR": "cache",
            "ONYXIA_UNKNOWN": "ignored",
            "PATH": "/bin",
        }
    )
    assert parsed == Settings(
        debug=2,
        check=True,
        dump_ir=Path("/tmp/ir"),
        pass_stats=True,
        batch_passes=False,
        share_buffers=False,
        max_binding_bytes=65536,
        backend="vulkan",
        native_encode=False,
        cache_dir=Path("cache"),
    )


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("ONYXIA_CHECK", "yes", "expected 0 or 1"),
        ("ONYXIA_SHARE_BUFFERS", "true", "expected 0 or 1"),
        ("ONYXIA_DEBUG", "loud", "expected an integer"),
        ("ONYXIA_DEBUG", "-1", "must be >= 0"),
        ("ONYXIA_MAX_BINDING_BYTES", "100", "must be >= 256"),
        ("ONYXIA_MAX_BINDING_BYTES", "128MiB", "expected an integer"),
    ],
)
def test_a_bad_value_is_a_settings_error_naming_the_variable(name: str, text: str, why: str) -> None:
    with pytest.raises(SettingsError, match=rf"environment variable {name}={text!r}: .*{why}") as info:
        Settings.from_environ({name: text})
    assert isinstance(info.value, OnyxiaError)  # the CLI prints it as one error line


def test_a_bad_environment_fails_at_first_use(fresh: pytest.MonkeyPatch) -> None:
    fresh.setenv("ONYXIA_CHECK", "on")
    with pytest.raises(SettingsError, match="ONYXIA_CHECK='on'"):
        settings()


def test_replace_checks_names_and_types() -> None:
    base = Settings()
    assert base.replace(debug=1, dump_ir=Path("d")) == Settings(debug=1, dump_ir=Path("d"))
    with pytest.raises(SettingsError, match=r"unknown setting 'verbose'; known: backend, batch_passes"):
        base.replace(verbose=1)
    with pytest.raises(SettingsError, match=r"setting 'check' must be bool, got '1'"):
        base.replace(check="1")
    with pytest.raises(SettingsError, match=r"setting 'debug' must be int, got True"):
        base.replace(debug=True)
    with pytest.raises(SettingsError, match=r"setting 'dump_ir' must be Path \| None, got 'dir'"):
        base.replace(dump_ir="dir")
    assert base.replace(backend=None, max_binding_bytes=None) == base


def test_override_holds_inside_its_block_only(fresh: pytest.MonkeyPatch) -> None:
    assert settings().check is False
    with override(check=True, debug=1) as inside:
        assert settings() is inside and inside.check and inside.debug == 1
        with override(debug=2):
            assert settings().debug == 2 and settings().check  # nested: the outer block's values stay
        assert settings().debug == 1
    assert settings() == Settings()
    with pytest.raises(RuntimeError), override(pass_stats=True):
        raise RuntimeError("left by an error")
    assert settings().pass_stats is False


def test_an_override_in_one_thread_is_not_seen_by_another(fresh: pytest.MonkeyPatch) -> None:
    entered, seen = threading.Event(), threading.Event()
    results: dict[str, int] = {}

    def with_override() -> None:
        with override(debug=3):
            entered.set()
            seen.wait(10)
            results["inside"] = settings().debug

    def without() -> None:
        entered.wait(10)
        results["other"] = settings().debug
        seen.set()

    threads = [threading.Thread(target=with_override), threading.Thread(target=without)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {"inside": 3, "other": 0}
    assert settings().debug == 0


def test_configure_changes_the_process_and_survives_reload(fresh: pytest.MonkeyPatch) -> None:
    assert configure(check=True).check
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(settings().check))
    thread.start()
    thread.join(10)
    assert seen == [True], "configure is for every thread"
    with override(check=False):
        assert settings().check is False  # an override wins inside its block
    fresh.setenv("ONYXIA_DEBUG", "2")
    assert settings().debug == 0, "the environment is read once"
    reloaded = reload()
    assert reloaded.debug == 2 and reloaded.check, "reload reads the environment and keeps configure's changes"
    with pytest.raises(SettingsError, match="unknown setting 'colour'"):
        configure(colour=True)


def test_the_doc_rows_name_every_field_once() -> None:
    fields = dataclasses.fields(Settings)
    assert [row[1] for row in SETTINGS_DOC] == [f.name for f in fields]
    names = [row[0] for row in SETTINGS_DOC]
    assert len(set(names)) == len(names) and all(n.startswith("ONYXIA_") for n in names)
    assert all(row[3] for row in SETTINGS_DOC), "every setting says what it means"
    assert dict((row[1], row[2]) for row in SETTINGS_DOC)["batch_passes"] == "True"
