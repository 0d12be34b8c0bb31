"""The one error the scenario loader raises: which file, which field, what was expected."""

from __future__ import annotations

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
