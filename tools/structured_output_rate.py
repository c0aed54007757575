"""How often the demo model writes JSON a client can use WITHOUT a constraint: the 50 schema x prompt cases of
the structured-output test (packages/onyxia-cli/tests/structured_cases.py), each asked as
`chat.completions.parse` would ask it minus `response_format` (the same chat prompt, greedy, max_tokens 200),
then parsed and validated against its pydantic model. Prints the rates (any JSON, valid instance) and, for
comparison, the constrained rate.

Usage: python tools/structured_output_rate.py
"""

from __future__ import annotations

import importlib.resources
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "onyxia-cli" / "tests"))


def main() -> int:
    from openai.lib._pydantic import to_strict_json_schema
    from pydantic import ValidationError
    from structured_cases import CASES, DEMO_DIR

    from onyxia.cli.llm import LlmSession
    from onyxia.cli.llm.chat import chat_stop_ids
    from onyxia.cli.llm.constraints import Constraint

    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_DIR) as root:
        llm = LlmSession.from_pretrained(root, max_length=512)
    stops = chat_stop_ids(llm)
    counts = {"json": 0, "valid": 0, "constrained": 0}
    for schema, prompt in CASES:
        ids = llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat([{"role": "user", "content": prompt}]))
        for constraint in (None, Constraint.json_schema(to_strict_json_schema(schema))):
            llm.reset()
            text = "".join(llm.generate(ids, 200, stop=stops, constraint=constraint))
            try:
                json.loads(text)
                schema.model_validate_json(text)
            except json.JSONDecodeError:
                continue
            except ValidationError:
                counts["json"] += constraint is None
                continue
            if constraint is None:
                counts["json"] += 1
                counts["valid"] += 1
            else:
                counts["constrained"] += 1
    n = len(CASES)
    print(
        f"unconstrained: {counts['json']}/{n} parse as JSON, {counts['valid']}/{n} validate ({counts['valid'] / n:.0%})"
    )
    print(f"constrained (response_format): {counts['constrained']}/{n} validate ({counts['constrained'] / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
