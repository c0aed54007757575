"""`LlmSession.generate_batch`: whole prompts in, whole answers out, over a `Batch` stepped to the end (the
streaming, cancelling and arrivals-over-time API is `Batch` itself)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from onyxia.cli.llm.batch import Batch
from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.constraints import Constraint
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["generate_batch"]


def generate_batch(
    session: LlmSession,
    prompts: Sequence[str | Sequence[int]],
    max_new_tokens: int,
    params: SamplingParams | Sequence[SamplingParams],
    stop: Sequence[int] | None,
    constraint: Constraint | Sequence[Constraint | None] | None = None,
) -> list[list[int]]:
    """`LlmSession.generate_batch`: one stream per prompt, stepped until all finish."""
    many = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
    grammars = list(constraint) if isinstance(constraint, Sequence) else [constraint] * len(prompts)
    if len(many) != len(prompts) or len(grammars) != len(prompts):
        raise InputError(
            f"generate_batch(): {len(prompts)} prompts but {len(many)} sampling params and {len(grammars)} constraints"
        )
    stops = session.model_dir.eos_token_ids if stop is None else list(stop)
    batch = Batch(session)
    streams = [
        batch.add(
            Stream(session.tokenizer.encode(p) if isinstance(p, str) else p, max_new_tokens, sp, stops, constraint=c)
        )
        for p, sp, c in zip(prompts, many, grammars)
    ]
    batch.run()
    return [s.tokens for s in streams]
