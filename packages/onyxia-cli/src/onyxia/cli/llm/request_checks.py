"""What every generation request is checked for before it runs, one implementation for `LlmSession.generate`
(one conversation on slot 0) and `Batch.add` (a sequence in a slot of its own): a bad request fails when it
is made, with the parameter and the limit named, never inside a step with other rows in flight."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from onyxia.cli.llm.sampling import SamplingParams
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["checked_request"]


def checked_request(
    session: LlmSession,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    params: SamplingParams,
    cached: int | None = None,
) -> list[int]:
    """The prompt as checked token ids. `cached`: tokens the conversation's cache already holds (its prompt
    appends to them); None for a batch sequence, whose `max_length` is its own slot's."""
    params.validate()
    n = max_new_tokens
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InputError(f"generate(): max_new_tokens is {n!r}; expected an integer >= 0")
    prompt = session._token_ids(prompt_ids)
    if params.logit_bias:
        try:
            session._token_ids([token for token, _ in params.logit_bias])
        except InputError as e:
            raise InputError(f"generate(): logit_bias: {e}") from None
    if not prompt:
        raise InputError("generate(): the prompt has no tokens")
    if (cached or 0) + len(prompt) + n > session.max_length:
        if cached is None:
            raise InputError(
                f"generate(): {len(prompt)} prompt + {n} new tokens exceed max_length {session.max_length} "
                "(per sequence); shorten the prompt or raise max_length"
            )
        raise InputError(
            f"generate(): {cached} cached + {len(prompt)} prompt + {n} new tokens exceed max_length "
            f"{session.max_length}; start a new conversation or raise max_length"
        )
    return prompt
