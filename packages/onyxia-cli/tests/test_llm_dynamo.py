"""PyTorch's own exporter: every family exported by ``torch.onnx.export(dynamo=True, opset_version=23)``.

Each ``<family>-tiny-dynamo`` fixture holds the export with a KV cache (``model.onnx``, past/present named as
optimum's) and without one (``model_no_cache.onnx``, sharing ``model.onnx.data``), with onnxruntime's greedy
ids and logits for both (tools/llm_fixtures). The cached export must generate onnxruntime's ids through the
Python API and through ``onyxia generate``, with prefill logits within 1e-4; the no-cache export cannot be
served by a session (no cache to append to), and the error says so; it runs as a plain model through
`onyxia.ort`, as a user would run it in onnxruntime.
"""

import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from llm_cases import DATA, DYNAMO_FIXTURES, Fixture, case_session, expected, fixture_id

from onyxia.core import ModelLoadError

# What torch 2.13 / onnxscript 0.7.2 write per family: (Attention, RotaryEmbedding, RMSNormalization) nodes.
# Gemma 2 loads with eager attention (transformers' default for soft-capping: sdpa cannot soft-cap), so no
# Attention node; Phi-3's partial rotary (48 of 64 dims) stays Slice/Neg/Concat/Mul, no RotaryEmbedding.
STANDARD_OPS = {
    "gemma3": (2, 4, 13),
    "gemma2": (0, 4, 9),
    "llama": (2, 4, 5),
    "qwen2": (2, 4, 5),
    "qwen3": (2, 4, 9),
    "phi3": (2, 0, 5),
    "mistral": (2, 4, 5),
}


def _family(case: Fixture) -> str:
    return case.directory.split("-tiny-")[0]


@pytest.mark.parametrize("case", DYNAMO_FIXTURES, ids=fixture_id)
def test_the_export_is_opset_23_standard_attention(case: Fixture) -> None:
    for name in ("model.onnx", "model_no_cache.onnx"):
        model = onnx.load(str(DATA / case.directory / name), load_external_data=False)
        assert {o.domain: o.version for o in model.opset_import}.get("") == 23, name
        ops = Counter(n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx"))
        assert (ops["Attention"], ops["RotaryEmbedding"], ops["RMSNormalization"]) == STANDARD_OPS[_family(case)]


@pytest.mark.parametrize("case", DYNAMO_FIXTURES, ids=fixture_id)
def test_greedy_tokens_match_onnxruntime(case: Fixture) -> None:
    llm = case_session(case)
    for prompt in expected(case.directory, case.expected)["prompts"]:
        llm.reset()
        got = list(llm.generate_ids(prompt["prompt_ids"], len(prompt["greedy_ids"])))
        assert got == prompt["greedy_ids"], f"prompt '{prompt['name']}'"


@pytest.mark.parametrize("case", DYNAMO_FIXTURES, ids=fixture_id)
def test_prefill_logits_match_onnxruntime(case: Fixture) -> None:
    llm = case_session(case)
    for prompt in expected(case.directory, case.expected)["prompts"]:
        llm.reset()
        logits = llm.next_token_logits(prompt["prompt_ids"])
        top5 = prompt["prefill_top5"]
        assert list(np.argsort(-logits, kind="stable")[:5]) == top5["ids"], prompt["name"]
        np.testing.assert_allclose(logits[top5["ids"]], top5["values"], atol=case.tolerance, rtol=0)
        total = logits.astype(np.float64).sum()
        np.testing.assert_allclose(total, prompt["prefill_last_logits_sum"], atol=case.tolerance * logits.size)


@pytest.mark.parametrize("case", DYNAMO_FIXTURES, ids=fixture_id)
def test_onyxia_generate_prints_onnxruntimes_tokens(case: Fixture, cli: Callable[..., Any]) -> None:
    """The CLI path: the prompt as text, tokens until the first EOS, decoded (prompts cut to a token count
    have no text of their own and run through the Python API above)."""
    llm = case_session(case)
    eos = set(llm.model_dir.eos_token_ids)
    for prompt in expected(case.directory, case.expected)["prompts"]:
        if prompt["truncate_to"] is not None:
            continue
        assert llm.tokenizer.encode(prompt["text"]) == prompt["prompt_ids"], prompt["name"]
        ids = prompt["greedy_ids"]
        until_eos = ids[: next((i for i, t in enumerate(ids) if t in eos), len(ids))]
        argv = ["--prompt", prompt["text"], "--max-new-tokens", str(len(ids)), "--temperature", "0"]
        result = cli("generate", str(DATA / case.directory), *argv, "--max-length", "160")
        assert result.code == 0, result.err
        assert result.out == prompt["text"] + _streamed(llm.tokenizer, until_eos) + "\n", prompt["name"]


def _streamed(tokenizer: Any, ids: list[int]) -> str:
    """The text `onyxia generate` prints for `ids`: its stream decoder's pieces (random weights make byte
    pieces that are no UTF-8, which a stream and a whole-sequence decode replace differently)."""
    stream = tokenizer.stream()
    return "".join(stream.push(t) for t in ids) + stream.flush()


def test_an_export_without_a_cache_is_refused_naming_what_is_missing(tmp_path: Path) -> None:
    source = DATA / "gemma3-tiny-dynamo"
    for item in source.iterdir():
        if item.name != "model.onnx":
            shutil.copy(item, tmp_path / item.name)
    (tmp_path / "model_no_cache.onnx").rename(tmp_path / "model.onnx")
    from onyxia.cli.llm import LlmSession

    with pytest.raises(ModelLoadError) as error:
        LlmSession.from_pretrained(tmp_path, max_length=64)
    message = str(error.value)
    assert "no KV cache" in message and "past_key_values.N.key/value" in message and "use_cache=False" in message


@pytest.mark.parametrize("case", DYNAMO_FIXTURES, ids=fixture_id)
def test_the_no_cache_export_runs_as_a_plain_model(case: Fixture) -> None:
    """Without a cache the export is an ordinary model: `onyxia.ort` runs it as onnxruntime does, its last
    position's logits within 1e-4 of onnxruntime's (`expected_no_cache.json`: the whole sequence each step).
    Two prompts (short and long), each a shape of its own to compile."""
    from onyxia import ort

    session = ort.InferenceSession(str(DATA / case.directory / "model_no_cache.onnx"))
    prompts = json.loads((DATA / case.directory / "expected_no_cache.json").read_text())["prompts"]
    for prompt in (p for p in prompts if p["name"] in ("short", "long")):
        ids = np.array([prompt["prompt_ids"]], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(ids.shape[1])[None]}
        (logits,) = session.run(["logits"], feeds)
        last, top5 = logits[0, -1], prompt["prefill_top5"]
        assert int(np.argmax(last)) == prompt["greedy_ids"][0], prompt["name"]
        np.testing.assert_allclose(last[top5["ids"]], top5["values"], atol=case.tolerance, rtol=0)
        total = last.astype(np.float64).sum()
        np.testing.assert_allclose(total, prompt["prefill_last_logits_sum"], atol=case.tolerance * last.size)
