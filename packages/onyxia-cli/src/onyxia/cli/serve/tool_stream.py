"""A streamed answer with tools: content deltas while the text is prose, tool-call deltas at the end.

The reassembled stream must equal the whole answer (`ToolPlan.answer`), whose rule is global: calls
count only if everything from the first start marker on parses. So text before a possible call is sent
as it comes, except a tail that may be the beginning of a marker and trailing whitespace (dropped when a
call follows); from the marker on, text is held until the answer ends and is then parsed like the whole
answer: the calls go out as OpenAI's deltas (first index, id, type and name, then the arguments), or the
held text goes out as content. For a family whose call is the whole answer (Llama 3.x JSON), an answer
that starts with `{` is held.
"""

from __future__ import annotations

from onyxia.cli.serve.tool_calls import ToolPlan
from onyxia.cli.serve.tool_schemas import FunctionDelta, ToolCall, ToolCallDelta

__all__ = ["ToolStream", "call_deltas"]


class ToolStream:
    def __init__(self, plan: ToolPlan) -> None:
        self.plan = plan
        self._text = ""
        self._sent = 0  # characters of the text already sent as content
        self._held = False  # a call may have started: nothing more is sent before the end

    def push(self, piece: str) -> str:
        """The content now safe to send (possibly empty)."""
        self._text += piece
        if self._held:
            return ""
        limit = self._limit()
        out = self._text[self._sent : limit] if limit > self._sent else ""
        self._sent = max(self._sent, limit)
        return out

    def finish(self) -> tuple[str, list[ToolCall]]:
        """The content not sent yet and the calls, once the answer is complete."""
        content, calls = self.plan.answer(self._text)
        return (content or "")[self._sent :], calls

    def _limit(self) -> int:
        text, start = self._text, self.plan.syntax.start
        if not start:
            head = text.lstrip()
            self._held = head.startswith("{")
            return len(text) if head and not self._held else 0
        at = text.find(start)
        if at >= 0:
            self._held = True
            return len(text[:at].rstrip())
        return len(text[: len(text) - _overlap(text, start)].rstrip())


def call_deltas(calls: list[ToolCall]) -> list[ToolCallDelta]:
    """Each call as OpenAI streams it: a delta that opens it (index, id, type, name), one with the arguments."""
    deltas: list[ToolCallDelta] = []
    for index, call in enumerate(calls):
        opening = FunctionDelta(name=call.function.name, arguments="")
        deltas.append(ToolCallDelta(index=index, id=call.id, type="function", function=opening))
        deltas.append(ToolCallDelta(index=index, function=FunctionDelta(arguments=call.function.arguments)))
    return deltas


def _overlap(text: str, marker: str) -> int:
    """The length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0
