"""Stop strings over streamed pieces: a stop split across pieces is still caught, nothing after it
(nor the stop) is sent, and text that only looked like the start of a stop is sent in the end."""

from __future__ import annotations

import pytest

from onyxia.cli.serve.stops import StopStrings

CASES = [
    # (pieces, stops, text sent, hit)
    (["Hello", " wor", "ld"], ["world"], "Hello ", True),
    (["Hel", "lo"], ["lo"], "Hel", True),
    (["a#", "#", "#b"], ["###"], "a", True),
    (["a#", "b#"], ["##"], "a#b#", False),  # held "#" released at the end
    (["abc"], ["c", "b"], "a", True),  # the earliest stop wins
    (["one", "two"], [], "onetwo", False),
    (["x", "yz", "zz"], ["", "zzz"], "xy", True),  # an empty stop is ignored
]


@pytest.mark.parametrize(("pieces", "stops", "sent", "hit"), CASES)
def test_stop_strings(pieces: list[str], stops: list[str], sent: str, hit: bool) -> None:
    matcher = StopStrings(stops)
    text = "".join(matcher.push(p) for p in pieces) + matcher.flush()
    assert (text, matcher.hit) == (sent, hit)
    if hit:
        assert matcher.push("more") == ""  # nothing after a stop
