"""The soak test of `onyxia serve` (entry: tools/soak.py): mix (what is sent), client (sending one
request), server (starting it, reading /metrics and RSS), runner (the phases), report (the summary).
"""

__all__: list[str] = []
