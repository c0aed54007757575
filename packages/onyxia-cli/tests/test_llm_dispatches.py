"""Dispatches per decode layer: no family, exporter or precision may cost more than Gemma 3's 13; and a
decode step is one submit with one read-back (the token id), no mid-run value read-back, no plan switch.

Counted from the decode step the runtime actually encodes (`PlanExecutor.live_dispatches()`, 0-size
dispatches left out) and attributed to a layer by the node names the exporters give (``layers.N``;
fused nodes keep the name of a node they replaced). Layers at or past ``num_hidden_layers`` are the
exporters' names for the final norm, not decoder layers.

The float16 files (Gemma 3's fp16 and q4f16) are held to their own count: they run onnxruntime CPU's
float16 arithmetic (`MatchOnnxruntimeCpuFloat16` inserts the Casts onnxruntime's CPU EP inserts and keeps
its f32 MatMuls apart), 20 and 17 dispatches per layer before and after issue 9.
"""

import json
import re
from collections import Counter

import pytest
from llm_cases import DATA, FIXTURES, Fixture, case_session, fixture_id

GEMMA3_DISPATCHES_PER_LAYER = 13  # the 270m q4 plan before the other families came (issue 9's bar)
FLOAT16_DISPATCHES_PER_LAYER = {"fp16": 20, "q4f16": 17}
_LAYER = re.compile(r"layers[./_](\d+)[./]")
_CASES = {(c.directory, c.precision): c for c in FIXTURES if c.accuracy_level is None}.values()


def _layer_count(directory: str) -> int:
    root = DATA / directory
    genai = root / "genai_config.json"
    if genai.exists():
        return int(json.loads(genai.read_text())["model"]["decoder"]["num_hidden_layers"])
    return int(json.loads((root / "config.json").read_text())["num_hidden_layers"])


@pytest.mark.parametrize("case", _CASES, ids=fixture_id)
def test_a_decode_layer_costs_at_most_gemma3s_dispatches(case: Fixture) -> None:
    llm = case_session(case)
    llm.reset()
    list(llm.generate_ids([5, 6, 7, 8], 1))
    stats = llm.executor.stats
    before = (stats.runs, stats.staging_maps, stats.value_readbacks, stats.plan_switches)
    list(llm.generate_ids([9], 1))  # one decode step: the dims a decode step binds
    after = (stats.runs, stats.staging_maps, stats.value_readbacks, stats.plan_switches)
    # one submit, one map of the staging buffer (the token id), no mid-run read-back, no plan switch
    assert [b - a for a, b in zip(before, after)] == [1, 1, 0, 0]
    layers = _layer_count(case.directory)
    per_layer: Counter[int] = Counter()
    ops: dict[int, Counter[str]] = {}
    for node, op_type in llm.executor.live_dispatches():
        match = _LAYER.search(node)
        if match and int(match.group(1)) < layers:
            per_layer[int(match.group(1))] += 1
            ops.setdefault(int(match.group(1)), Counter())[op_type] += 1
    assert sorted(per_layer) == list(range(layers)), f"dispatches found for layers {sorted(per_layer)}"
    worst = max(per_layer, key=per_layer.__getitem__)
    bar = FLOAT16_DISPATCHES_PER_LAYER.get(case.precision or "", GEMMA3_DISPATCHES_PER_LAYER)
    assert per_layer[worst] <= bar, f"layer {worst}: {dict(ops[worst])}"
