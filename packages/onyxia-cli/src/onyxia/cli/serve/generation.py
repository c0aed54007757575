"""One job as a stream of the engine's batch: tokens become text deltas, stop strings end it.

KV reuse happens in the batch (`llm/batch.py`): a job takes the free slot whose cache shares the longest
prefix with its prompt and prefills only the rest, so a client that resends its whole conversation with one
more turn pays for that turn alone. At least one prompt token is always fed (its logits choose the first
new token). Since the last sampled token of an answer is never fed back, and a chat template may render an
earlier answer's text as other ids, the common prefix, not "everything cached", is what a request reuses.
Decoding drops special tokens, except those a request keeps (`keep_special`): a tool-call marker such as
Mistral's `[TOOL_CALLS]` is a special token, and the parser must see it.
"""

from __future__ import annotations

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.logprobs import TokenLogprob
from onyxia.cli.llm.parallel_samples import sample_params
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.cli.serve.jobs import Finished, Job, TextDelta
from onyxia.cli.serve.stops import StopStrings

__all__ = ["JobStream", "job_streams"]


class JobStream:
    """`job` on the batch: `stream` is what the batch steps; `finished()` is the job's last event."""

    def __init__(
        self, job: Job, tokenizer: TextTokenizer, index: int = 0, params: SamplingParams | None = None
    ) -> None:
        """`index`: the choice this stream answers (of the job's n samples), sampled by `params`."""
        request = job.request
        self.job, self.index = job, index
        self._tokenizer = tokenizer
        self._decoder = tokenizer.stream()
        self._stops = StopStrings(request.stop_strings)
        self.stream = Stream(
            request.prompt,
            request.max_tokens,
            params or request.params,
            sorted(request.stop_ids),
            on_token=self._token,
            constraint=request.constraint,
            logprobs=request.logprobs,
        )

    def _token(self, token: int) -> None:
        """Runs on the worker thread for each sampled id; a stop string ends the stream at the next step."""
        self.job.produced += 1
        if token in self.stream.stop or self._stops.hit:
            return
        special = self._tokenizer.special_text(token) if token in self.job.request.keep_special else None
        text = self._decoder.push(token) if special is None else self._decoder.flush() + special
        asked = self.stream.logprobs is not None
        self._send(self._stops.push(text), tuple(self.stream.token_logprobs[-1:]) if asked else ())
        if self._stops.hit:
            self.stream.cancel()

    def finished(self) -> Finished:
        stream = self.stream
        cancelled = stream.finish_reason == "cancelled" and not self._stops.hit
        if not cancelled:
            self._send(self._stops.push(self._decoder.flush()) + self._stops.flush())
        reason = "cancelled" if cancelled else "stop" if stream.finish_reason == "stop" or self._stops.hit else "length"
        first = stream.first_token_at
        return Finished(
            reason=reason,
            prompt_tokens=len(stream.prompt),
            cached_tokens=stream.cached,
            completion_tokens=len(stream.tokens),  # this sample's; a job of n sums them
            time_to_first_token=None if first is None else first - self.job.admitted,
            decode_tokens_per_second=stream.decode_tokens_per_second,
            index=self.index,
        )

    def _send(self, text: str, logprobs: tuple[TokenLogprob, ...] = ()) -> None:
        if text or logprobs:
            self.job.emit(TextDelta(text, self.index, logprobs))


def job_streams(job: Job, tokenizer: TextTokenizer) -> list[JobStream]:
    """The job's `n` samples, sample i seeded seed + i (`llm/parallel_samples.sample_params`)."""
    params = sample_params(job.request.params, job.request.n)
    return [JobStream(job, tokenizer, i, p) for i, p in enumerate(params)]
