"""One LlmSession, several callers: a generation holds the session until it finishes or is closed. A
second generator (interleaved in one thread, or from another thread) gets `SessionBusyError` and
never mixes its tokens into the first one's cache; whoever runs gets the single-caller result."""

from __future__ import annotations

import threading

import pytest
from llm_cases import session

from onyxia.cli.llm.session import LlmSession, SessionBusyError
from onyxia.core import OnyxiaError

PROMPT = "The cache holds"


def _greedy(s: LlmSession, tokens: int = 12) -> str:
    s.reset()
    return "".join(s.generate(PROMPT, max_new_tokens=tokens))


def test_an_interleaved_second_generator_is_refused_and_the_first_is_unharmed() -> None:
    s = session("gemma3-tiny", "fp32")
    alone = _greedy(s)
    s.reset()
    first = s.generate(PROMPT, max_new_tokens=12)
    pieces = [next(first)]
    second = s.generate("Another prompt", max_new_tokens=4)
    with pytest.raises(SessionBusyError, match="this session is generating"):
        next(second)
    with pytest.raises(SessionBusyError):
        s.reset()
    pieces += list(first)
    assert "".join(pieces) == alone
    assert issubclass(SessionBusyError, OnyxiaError)
    assert _greedy(s) == alone  # closed generators free the session


def test_two_threads_generating_on_one_session() -> None:
    s = session("gemma3-tiny", "fp32")
    alone = _greedy(s)
    # a thread descheduled between its reset() and generate() may start after another whole generation:
    # then it continues that conversation, exactly as one caller doing the same would
    continued = "".join(s.generate(PROMPT, max_new_tokens=12))
    s.reset()
    outcomes: list[str | BaseException] = []
    start = threading.Barrier(2)

    def work() -> None:
        start.wait()
        for _ in range(5):
            try:
                outcomes.append(_greedy(s))
            except SessionBusyError as e:
                outcomes.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(outcomes) == 10
    finished = [o for o in outcomes if isinstance(o, str)]
    assert finished and all(o in (alone, continued) for o in finished), outcomes
    assert all(isinstance(o, (str, SessionBusyError)) for o in outcomes)
