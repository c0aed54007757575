"""Grammar-constrained decoding on the demo model (fortune-gemma3): constrained rows next to unconstrained
ones in one batch, each equal to the same request served alone; forced tokens fed in one run with the drawn id
and counted; host-sampled rows under the same mask; the mask back to all ones afterwards; bad constraints
refused before anything runs; `onyxia generate --json-schema / --regex / --grammar`."""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.lib._pydantic import to_strict_json_schema
from structured_cases import DEMO_DIR, Book, Person

from onyxia.cli.llm import LlmSession, SamplingParams
from onyxia.cli.llm.chat import chat_stop_ids
from onyxia.cli.llm.constraints import Constraint, lark_json
from onyxia.core import InputError

BOOK = Constraint.json_schema(to_strict_json_schema(Book))
PERSON = Constraint.json_schema(to_strict_json_schema(Person))
REGEX = Constraint.regex(r"[0-9]{2}-[a-z]{3,6}")
CHOICE = Constraint.choice(["heads", "tails"])


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmSession]:
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_DIR) as root:
        yield LlmSession.from_pretrained(root, max_length=256, slots=4)


def _ids(llm: LlmSession, text: str) -> list[int]:
    return llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat([{"role": "user", "content": text}]))


def test_constrained_rows_beside_unconstrained_ones_equal_each_alone(llm: LlmSession) -> None:
    """Greedy and GPU-sampled rows, constrained or not, in one batch: each row's ids equal the same request
    run alone (its draws depend only on its own logits, mask and seed)."""
    prompts = [_ids(llm, t) for t in ("Write a book", "Tell me a fortune", "Pick a code", "Flip a coin", "A person")]
    params = [
        SamplingParams(),
        SamplingParams(),
        SamplingParams(0.9, 20, seed=3),
        SamplingParams(),
        SamplingParams(0.8, seed=5),
    ]
    constraints = [BOOK, None, REGEX, CHOICE, PERSON]
    stops = chat_stop_ids(llm)
    together = llm.generate_batch(prompts, 60, params, stop=stops, constraint=constraints)
    for prompt, p, c, ids in zip(prompts, params, constraints, together):
        assert llm.generate_batch([prompt], 60, [p], stop=stops, constraint=[c]) == [ids]
    texts = [llm.tokenizer.decode(ids) for ids in together]
    Book.model_validate_json(texts[0])
    Person.model_validate_json(texts[4])
    assert re.fullmatch(r"[0-9]{2}-[a-z]{3,6}", texts[2]) and texts[3] in ("heads", "tails")


def test_generate_equals_the_batch_and_counts_forced_tokens(llm: LlmSession) -> None:
    """`generate(constraint=)` (slot 0, its own loop) gives the batch's ids; the schema's keys and punctuation
    are forced: delivered without a draw each, so the runs number the drawn tokens, not all of them."""
    prompt, stops = _ids(llm, "Write a book"), chat_stop_ids(llm)
    (expected,) = llm.generate_batch([prompt], 60, stop=stops, constraint=BOOK)
    llm.reset()
    runs = llm.executor.stats.runs
    ids = list(llm.generate_ids(prompt, 60, stop=stops, constraint=BOOK))
    assert ids == expected
    stats = llm.stats
    assert stats.new_tokens == len(ids) and stats.forced_tokens >= 5
    assert llm.executor.stats.runs - runs == len(ids) - stats.forced_tokens  # one run per drawn token
    batch = llm.batch()
    stream = batch.add(_stream(prompt, stops, BOOK))
    batch.run()
    assert stream.tokens == expected and stream.forced == stats.forced_tokens and stream.finish_reason == "stop"


def _stream(prompt: list[int], stops: list[int], constraint: Constraint | None) -> Any:
    from onyxia.cli.llm.batch import Stream

    return Stream(prompt, 60, SamplingParams(), stops, constraint=constraint)


def test_host_sampled_rows_follow_the_mask(llm: LlmSession) -> None:
    """Top-p, min-p, the penalties and a logit bias draw on the host from the logits row: the same mask applies
    there, and a bias of 100 on a token the grammar rules out does not bring it back."""
    prompt, stops = _ids(llm, "Pick a code"), chat_stop_ids(llm)
    outside = llm.tokenizer.encode("Z")[-1]
    host = [
        SamplingParams(1.0, top_p=0.9, seed=0),
        SamplingParams(1.0, min_p=0.1, seed=1),
        SamplingParams(logit_bias=((outside, 100.0),), frequency_penalty=1.0),
        SamplingParams(repetition_penalty=1.3),
    ]
    out = llm.generate_batch([prompt] * 4, 30, host, stop=stops, constraint=REGEX)
    for ids in out:
        assert re.fullmatch(r"[0-9]{2}-[a-z]{3,6}", llm.tokenizer.decode(ids)), llm.tokenizer.decode(ids)


def test_unconstrained_decoding_is_unchanged_after_a_constrained_one(llm: LlmSession) -> None:
    prompt = _ids(llm, "Tell me a fortune")
    before = llm.generate_batch([prompt, prompt], 20, stop=[])
    llm.generate_batch([prompt, prompt], 20, stop=[], constraint=[CHOICE, REGEX])
    assert llm.generate_batch([prompt, prompt], 20, stop=[]) == before
    llm.reset()
    alone = list(llm.generate_ids(prompt, 20))  # slot 0's pipelined decode, after a batch left masks resident
    llm.generate_batch([prompt], 20, stop=[], constraint=CHOICE)
    llm.reset()
    assert list(llm.generate_ids(prompt, 20)) == alone


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Constraint.json_schema({"type": "strin"}), "Invalid type"),
        (lambda: Constraint.regex("(ab"), "regex"),
        (lambda: Constraint.lark("start: nowhere"), "unknown name"),
        (lambda: Constraint.choice([]), "non-empty list"),
        (lambda: Constraint.json_schema([1]), "expected a JSON object"),  # type: ignore[arg-type]
    ],
    ids=["schema", "regex", "lark", "choice", "not-a-schema"],
)
def test_bad_constraints_are_refused_before_running(
    llm: LlmSession, make: Callable[[], Constraint], message: str
) -> None:
    runs = llm.executor.stats.runs
    with pytest.raises(InputError, match=message):
        llm.generate_batch([[2, 5]], 5, constraint=make())
    with pytest.raises(InputError, match=message):
        list(llm.generate([2, 5], 5, constraint=make()))
    assert llm.executor.stats.runs == runs


def test_generate_command_takes_a_schema_a_regex_or_a_grammar(cli: Callable[..., Any], tmp_path: Path) -> None:
    schema, grammar = tmp_path / "person.json", tmp_path / "answer.lark"
    schema.write_text(json.dumps(to_strict_json_schema(Person)))
    grammar.write_text('start: "Life is " WORD "."\nWORD: /[a-z]{1,12}/\n')
    common = ("generate", "--temperature", "0", "--max-new-tokens", "60", "--stats", "json")
    result = cli(*common, "--json-schema", str(schema))
    assert result.code == 0, result.err
    *text, stats = result.out.strip().splitlines()
    Person.model_validate_json("\n".join(text).removeprefix("Life is"))
    assert json.loads(stats)["forced_tokens"] > 0
    result = cli(*common, "--regex", "[0-9]{3}")
    assert result.code == 0 and re.fullmatch(r"Life is[0-9]{3}", result.out.splitlines()[0]), result.out
    result = cli(*common, "--grammar", str(grammar))
    assert result.code == 0 and re.fullmatch(r"Life isLife is [a-z]{1,12}\.", result.out.splitlines()[0]), result.out
    bad = cli(*common, "--regex", "(")
    assert bad.code == 2 and bad.out == "" and "llguidance rejects it" in bad.err and "Traceback" not in bad.err


def test_forced_feeds_and_gpu_masks_equal_a_host_reference_one_token_a_step(llm: LlmSession) -> None:
    """The reference: llguidance's own matcher and `apply_token_bitmask_inplace` on logits read back, each
    token (forced ones too) fed in a step of its own. Equal ids mean the GPU applied the same mask and a forced
    run of several tokens left the cache as feeding them one by one does."""
    import llguidance
    from llguidance.numpy import allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmask

    from onyxia.cli.llm.constraints import grammar_tokenizer

    prompt, stops, budget = _ids(llm, "Write a book"), chat_stop_ids(llm), 60
    llm.reset()
    ids = list(llm.generate_ids(prompt, budget, stop=stops, constraint=BOOK))
    assert llm.stats.forced_tokens > 0
    tokenizer = grammar_tokenizer(llm)
    matcher = llguidance.LLMatcher(tokenizer, BOOK.check(tokenizer))
    llm.reset()
    logits, reference = llm.next_token_logits(prompt), []
    while True:
        mask = allocate_token_bitmask(1, logits.size)
        fill_next_token_bitmask(matcher, mask)
        row = logits[None].copy()
        apply_token_bitmask_inplace(row, mask)
        token = int(row.argmax())
        reference.append(token)
        if token in stops or len(reference) == budget:
            break
        assert matcher.consume_token(token)
        forced = matcher.compute_ff_tokens()[: budget - len(reference)]
        assert matcher.consume_tokens(forced)
        reference += forced
        if matcher.is_stopped() or len(reference) == budget:
            break
        for fed in [token, *forced]:
            logits = llm.next_token_logits([fed])
    assert ids == reference


def test_a_lark_grammar_embedding_a_schema(llm: LlmSession) -> None:
    """What tool calling sends: a tag around a JSON schema (`lark_json`). The tag, the keys and the constant
    are forced; only the argument's value is drawn."""
    call = {
        "type": "object",
        "properties": {
            "name": {"const": "get_weather"},
            "arguments": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 10}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    grammar = Constraint.lark(f'start: "<tool_call>" call "</tool_call>"\ncall: {lark_json(call)}\n')
    llm.reset()
    text = "".join(llm.generate(_ids(llm, "Weather?"), 80, constraint=grammar, stop=chat_stop_ids(llm)))
    assert text.startswith("<tool_call>") and text.endswith("</tool_call>"), text
    parsed = json.loads(text.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert parsed["name"] == "get_weather" and len(parsed["arguments"]["city"]) <= 10
    assert llm.stats.forced_tokens > llm.stats.new_tokens / 2
