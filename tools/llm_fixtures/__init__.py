"""Regenerates Onyxia's tiny random-weight LLM fixtures with the real exporters (see README.md)."""

__all__: list[str] = []
