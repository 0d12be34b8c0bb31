"""The one error the scenario loader raises: which file, which field, what was expected."""

from __future__ import annotations

import reprlib
from typing import Any


class ScenarioError(ValueError):
    """A scenario file (or an override) is not a valid scenario.

    `problems` lists (field path, what was expected) pairs; `str()` is one paragraph that
    names the file and every problem, ready to print for a user.
    """

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.message())

    def message(self) -> str:
        parts = [f"{field}: {expected}" if field else expected for field, expected in self.problems]
        return f"{self.source}: invalid scenario. " + "; ".join(parts) + "."

    def __str__(self) -> str:
        return self.message()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by the constructor's arguments, so the error crosses Ray tasks intact."""
        return (type(self), (self.source, list(self.problems)))


#: The most characters of a user's value quoted in an error message.
SHOWN_CHARS = 60

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = SHOWN_CHARS
_REPR.maxother = SHOWN_CHARS
_REPR.maxlong = 24


def shorten(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A short `repr` of a user's value for an error message: at most `limit` characters.

    A value can be as large as its input allows (an alias bomb, a pasted file); an error
    names it, never prints it whole (`reprlib` also bounds the work on nested values).
    """
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else repr(value[: max(limit - 3, 1)]) + "…"
    text = _REPR.repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def clip(text: str, limit: int = 300) -> str:
    """A message `text` cut to `limit` characters (marked with …)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
