"""Continuous batching (`LlmSession.batch()`): every stream gets exactly the tokens it gets served alone.

For every fixture layout (onnx-community, onnxruntime-genai fp32 and int4 with its windowed caches, optimum,
PyTorch's dynamo exporter; every family) and 1, 3 and 8 slots, eight streams arrive staggered over the
steps with prompts of different lengths (the fixture's own prompts, cut at several lengths, two sharing a
long prefix), greedy and seeded sampling (top-k/temperature on the GPU, top-p and a repetition penalty on the
host), one cancelled mid-way and one ending early on a stop id. "Alone" is the same request on the same
session with nothing else running. The session's slots start cold each time (`reset`), so prefix reuse
within the scenario is the one under test.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from llm_cases import DATA, DYNAMO_FAMILIES, FAMILIES, expected

from onyxia.cli.llm import SamplingParams
from onyxia.cli.llm.batch import Stream

LAYOUTS = [
    ("gemma3-tiny", "fp32", "expected_fp32.json"),
    ("gemma3-tiny-genai/fp32", None, "expected_ort.json"),  # a windowed cache (layer 0)
    ("gemma3-tiny-genai/fp32-fullkv", None, "expected_ort.json"),
    ("gemma3-tiny-optimum", None, "expected.json"),
    *((f"{family}-tiny-optimum", None, "expected.json") for family in FAMILIES),
    *((f"{family}-tiny-genai/fp32", None, "expected.json") for family in FAMILIES),
    *((f"{family}-tiny-genai/int4", None, "expected.json") for family in FAMILIES),
    *((f"{family}-tiny-dynamo", None, "expected.json") for family in DYNAMO_FAMILIES),
]
NEW_TOKENS = 10
CANCELLED, STOPPED = 5, 6  # stream 5 is cancelled after 3 tokens; stream 6 stops on its own 4th token
_SAMPLED = {
    1: SamplingParams(temperature=0.8, top_k=20, seed=11),
    2: SamplingParams(presence_penalty=0.7, frequency_penalty=0.9, logit_bias=((9, 1.0),)),  # OpenAI's, on the host
    3: SamplingParams(temperature=1.1, seed=12),
    4: SamplingParams(temperature=0.7, top_p=0.9, seed=13),
    7: SamplingParams(repetition_penalty=1.3),
}


@cache
def _session(directory: str, precision: str | None, slots: int) -> Any:
    from onyxia.cli.llm import LlmSession

    return LlmSession.from_pretrained(DATA / directory, precision, max_length=160, slots=slots, prefill_chunk=16)


def _prompts(directory: str, expected_file: str) -> list[list[int]]:
    """Eight prompts of different lengths from the fixture's own; 0 and 2 share a long prefix."""
    ids = [p["prompt_ids"] for p in expected(directory, expected_file)["prompts"]]
    longest = max(ids, key=len)
    cuts = [longest[:40], ids[0], longest[:52], ids[1][:9], ids[-1][:23], longest[:31], ids[0][:5], ids[1][:17]]
    return [cut for cut in cuts if len(cut) >= 2]


def _streams(prompts: list[list[int]], stop_for_six: int | None = None) -> list[Stream]:
    streams = []
    for i, prompt in enumerate(prompts):
        stop = [stop_for_six] if i == STOPPED and stop_for_six is not None else []
        streams.append(Stream(prompt, NEW_TOKENS, _SAMPLED.get(i, SamplingParams()), stop))
    return streams


def _alone(llm: Any, streams: list[Stream]) -> list[list[int]]:
    """Each stream's tokens with nothing else running (a fresh batch, slots reset, one stream at a time)."""
    out = []
    for stream in streams:
        llm.reset()
        batch = llm.batch()
        solo = batch.add(Stream(stream.prompt, stream.max_new_tokens, stream.params, sorted(stream.stop)))
        batch.run()
        out.append(solo.tokens)
    return out


def _together(llm: Any, streams: list[Stream]) -> None:
    """The streams arriving staggered: three at once, then one every other step; one cancelled mid-way."""
    llm.reset()
    batch = llm.batch()
    arrivals = [0, 0, 0, 2, 4, 6, 8, 10]
    step = 0
    while batch.busy or any(a >= step for a in arrivals[: len(streams)]):
        for stream, at in zip(streams, arrivals):
            if at == step:
                batch.add(stream)
        if len(streams[CANCELLED].tokens) >= 3:
            streams[CANCELLED].cancel()
        batch.step()
        step += 1
    assert batch.slots.in_use == 0  # every finished or cancelled stream gave its slot back


@pytest.mark.parametrize("slots", [1, 3, 8])
@pytest.mark.parametrize(("directory", "precision", "expected_file"), LAYOUTS, ids=[d for d, *_ in LAYOUTS])
def test_each_stream_gets_what_it_gets_alone(
    directory: str, precision: str | None, expected_file: str, slots: int
) -> None:
    llm = _session(directory, precision, slots)
    prompts = _prompts(directory, expected_file)
    alone = _alone(llm, _streams(prompts))
    stop = alone[STOPPED][3]  # stream 6 stops on its own 4th token (the first time it is sampled)
    alone[STOPPED] = alone[STOPPED][: alone[STOPPED].index(stop) + 1]
    streams = _streams(prompts, stop)
    _together(llm, streams)
    for i, stream in enumerate(streams):
        if i == CANCELLED:
            assert stream.finish_reason == "cancelled" and stream.tokens == alone[i][: len(stream.tokens)]
            continue
        assert stream.tokens == alone[i], f"stream {i} ({stream.params})"
        assert stream.finish_reason == ("stop" if i == STOPPED else "length")


def test_a_stream_cancelled_while_its_prompt_prefills_frees_its_slot() -> None:
    """Prompts prefill 16 tokens per step (`prefill_chunk`): one cancelled after its first chunk is never fed
    again, and the stream beside it gets what it gets alone."""
    llm = _session("gemma3-tiny", "fp32", 3)
    prompts = _prompts("gemma3-tiny", "expected_fp32.json")
    long, short = prompts[2], prompts[3]
    alone = _alone(llm, [Stream(short, NEW_TOKENS)])[0]
    llm.reset()
    batch = llm.batch()
    leaving, staying = batch.add(Stream(long, NEW_TOKENS)), batch.add(Stream(short, NEW_TOKENS))
    batch.step()  # the long prompt's first chunk
    assert leaving.fed == 16 and not leaving.tokens
    leaving.cancel()
    batch.run()
    assert leaving.finish_reason == "cancelled" and leaving.fed == 16 and not leaving.tokens
    assert staying.tokens == alone and batch.slots.in_use == 0


@pytest.mark.parametrize(("directory", "precision", "expected_file"), LAYOUTS, ids=[d for d, *_ in LAYOUTS])
def test_short_prompts_arriving_together_prefill_in_one_run(
    directory: str, precision: str | None, expected_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four prompts of 5, 3, 4 and 2 tokens at once, a 16-token chunk: the first three prefill as one
    right-padded run (5 x 3 = 15 tokens), the fourth after; each stream equals itself alone."""
    llm = _session(directory, precision, 8)
    ids = expected(directory, expected_file)["prompts"][0]["prompt_ids"]
    prompts = [ids[:5], ids[1:4], ids[2:6], ids[:2]]
    streams = [Stream(p, NEW_TOKENS, _SAMPLED.get(i, SamplingParams())) for i, p in enumerate(prompts)]
    alone = _alone(llm, streams)
    llm.reset()
    batch = llm.batch()
    groups: list[int] = []
    prefill = batch._prefill
    monkeypatch.setattr(batch, "_prefill", lambda group: (groups.append(len(group)), prefill(group)))
    for stream in streams:
        batch.add(stream)
    batch.run()
    assert groups == [3, 1]
    assert [s.tokens for s in streams] == alone


def _over_kept_slots(
    directory: str, precision: str | None, prompts: list[list[int]], earlier: list[list[int]], mp: pytest.MonkeyPatch
) -> tuple[list[Stream], list[list[int]], Any, list[int]]:
    """Streams of `prompts` (their tokens alone first) and an 8-slot batch whose slots kept the `earlier`
    requests' tokens, its prefill runs' sizes recorded in the returned list as the streams are added."""
    llm = _session(directory, precision, 8)
    streams = [Stream(p, NEW_TOKENS, _SAMPLED.get(i, SamplingParams())) for i, p in enumerate(prompts)]
    alone = _alone(llm, streams)
    llm.reset()
    batch = llm.batch()
    for kept in earlier:
        batch.add(Stream(kept, 2))
    batch.run()
    groups: list[int] = []
    prefill = batch._prefill
    mp.setattr(batch, "_prefill", lambda group: (groups.append(len(group)), prefill(group)))
    return streams, alone, batch, groups


@pytest.mark.parametrize(("directory", "precision", "expected_file"), LAYOUTS, ids=[d for d, *_ in LAYOUTS])
def test_newcomers_over_kept_prefixes_of_different_lengths_prefill_in_one_run(
    directory: str, precision: str | None, expected_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three prompts arriving at once, two over slots that kept 3 and 2 of their tokens from earlier requests and
    one over none: continuation runs would need one run each; they give the prefixes up and prefill from the
    start in one run (5 x 3 = 15 tokens of a 16-token chunk), each equal to itself alone."""
    ids = expected(directory, expected_file)["prompts"][0]["prompt_ids"]
    # slots 0 and 1 keep ids[:3] and ids[1:3] (and what followed them)
    streams, alone, batch, groups = _over_kept_slots(
        directory, precision, [ids[:5], ids[1:5], ids[2:5]], [ids[:3], ids[1:3]], monkeypatch
    )
    given_up: list[int] = []  # the tokens each newcomer's slot kept, given up for the shared run
    forget = batch.slots.forget
    monkeypatch.setattr(batch.slots, "forget", lambda stream: (given_up.append(stream.cached), forget(stream)))
    for stream in streams:
        batch.add(stream)
    batch.run()
    assert given_up == [3, 2, 0] and groups == [3]
    assert [s.cached for s in streams] == [0, 0, 0]
    assert [s.tokens for s in streams] == alone


@pytest.mark.parametrize(("directory", "precision", "expected_file"), LAYOUTS, ids=[d for d, *_ in LAYOUTS])
def test_resent_prompts_over_kept_slots_of_different_lengths_ride_one_decode_run(
    directory: str, precision: str | None, expected_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three clients resend prompts of 6, 4 and 3 tokens that their slots kept whole (an earlier request's):
    each has one token left to prefill, a decode step's shape, so where decode rows may differ in length
    (`per_row_positions`) all three feed it in the first decode run (3 rows of one id, no prefill run), else
    a prefill run each; each equals itself alone."""
    ids = expected(directory, expected_file)["prompts"][0]["prompt_ids"]
    prompts = [ids[:6], ids[1:5], ids[2:5]]
    streams, alone, batch, groups = _over_kept_slots(directory, precision, prompts, prompts, monkeypatch)
    runs: list[tuple[int, int]] = []  # (rows, ids a row) of every run
    submit = batch._submit
    monkeypatch.setattr(
        batch,
        "_submit",
        lambda rows, fed, *a, **k: (runs.append((len(rows), len(fed[0]))), submit(rows, fed, *a, **k))[1],
    )
    for stream in streams:
        batch.add(stream)
    batch.run()
    assert [s.cached for s in streams] == [len(p) - 1 for p in prompts]
    if batch.per_row_positions:
        assert groups == [] and runs[0] == (3, 1)
    else:
        assert groups == [1, 1, 1]
    assert [s.tokens for s in streams] == alone
