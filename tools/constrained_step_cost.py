"""What a grammar-constrained decode step costs against an unconstrained one, on this machine's adapter.

Three measurements, A/B alternating in one process (the machine is shared: alternating keeps a load spike from
landing on one side only), median of each:

1. the whole decode step of the demo model (fortune-gemma3, 4k vocabulary) and of a Gemma-sized vocabulary
   sampler, unconstrained (the resident mask all ones) vs constrained (a JSON schema's matcher mid-object): the
   constrained one is mask time (llguidance on the host) + upload (`set_allowed`) + the same run;
2. the mask time and the upload alone;
3. the sampler alone: a one-node SampleToken plan with and without the mask input, at 4,096 and 262,144 ids
   (what the all-ones mask costs an unconstrained step: the plan's SampleToken always reads it).

Usage: python tools/constrained_step_cost.py [--steps 200]
"""

from __future__ import annotations

import argparse
import importlib.resources
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _alternate(a: Callable[[], object], b: Callable[[], object], steps: int) -> tuple[list[float], list[float]]:
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(steps):
        for fn, out in ((a, ta), (b, tb)):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return ta, tb


def decode_steps(steps: int) -> None:
    from openai.lib._pydantic import to_strict_json_schema
    from pydantic import BaseModel, Field

    from onyxia.cli.llm import LlmSession
    from onyxia.cli.llm.constrained_rows import allowed_masks, set_allowed
    from onyxia.cli.llm.constraints import Constraint, GrammarMatcher, grammar_tokenizer
    from onyxia.cli.llm.generation_passes import NEXT_TOKEN

    class Item(BaseModel):
        name: str = Field(max_length=400)
        tags: list[str]

    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / "fortune-gemma3") as root:
        llm = LlmSession.from_pretrained(root, max_length=512)
    tokenizer = grammar_tokenizer(llm)
    constraint = Constraint.json_schema(to_strict_json_schema(Item))
    matcher = GrammarMatcher(tokenizer, constraint.check(tokenizer))
    llm.reset()
    written = list(llm.generate_ids(llm.tokenizer.encode("Life is"), 12, constraint=constraint))
    assert matcher._matcher.consume_tokens(written)  # mid-string ('{"name":"' and more): most ids are allowed
    llm.reset()
    llm._forward(llm.tokenizer.encode("Life is"), [NEXT_TOKEN])
    token = [int(llm.tokenizer.encode(" a")[-1])]
    start_position = llm.position

    def plain() -> None:
        if llm.position > 500:  # the cache's end: back to the prompt (both sides see the same lengths)
            llm.rewind(start_position)
        set_allowed(llm, None)
        llm._forward(token, [NEXT_TOKEN])

    mask_s: list[float] = []
    upload_s: list[float] = []

    def constrained() -> None:
        start = time.perf_counter()
        masks = allowed_masks(llm, [matcher])
        middle = time.perf_counter()
        set_allowed(llm, masks)
        mask_s.append(middle - start)
        upload_s.append(time.perf_counter() - middle)
        llm._forward(token, [NEXT_TOKEN])

    ta, tb = _alternate(plain, constrained, steps)
    a, b = _median_ms(ta), _median_ms(tb)
    print(f"demo model decode step ({llm.adapter}): unconstrained {a:.3f} ms, constrained {b:.3f} ms = {b / a:.2f}x")
    print(f"  of which mask (llguidance) {_median_ms(mask_s):.3f} ms, upload {_median_ms(upload_s):.3f} ms")


def _sampler_model(vocab: int, masked: bool) -> onnx.ModelProto:
    inputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
        helper.make_tensor_value_info("params", TensorProto.FLOAT, [3]),
    ]
    if masked:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [1, (vocab + 31) // 32]))
    node = helper.make_node("SampleToken", [i.name for i in inputs], ["token"], domain="com.onyxia")
    output = helper.make_tensor_value_info("token", TensorProto.INT64, [1, 1])
    graph = helper.make_graph([node], "sampler", inputs, [output])
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.onyxia", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def sampler(steps: int) -> None:
    from onyxia.compiler import CompilerPipeline
    from onyxia.onnx import load_and_parse_model
    from onyxia.operators import core_operator_registry
    from onyxia.runtime import Runtime

    runtime = Runtime()
    rng = np.random.default_rng(0)
    for vocab in (4096, 262_144):
        executors = []
        for masked in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp, "m.onnx")
                onnx.save_model(_sampler_model(vocab, masked), path)
                compiled = CompilerPipeline(core_operator_registry()).compile(load_and_parse_model(path), {})
            executors.append(runtime.load_model(compiled))
        feeds = {"logits": rng.standard_normal((1, 1, vocab)).astype(np.float32)}
        mask = {"mask": np.full((1, (vocab + 31) // 32), -1, np.int32)}
        for name, params in (("greedy", [0.0, 0, 0]), ("top-k 40", [0.8, 40, 0.5])):
            plain = {**feeds, "params": np.array(params, np.float32)}
            with_mask = {**plain, **mask}
            unmasked_run, masked_run = executors

            def run_plain(u: Any = unmasked_run, f: dict[str, np.ndarray] = plain) -> object:
                return u.run(f)

            def run_masked(m: Any = masked_run, f: dict[str, np.ndarray] = with_mask) -> object:
                return m.run(f)

            ta, tb = _alternate(run_plain, run_masked, steps)
            a, b = _median_ms(ta), _median_ms(tb)
            print(f"SampleToken {vocab} ids {name}: unmasked {a:.3f} ms, masked (all ones) {b:.3f} ms = {b / a:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    decode_steps(args.steps)
    sampler(max(20, args.steps // 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
