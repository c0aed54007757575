"""Load each generated directory in Onyxia and replay its expected greedy ids.

Run with the repository's environment (not the exporter venvs), e.g.
``.venv/bin/python tools/llm_fixtures/check_onyxia.py /tmp/fixtures-out [llama-tiny-optimum ...]``.
Why a separate script: the generator's venvs hold the exporters, not Onyxia; this is the step that
shows a regenerated fixture is usable as test data before anyone copies it into a package's tests.
Prints ``<dir> <expected file> <prompt>:<matching ids>/<ids> ...`` and exits 1 if any id differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["check_dir", "main"]


def _dirs(root: Path) -> list[Path]:
    found = sorted(p.parent for p in root.glob("*-tiny-*/expected.json"))
    return found + sorted(p.parent for p in root.glob("*-tiny-*/*/expected.json"))


def check_dir(directory: Path) -> list[tuple[str, str, int, int]]:
    """(expected file, prompt, matching ids, ids) for every prompt of every expected*.json in ``directory``."""
    from onyxia.cli.llm import LlmSession

    rows = []
    for name in ("expected.json", "expected_acc0.json"):
        path = directory / name
        if not path.exists():
            continue
        level = 0 if "acc0" in name else None
        session = LlmSession.from_pretrained(directory, None, max_length=256, accuracy_level=level)
        for prompt in json.loads(path.read_text())["prompts"]:
            session.reset()
            got = list(session.generate_ids(prompt["prompt_ids"], len(prompt["greedy_ids"])))
            same = sum(a == b for a, b in zip(got, prompt["greedy_ids"], strict=True))
            rows.append((name, prompt["name"], same, len(prompt["greedy_ids"])))
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: check_onyxia.py OUT_DIR [SUBDIR ...]", file=sys.stderr)
        return 2
    root = Path(argv[0])
    dirs = [root / d for d in argv[1:]] or _dirs(root)
    failed = False
    for directory in dirs:
        try:
            rows = check_dir(directory)
        except Exception as exc:  # report and go on: one broken layout should not hide the others
            print(f"{directory.relative_to(root)} ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            failed = True
            continue
        for name in sorted({r[0] for r in rows}):
            cells = " ".join(f"{p}:{s}/{n}" for f, p, s, n in rows if f == name)
            print(f"{directory.relative_to(root)} {name} {cells}", flush=True)
        failed |= any(s != n for _, _, s, n in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
