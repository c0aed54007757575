"""What the soak test sends: a seeded pool of distinct valid requests, and a mixed plan drawn over it.

The pool is the unit of correctness: each spec's answer is computed alone first (`reference.py`) and
every completed answer to it in the mixed phase must equal that one. Prompts come from a fixed word
list through `random.Random(seed)`, so one seed gives the same requests on every machine. Families:
short, long, sharing one long prefix (the server's prefix reuse, and later a shared-prefix cache,
must not leak one request's cache into another's answer), and multi-turn chats. Sampling is greedy
or seeded (temperature > 0 with a seed): both must be reproducible whatever runs beside them; some add top-k,
top-p, min-p, or OpenAI's penalties and a logit bias, which the host draws beside rows the GPU samples.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["BAD_KINDS", "CHAT", "COMPLETIONS", "KINDS", "Planned", "Spec", "make_plan", "make_specs"]

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"

# kind: (weight, what the client does). Weights sum to 1.
KINDS: dict[str, tuple[float, str]] = {
    "answer": (0.33, "a whole (non-streamed) answer"),
    "stream": (0.33, "a streamed answer read to [DONE]"),
    "cancel": (0.10, "a stream the client closes after k chunks"),
    "disconnect": (0.08, "a raw connection aborted mid-upload, after sending, or while reading"),
    "unknown-model": (0.05, "a valid request naming a model the server does not serve"),
    "bad-json": (0.04, "a body that is not JSON"),
    "bad-max-tokens": (0.04, "max_tokens -1"),
    "too-long": (0.03, "a prompt longer than any max_length"),
}
BAD_KINDS = frozenset({"bad-json", "bad-max-tokens", "too-long"})
DISCONNECTS = ("upload", "sent", "reading")

_VOCABULARY = (
    "the a river stone light garden winter morning letter window quiet music over under across near far old "
    "new bright dark small large silver copper paper bridge road city forest mountain harbor lantern clock "
    "story song remember answer explain describe imagine write count list compare why how what when where "
    "because while after"
)
_WORDS = _VOCABULARY.split()
_QUESTIONS = (
    "What comes next?",
    "Summarize this.",
    "Name three colors.",
    "Continue the story.",
    "Why is the sky blue?",
    "Count to five.",
)
_MAX_TOKENS = (1, 2, 5, 8, 16, 24, 32, 48, 64, 96, 128)


@dataclass(frozen=True)
class Spec:
    """One distinct valid request: its endpoint and body (no `model`, no `stream`)."""

    index: int
    endpoint: str
    family: str  # short | long | prefix | multi-turn
    body_json: str  # the body as canonical JSON: specs are hashable and print the same everywhere

    @property
    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.body_json)
        return body

    @property
    def api(self) -> str:
        return "chat" if self.endpoint == CHAT else "text"


@dataclass(frozen=True)
class Planned:
    """One request of the mixed phase."""

    number: int
    kind: str
    spec: Spec  # the request it is (valid kinds) or is made from (bad kinds: same endpoint, body broken)
    stream: bool
    include_usage: bool = False
    cancel_after: int = 0  # cancel: chunks read before closing the stream
    disconnect: str = ""  # disconnect: upload | sent | reading (see DISCONNECTS)

    @property
    def label(self) -> str:
        return f"{self.spec.api} {self.kind}"


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _prompt(rng: random.Random, family: str, prefix: str, long_words: int) -> list[tuple[str, str]]:
    """(role, text) turns; a completion prompt is the turns' texts joined."""
    if family == "short":
        return [("user", _words(rng, rng.randint(2, 8)))]
    if family == "long":
        return [("user", _words(rng, rng.randint(long_words // 2, long_words)))]
    if family == "prefix":
        return [("user", f"{prefix} {rng.choice(_QUESTIONS)}")]
    turns = [("user", _words(rng, rng.randint(3, 12))), ("assistant", _words(rng, rng.randint(3, 12)))]
    if rng.random() < 0.5:
        turns += [("user", _words(rng, rng.randint(3, 12))), ("assistant", _words(rng, rng.randint(3, 12)))]
    if rng.random() < 0.3:
        turns.insert(0, ("system", _words(rng, rng.randint(4, 10))))
    return [*turns, ("user", rng.choice(_QUESTIONS))]


def _sampling(rng: random.Random) -> dict[str, Any]:
    params: dict[str, Any] = {"max_tokens": rng.choice(_MAX_TOKENS)}
    if rng.random() < 0.5:
        params["temperature"] = 0
    else:
        params |= {"temperature": rng.choice((0.5, 0.8, 1.0, 1.3)), "seed": rng.randrange(2**31)}
        if rng.random() < 0.5:
            params["top_k"] = rng.choice((5, 40))
        if rng.random() < 0.3:
            params["top_p"] = 0.9
        if rng.random() < 0.15:
            params["min_p"] = 0.05
    if rng.random() < 0.15:  # OpenAI's penalties and a logit bias: drawn on the host, beside GPU-sampled rows
        params |= {"presence_penalty": 0.5, "frequency_penalty": 0.3, "logit_bias": {str(rng.randrange(3, 500)): 5}}
    if rng.random() < 0.25:
        params["ignore_eos"] = True  # runs to max_tokens: long generations whatever the model says
    return params


def make_specs(count: int, seed: int, long_words: int) -> list[Spec]:
    """`count` distinct valid requests (duplicates drawn by chance are dropped, so maybe fewer)."""
    rng = random.Random(seed)
    prefix = _words(rng, long_words)
    seen: set[tuple[str, str]] = set()
    specs: list[Spec] = []
    for _ in range(count):
        endpoint = rng.choice((CHAT, COMPLETIONS))
        family = rng.choices(("short", "long", "prefix", "multi-turn"), (0.35, 0.2, 0.25, 0.2))[0]
        turns = _prompt(rng, family, prefix, long_words)
        if endpoint == CHAT:
            body: dict[str, Any] = {"messages": [{"role": r, "content": t} for r, t in turns]}
        else:
            body = {"prompt": "\n".join(t for _, t in turns)}
        body |= _sampling(rng)
        key = (endpoint, json.dumps(body, sort_keys=True))
        if key not in seen:
            seen.add(key)
            specs.append(Spec(len(specs), endpoint, family, key[1]))
    return specs


def make_plan(specs: list[Spec], requests: int, seed: int) -> list[Planned]:
    rng = random.Random(seed + 1)
    names, weights = list(KINDS), [w for w, _ in KINDS.values()]
    plan = []
    for number in range(requests):
        kind = rng.choices(names, weights)[0]
        spec = rng.choice(specs)
        stream = kind in ("stream", "cancel") or (kind not in ("answer",) and rng.random() < 0.5)
        plan.append(
            Planned(
                number,
                kind,
                spec,
                stream,
                include_usage=stream and rng.random() < 0.5,
                cancel_after=rng.randint(1, 6) if kind == "cancel" else 0,
                disconnect=rng.choice(DISCONNECTS) if kind == "disconnect" else "",
            )
        )
    return plan
