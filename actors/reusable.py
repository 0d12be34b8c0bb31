"""`Reusable`: what lets an `ActorSet` reuse an actor for the next replication."""

from __future__ import annotations

from typing import Any


class Reusable:
    """Mixin for actor classes: `reset` re-runs `__init__` with new arguments, keeping the
    actor process and its loaded code (imports, the compiled kernel from numba's cache)."""

    def reset(self, *args: Any, **kwargs: Any) -> None:
        """Start over with new arguments (as `__init__` takes them)."""
        self.__init__(*args, **kwargs)  # type: ignore[misc]
