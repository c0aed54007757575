"""Pydantic models and prompts for the structured-output tests (and `tools/structured_output_rate.py`): nested
objects, arrays, enums, bounded numbers, optional fields. Strings and arrays carry length bounds, as a client
that wants an answer within max_tokens writes them; numbers are bounded integers or bounded floats with a `multipleOf` (JSON has no digit limit: without one a
small model writes "0.0000..." until max_tokens)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["CASES", "DEMO_DIR", "PROMPTS", "SCHEMAS"]

DEMO_DIR = "fortune-gemma3"


class Mood(StrEnum):
    happy = "happy"
    sad = "sad"
    wise = "wise"


class Person(BaseModel):
    name: str = Field(max_length=16)
    age: int = Field(ge=0, le=120)


class Fortune(BaseModel):
    text: str = Field(max_length=40)
    mood: Mood
    lucky_number: int = Field(ge=1, le=99)


class Quote(BaseModel):
    quote: str = Field(max_length=40)
    author: Person


class Tags(BaseModel):
    tags: list[str] = Field(max_length=3)
    count: int = Field(ge=0, le=10)


class Weather(BaseModel):
    city: str = Field(max_length=12)
    celsius: float = Field(ge=-40, le=50, multiple_of=0.5)
    sky: Literal["clear", "cloudy", "rain"]


class Optional1(BaseModel):
    title: str = Field(max_length=20)
    subtitle: str | None = Field(default=None, max_length=20)
    rating: int | None = Field(default=None, ge=1, le=5)


class Point(BaseModel):
    x: int = Field(ge=-100, le=100)
    y: int = Field(ge=-100, le=100)


class Path(BaseModel):
    points: list[Point] = Field(min_length=1, max_length=3)
    closed: bool


class Team(BaseModel):
    name: str = Field(max_length=12)
    members: list[Person] = Field(max_length=2)
    mood: Mood | None = None


class Flags(BaseModel):
    yes: bool
    maybe: Literal["a", "b", "c"] | None = None
    score: float = Field(ge=0, le=1, multiple_of=0.01)


class Book(BaseModel):
    title: str = Field(max_length=24)
    year: int = Field(ge=1500, le=2030)
    genres: list[Literal["fiction", "poetry", "history"]] = Field(max_length=2)
    author: Person | None = None


SCHEMAS: list[type[BaseModel]] = [Person, Fortune, Quote, Tags, Weather, Optional1, Path, Team, Flags, Book]
PROMPTS = [
    "Tell me a fortune",
    "Who said that life is short?",
    "Describe the weather in Paris as JSON",
    "Give me a wise saying about love",
    "Answer in JSON: what is the meaning of life?",
]
CASES = [(schema, prompt) for schema in SCHEMAS for prompt in PROMPTS]  # 50
