"""The Python API raises the project's own errors, with the CLI's wording, before any GPU work."""

from __future__ import annotations

from typing import Any

import pytest
from llm_cases import session

from onyxia.cli.llm import SamplingParams
from onyxia.cli.llm.chat import Conversation
from onyxia.core import InputError, OnyxiaError

BAD_GENERATE = [
    ({"top_p": 2.0}, "top_p 2.0 (expected 0 < p <= 1)"),
    ({"temperature": float("nan")}, "temperature nan (expected a number >= 0)"),
    ({"temperature": -1.0}, "temperature -1.0"),
    ({"seed": -1}, "seed -1 (expected an integer >= 0)"),
    ({"top_k": -3}, "top_k -3 (expected an integer >= 0)"),
    ({"repetition_penalty": float("nan")}, "repetition_penalty nan"),
    ({"max_new_tokens": -5}, "max_new_tokens is -5; expected an integer >= 0"),
    ({"prompt": [2, 5000, 7]}, "token id 5000 is outside the vocabulary of 1024 tokens (ids are 0 to 1023)"),
    ({"prompt": [2, -1]}, "token id -1 is outside the vocabulary"),
    ({"prompt": "ab\udcffcd"}, "the prompt is not valid UTF-8 text (byte 0xff at character 2)"),
]


@pytest.mark.parametrize(("kwargs", "expected"), BAD_GENERATE, ids=[str(c[0]) for c in BAD_GENERATE])
def test_generate_raises_input_error_before_running(kwargs: dict[str, Any], expected: str) -> None:
    llm = session("gemma3-tiny-optimum", None)
    llm.reset()
    runs = llm.executor.stats.runs
    arguments = {"prompt": "Hello", "max_new_tokens": 4, **kwargs}
    with pytest.raises(InputError) as raised:
        list(llm.generate(**arguments))
    assert expected in str(raised.value)
    assert isinstance(raised.value, OnyxiaError)
    assert llm.executor.stats.runs == runs and llm.position == 0  # nothing uploaded or run


def test_out_of_vocabulary_ids_are_refused_by_every_entry_point() -> None:
    llm = session("gemma3-tiny-optimum", None)
    llm.reset()
    assert llm.vocab_size == 1024
    with pytest.raises(InputError, match="token id 1024 is outside the vocabulary of 1024 tokens"):
        llm.next_token_logits([2, 1024])
    with pytest.raises(InputError, match="token id 4096"):
        next(llm.generate_ids([4096], 2))
    with pytest.raises(InputError, match="max_new_tokens"):
        next(llm.generate_ids([2], -5, SamplingParams()))
    assert llm.position == 0


def test_conversation_refuses_an_overlong_turn_and_keeps_going() -> None:
    llm = session("gemma3-tiny-optimum", None)  # max_length 160
    chat = Conversation(llm, SamplingParams(), max_new_tokens=8)
    first = "".join(chat.say("hello"))
    with pytest.raises(InputError, match="more than max_length 160 leaves for an answer"):
        list(chat.say("word " * 400))
    assert [m["role"] for m in chat.messages] == ["user", "assistant"]  # the refused turn is forgotten
    for text in ["tell me " * 10] * 6:  # outgrows 160 tokens: old exchanges are dropped, not an error
        list(chat.say(text))
    assert chat.dropped > 0 and llm.position <= llm.max_length
    assert isinstance(first, str)
