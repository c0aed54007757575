"""Which newcomers of a `Batch` share a run: a prefill run together, or the decode run as one-token rows.

A run's rows must have the same number of ids (right-padded where the caches are empty) and, where positions
follow the shared past length alone (`Batch.per_row_positions` False), the same cached length. Each function
takes the streams still prefilling in admission order (the oldest first, so nobody is overtaken).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onyxia.cli.llm.batch_stream import Stream

if TYPE_CHECKING:
    from onyxia.cli.llm.batch import Batch

__all__ = ["one_token_riders", "prefill_group"]


def one_token_riders(batch: Batch, prefilling: list[Stream]) -> list[Stream]:
    """Newcomers with one prompt token left (a prompt its slot kept, a group of samples given its leader's
    prefix): a row of a decode step's shape, so they feed it in the decode run, each drawing its first token
    there, rather than in a run of their own before it. Where positions follow the shared past length alone,
    rows of other lengths cannot share a run: none."""
    if not batch.per_row_positions or not batch.session.step_dims.last_rows:
        return []
    end = batch.samples.prefill_end
    return [s for s in prefilling if s.fed == len(s.prompt) - 1 and end(s) == len(s.prompt)]


def prefill_group(batch: Batch, prefilling: list[Stream]) -> list[Stream]:
    """The oldest stream still prefilling, and with it (on a batched plan) the next ones whose slots hold as
    many tokens and whose remaining prompts all fit one chunk together, padded to the longest; or, when more
    of them fit one run so, the newcomers whose slots kept prefixes of different lengths, which give them up
    (`_fresh_group`)."""
    session, slots = batch.session, batch.slots
    first, chunk, end = prefilling[0], session.prefill_chunk, batch.samples.prefill_end
    group, longest = [first], len(first.prompt) - first.fed
    if not session.step_dims.last_rows or longest > chunk or end(first) < len(first.prompt):
        return group
    past = slots.length(first)
    for stream in prefilling[1:]:
        rest = len(stream.prompt) - stream.fed
        if end(stream) < len(stream.prompt):
            continue  # a leader prefilling its samples' shared prefix samples nothing yet
        wider = max(longest, rest)
        # padding only after an empty cache: GroupQueryAttention places a continuation's new tokens just
        # before its row's length, which padding would move (onnxruntime pads only first prompts)
        padded = wider != rest or wider != longest
        if slots.length(stream) == past and wider * (len(group) + 1) <= chunk and not (padded and past):
            group.append(stream)
            longest = wider
    fresh = _fresh_group(batch, prefilling)
    if len(fresh) <= len(group):
        return group
    for stream in fresh:  # one run for them all costs less than a run each for the prefixes' few tokens
        slots.forget(stream)
    return fresh


def _fresh_group(batch: Batch, prefilling: list[Stream]) -> list[Stream]:
    """The oldest stream and the next newcomers (nothing prefilled, less than all but the last token kept: a
    sample's copied prompt stays) whose whole prompts fit one chunk from empty caches, padded: over kept
    prefixes of different lengths (a shared chat template) they cannot share a continuation run."""
    chunk, end = batch.session.prefill_chunk, batch.samples.prefill_end
    fresh = [s for s in prefilling if s.fed == s.cached < len(s.prompt) - 1 and end(s) == len(s.prompt)]
    if not fresh or fresh[0] is not prefilling[0] or len(fresh[0].prompt) > chunk:
        return []  # the oldest goes first as it is
    group, longest = fresh[:1], len(fresh[0].prompt)
    for stream in fresh[1:]:
        wider = max(longest, len(stream.prompt))
        if wider * (len(group) + 1) <= chunk:
            group.append(stream)
            longest = wider
    return group
