"""Old scenario files still load: fields that moved are translated, with a warning.

- `migrate_policies(data, source)` calls the `migrate` hook
  (`clusteremu.cluster.policies.base.Policy.migrate`) of every registered policy the raw data
  names at `scheduler.<kind>.name`, before validation: each policy translates its own old
  parameters (the scoring placer's `pods`, `goodput`, `score_bounds`: its package,
  `clusteremu.cluster.policies.scoring.old_params`). A `MigrationError` becomes a
  `ScenarioError` naming the file.
- `warn_moved(source, old, new, see)` is the warning every translation gives: a
  `ScenarioDeprecationWarning` naming the file, the old field and the new one.

(The world model's old node labels are translated in `scenarios/world.py`.)
"""

from __future__ import annotations

import warnings
from typing import Any

from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import MigrationError, Policy
from clusteremu.scenarios.errors import ScenarioError, shorten


class ScenarioDeprecationWarning(FutureWarning):
    """A scenario uses a field that moved; it still works, translated (shown to users)."""


def warn_moved(
    source: str, old: str, new: str, see: str = "docs/scenarios.md", stacklevel: int = 2
) -> None:
    """Warn that scenario `source` wrote `old`, translated into `new` (see `see`).

    `stacklevel` counts from the caller of this function, as `warnings.warn`'s does.
    """
    warnings.warn(
        ScenarioDeprecationWarning(
            f"{source}: {old} is deprecated and was translated into {new}; "
            f"write the new field (see {see})"
        ),
        stacklevel=stacklevel + 1,
    )


class _LoaderMigration:
    """The loader's side of a policy's `migrate` hook (`base.Migration`) for one file."""

    def __init__(self, source: str) -> None:
        self.source = source

    def moved(self, old: str, new: str, see: str = "docs/scenarios.md") -> None:
        warn_moved(self.source, old, new, see, stacklevel=2)

    def shown(self, value: Any) -> str:
        return shorten(value)


def migrate_policies(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` (raw YAML data) with the old parameters of the policies it names translated by
    their `migrate` hooks: each class's hook once, in the order of `registry.KINDS`; a copy
    when anything changes. A name that is not a registered policy is left to validation."""
    if not isinstance(data, dict):
        return data  # validation reports it
    migration = _LoaderMigration(source)
    done: set[type[Policy]] = set()
    for kind in registry.KINDS:
        scheduler = data.get("scheduler")
        ref = scheduler.get(kind) if isinstance(scheduler, dict) else None
        name = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(name, str):
            continue
        try:
            cls = registry.policy_class(kind, name)
        except registry.UnknownPolicyError:
            continue  # validation names it
        if cls in done:  # a pair named at each of its points
            continue
        done.add(cls)
        try:
            data = cls.migrate(data, migration)
        except MigrationError as exc:
            raise ScenarioError(source, [(exc.field, exc.problem)]) from None
    return data


__all__ = ["ScenarioDeprecationWarning", "migrate_policies", "warn_moved"]
