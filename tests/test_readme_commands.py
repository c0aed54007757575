"""What the README tells a newcomer to type exists: each `onyxia ...` line of its shell blocks parses with
the real `onyxia` parser (subcommand, flags, choices), each `nox -s NAME` is a session of noxfile.py, each
script or file it names is in the checkout, each `pip install 'pkg[extra]'` extra is declared, each
`from onyxia... import name` in its Python blocks imports, and each relative link points at a file."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from onyxia.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README) if lang == language]


def _shell_lines() -> list[list[str]]:
    """Every command of the bash blocks, split like a shell would, comments dropped, `&&` chains apart."""
    commands: list[list[str]] = []
    for body in _blocks("bash"):
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                commands.append(words[:cut])
                words = words[cut + 1 :]
    return commands


def _onyxia_commands() -> list[list[str]]:
    return [words[1:] for words in _shell_lines() if words and words[0] in ("onyxia", ".venv/bin/onyxia")]


def test_the_readme_names_each_surface() -> None:
    used = {words[0] for words in _onyxia_commands()}
    assert {"generate", "chat", "serve", "inspect", "validate", "compare", "bench"} <= used
    assert _blocks("python"), "the README shows the Python API"


@pytest.mark.parametrize("argv", _onyxia_commands(), ids=lambda argv: " ".join(argv))
def test_onyxia_command_parses(argv: list[str]) -> None:
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on an unknown subcommand, flag or choice
        raise AssertionError(f"`onyxia {' '.join(argv)}` does not parse (exit {e.code})") from None


def test_other_commands_and_files_exist() -> None:
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    sessions = set(re.findall(r"@nox\.session[^\n]*\ndef (\w+)\(", noxfile))
    checked = 0
    for words in _shell_lines():
        if words[:2] == ["bash", ".ci/setup"] or words[:1] in (["bash"], ["python"], [".venv/bin/python"]):
            args = words[3:] if words[1:2] == ["-m"] else words[1:]  # `python -m pytest PATH`: the path
            target = next(w for w in args if not w.startswith("-"))
            assert (ROOT / target).exists(), f"{' '.join(words)}: {target} is not in the checkout"
            checked += 1
        if words[0].endswith("nox") and "-s" in words:
            name = words[words.index("-s") + 1]
            assert name in sessions, f"`nox -s {name}`: no such session in noxfile.py"
            checked += 1
        for word in words:
            if word.startswith("tests/") or word.startswith("packages/"):
                assert (ROOT / word).exists(), f"{' '.join(words)}: {word} is not in the checkout"
    assert checked, "the README's two commands are checked"
    for package, extra in re.findall(r"pip install '(onyxia-\w+)\[(\w+)\]'", README):
        project = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
        assert extra in project["optional-dependencies"], f"{package} declares no [{extra}] extra"


def test_python_blocks_parse_and_their_onyxia_imports_exist() -> None:
    for body in _blocks("python"):
        for node in ast.walk(ast.parse(body)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("onyxia"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("onyxia"):
                        importlib.import_module(alias.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("tests/"):
                assert (ROOT / node.value).exists(), f"{node.value} is not in the checkout"


# Blocks that need something the checkout alone does not give: a running server (the serve tests use the
# real openai client), a third-party package (tests/packaged_models runs rapidocr through onyxia.ort).
NEEDS_MORE = ("openai", "rapidocr_onnxruntime")


def _runnable_blocks() -> list[str]:
    runnable = []
    for body in _blocks("python"):
        modules = {
            name.split(".")[0]
            for node in ast.walk(ast.parse(body))
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        if not modules & set(NEEDS_MORE):
            runnable.append(body)
    return runnable


def test_three_python_blocks_run_as_written() -> None:
    assert len(_runnable_blocks()) == 3, "onyxia.ort, LlmSession and the load/compile/run flow"


@pytest.mark.parametrize("body", _runnable_blocks(), ids=lambda body: body.splitlines()[-1][:40])
def test_python_block_runs(body: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)  # the blocks name files of the checkout relative to its root
    exec(compile(body, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip(), "each block prints what it computed"


def test_relative_links_point_at_files() -> None:
    links = [target for target in re.findall(r"\]\(([^)#\s]+)", README) if "://" not in target]
    assert links
    missing = [target for target in links if not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"
