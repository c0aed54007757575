"""The session's guarantees: one plan, no recompiles, tiny readback, KV cache in place, chat reuse."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_cases import DATA, FAMILIES, session

from onyxia.cli.llm import LlmSession, SamplingParams
from onyxia.cli.llm.chat import Conversation
from onyxia.core import InputError, ModelLoadError
from onyxia.core.plan import ERROR_SLOT_WORDS
from onyxia.runtime.device import DeviceContext
from onyxia.runtime.readback import staged_bytes

MODELS = [("gemma3-tiny-optimum", None), ("gemma3-tiny", "fp32")]


@pytest.mark.parametrize(("directory", "precision"), MODELS)
def test_decode_creates_no_pipelines_and_reads_back_one_token(directory: str, precision: str | None) -> None:
    llm = session(directory, precision)
    llm.reset()
    stats = llm.executor.stats
    read = stats.bytes_read_back
    steps = llm.generate_ids([2, 100, 200, 300], 12)
    next(steps)  # prefill (and, pipelined, the first decode step submitted ahead)
    next(steps)  # first decode step
    pipelines, modules = stats.pipelines_created, stats.shader_modules_created
    switches = stats.plan_switches
    count = 2 + sum(1 for _ in steps)
    assert stats.bytes_read_back - read == 4 * count  # one i32 token id per run: prefill, a step per token but the last
    assert (stats.pipelines_created, stats.shader_modules_created) == (pipelines, modules)
    assert stats.plan_switches == switches and stats.replans == 0  # decode moves symbolic dims only


class _CountingQueue:
    """The device queue, counting submits (everything else passes through)."""

    def __init__(self, queue: Any) -> None:
        self.queue, self.submits = queue, 0

    def submit(self, buffers: Any) -> None:
        self.submits += 1
        self.queue.submit(buffers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


@dataclass(frozen=True)
class _CountingContext(DeviceContext):
    counter: Any = None

    @property
    def queue(self) -> Any:
        return self.counter


@pytest.mark.parametrize(("directory", "precision"), MODELS)
def test_decode_step_is_one_submit_and_one_map_with_the_error_word(directory: str, precision: str | None) -> None:
    """The run-time error word (the embedding Gather's index check, int64 shape arithmetic, each
    GroupQueryAttention's seqlens_k range, each KvAppend's cache rows) rides on the token readback: still one
    submit and one map per greedy step, 4 bytes of token id plus 8 bytes per checking node (at most 4 besides
    the attention layers' cache checks)."""
    llm = session(directory, precision)
    executor, stats = llm.executor, llm.executor.stats
    slots = executor.compiled.error_slots
    others = [s for s in slots if s.op_type not in ("GroupQueryAttention", "KvAppend")]  # a cache check per layer
    assert any(s.node == "/model/embed_tokens/Gather" for s in slots) and 1 <= len(others) <= 4
    word = ERROR_SLOT_WORDS * 4 * len(slots)
    ctx = executor.ctx
    counting = _CountingContext(ctx.device, ctx.features, ctx.limits, ctx.use_immediates, _CountingQueue(ctx.queue))
    executor.ctx = executor._pool.ctx = counting
    try:
        llm.reset()
        submits, maps = counting.counter.submits, stats.staging_maps
        read, words = stats.bytes_read_back, stats.error_word_bytes
        tokens = len(list(llm.generate_ids([2, 100, 200, 300], 10)))
        runs = tokens  # the prefill, then one step per token but the last (pipelined or not)
        assert counting.counter.submits - submits == runs  # one submit per step
        assert stats.staging_maps - maps == runs  # one mapped readback per step
        assert stats.bytes_read_back - read == 4 * runs  # the token id
        assert stats.error_word_bytes - words == word * runs  # and the word, in the same map
    finally:
        executor.ctx = executor._pool.ctx = ctx


def test_an_id_past_the_vocabulary_is_also_caught_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind the host check (`_token_ids`, tested in test_llm_session_errors.py): with it bypassed,
    id 5000 into the 1024-row embedding is reported by the Gather kernel, naming the node."""
    llm = session("gemma3-tiny-optimum", None)
    llm.reset()
    expected = llm.next_token_logits([2, 100])
    llm.reset()
    with monkeypatch.context() as patched:
        patched.setattr(llm, "_token_ids", lambda ids: [int(t) for t in ids])
        with pytest.raises(InputError, match=r"node '/model/embed_tokens/Gather' \(Gather\): index 5000 is out"):
            llm.next_token_logits([2, 5000])
    llm.reset()
    np.testing.assert_array_equal(llm.next_token_logits([2, 100]), expected)  # the word was cleared
    llm.reset()


@pytest.mark.parametrize(("directory", "precision"), MODELS)
def test_kv_cache_is_appended_in_place(directory: str, precision: str | None) -> None:
    llm = session(directory, precision)
    assert len(llm.aliased) == len(llm.signature.kv)  # every cache tensor aliased: no per-step copy
    # no cache copy; the one carry is the 4-byte token id into input_ids (pipelined decode)
    assert [size for *_, size in llm.executor._carries.copies] in ([], [4])
    # nor does the readback staging buffer make room for it: only for what a step may read back
    executor, presents = llm.executor, {p.present for p in llm.signature.kv}
    others = [name for name in executor.output_names if name not in presents]
    assert executor._pool.staging is not None
    word = staged_bytes(executor._readback.errors.nbytes)  # the run-time error word, copied behind the outputs
    assert executor._pool.staging.size <= sum(staged_bytes(executor.buffer_bytes(name)) for name in others) + word


def test_sampling_reads_one_logits_row_and_is_reproducible() -> None:
    llm = session("gemma3-tiny-optimum", None)
    params = SamplingParams(temperature=0.9, top_k=20, top_p=0.9, repetition_penalty=1.1, seed=7)
    runs = []
    for _ in range(2):
        llm.reset()
        before = llm.executor.stats.bytes_read_back
        runs.append(list(llm.generate_ids([2, 5, 9], 6, params)))
        assert llm.executor.stats.bytes_read_back - before == 6 * 1024 * 4  # the last row of logits per step
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "directory", ["gemma3-tiny-optimum", *(f"{f}-tiny-optimum" for f in FAMILIES), "qwen2-tiny-genai/fp32"]
)
def test_chat_reuses_the_cache_and_equals_a_single_shot_run(directory: str) -> None:
    """Each family's own chat template and stop tokens; later turns prefill only what is new."""
    llm = session(directory, None)
    greedy = SamplingParams()
    chat = Conversation(llm, greedy, max_new_tokens=6)
    answers = ["".join(chat.say(text)) for text in ("hello", "tell me more", "thanks")]
    rendered = llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat(chat.messages[:-1]))
    assert chat.prefilled[0] == len(llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat(chat.messages[:1])))
    assert sum(chat.prefilled) + sum(len(llm.tokenizer.encode_chat_turn(a)) for a in answers[:2]) < 3 * len(rendered)
    # one shot over the whole conversation gives the same last answer
    llm.reset()
    stops = chat._stops()
    single = list(llm.generate_ids(rendered, 6, greedy, stops))
    text = llm.tokenizer.decode([t for t in single if t not in stops])
    assert text == answers[-1]


@pytest.mark.parametrize(("directory", "precision"), [*MODELS, ("gemma3-tiny-genai/fp32", None)])
def test_prefill_in_chunks_equals_one_run(directory: str, precision: str | None) -> None:
    llm = session(directory, precision)
    prompt = [2, *range(40, 53)]
    llm.reset()
    whole = llm.next_token_logits(prompt)
    llm.reset()
    llm.prefill_chunk, chunk = 4, llm.prefill_chunk
    runs = llm.executor.stats.runs
    try:
        chunked = llm.next_token_logits(prompt)
    finally:
        llm.prefill_chunk = chunk
    assert llm.executor.stats.runs - runs == 4  # 14 tokens in chunks of 4
    assert llm.position == len(prompt)
    np.testing.assert_allclose(chunked, whole, atol=1e-4)


def test_activations_are_sized_for_a_prefill_chunk_not_max_length(monkeypatch: pytest.MonkeyPatch) -> None:
    from onyxia.cli.llm import loading

    monkeypatch.setattr(loading, "PREFILL_CHUNK", 64)
    small = LlmSession.from_pretrained(DATA / "gemma3-tiny", "fp32", max_length=64)
    large = LlmSession.from_pretrained(DATA / "gemma3-tiny", "fp32", max_length=256)
    assert large.prefill_chunk == small.prefill_chunk == 64
    # past the KV cache only per-position scalars (the attention mask and what derives from it) grow with
    # max_length: nothing of [sequence, hidden] size
    assert _non_cache_bytes(large) - _non_cache_bytes(small) <= 32 * (256 - 64)
    assert large.executor.gpu_bytes > small.executor.gpu_bytes


def _non_cache_bytes(llm: LlmSession) -> int:
    pool = llm.executor._pool
    cache = {id(pool.get(llm.executor._ref(name))) for p in llm.signature.kv for name in (p.past, p.present)}
    buffers = {id(b): b for b in pool.buffers.values() if id(b) not in cache}
    return sum(int(b.size) for b in buffers.values())


def test_prompt_longer_than_max_length_is_refused() -> None:
    llm = session("gemma3-tiny-optimum", None)
    llm.reset()
    with pytest.raises(InputError, match="exceed max_length 160"):
        list(llm.generate_ids(list(range(2, 150)), 20))


def test_bad_directories_get_specific_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no ONNX model found"):
        LlmSession.from_pretrained(tmp_path)
    (tmp_path / "model.onnx").write_bytes((DATA / "gemma3-tiny-optimum" / "model.onnx").read_bytes())
    with pytest.raises(ModelLoadError, match="no tokenizer.json"):
        LlmSession.from_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="exceeds the model's limit of 512"):
        LlmSession.from_pretrained(DATA / "gemma3-tiny-optimum", max_length=4096)
    with pytest.raises(ModelLoadError, match="single model file .* --precision q4 does not apply"):
        LlmSession.from_pretrained(DATA / "gemma3-tiny-genai" / "fp32", "q4")
    with pytest.raises(ModelLoadError, match="unknown; choose one of"):
        LlmSession.from_pretrained(DATA / "gemma3-tiny", "int3")


def test_streaming_keeps_multibyte_characters_whole() -> None:
    llm = session("gemma3-tiny-optimum", None)
    text = "naïve café — 日本語 🙂 done"
    ids = llm.tokenizer.encode(text)
    stream = llm.tokenizer.stream()
    pieces = [stream.push(t) for t in ids] + [stream.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    np.testing.assert_equal(len(ids) > len(text.split()), True)


def test_f16_precision_on_an_adapter_without_shader_f16() -> None:
    from onyxia.cli.llm import resolve_model_dir

    with pytest.raises(ModelLoadError, match="needs the adapter feature shader-f16"):
        resolve_model_dir(DATA / "gemma3-tiny", "fp16", features={"immediates"})
    assert resolve_model_dir(DATA / "gemma3-tiny", None, features={"immediates"}).precision == "q4"
    assert resolve_model_dir(DATA / "gemma3-tiny", None, features={"shader-f16"}).precision == "q4f16"


def test_model_whose_inputs_break_the_conventions(tmp_path: Path) -> None:
    import shutil

    import onnx

    shutil.copytree(DATA / "gemma3-tiny-optimum", tmp_path / "m")
    model = onnx.load(tmp_path / "m" / "model.onnx")
    model.graph.input[0].name = "tokens"
    for node in model.graph.node:
        node.input[:] = ["tokens" if x == "input_ids" else x for x in node.input]
    onnx.save(model, tmp_path / "m" / "model.onnx")
    with pytest.raises(ModelLoadError, match=r"no 'input_ids' input; unexpected inputs \['tokens'\]"):
        LlmSession.from_pretrained(tmp_path / "m")
