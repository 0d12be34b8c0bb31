"""Checks of command-line options, one per kind of option, shared by every command.

Every command checks its options with these functions before any work is done (before a
scenario is run, a trace read or Ray started), so the same kind of option is refused the
same way everywhere: an `OptionError` whose message starts with the option, says what was
given and what was expected (`clusteremu.cli.main` prints it as one `error:` line, exit
status 2).

The kinds:

- `out_path`: an output path is not empty (`--out ''` used to run and write nothing);
- `seed` / `seeds`: seeds are non-negative integers below 2^63; a seed list (`N`, `A-B`,
  `A,B,...`) has no empty item and no seed twice, and its count is checked against memory
  before a range is expanded;
- `count`: a whole number in a range (sizes that only have a lower bound, or an upper
  bound with a stated reason);
- `fits_memory`: a size that multiplies into memory (runs, environments, experiments x
  evaluations, grid cells, replays) estimated against
  `clusteremu.scenarios.limits.memory_budget_bytes()`
  as a scenario's sizes are (tests pin that budget);
- `workers`: parallel worker processes: at least 1, and as many processes as the machine's
  memory holds when they run here (`BYTES_PER_WORKER` each); more workers than CPUs is
  allowed (Ray shares the CPUs) but said on stderr;
- `time_limit`: seconds, finite and positive, with an upper bound;
- `name_list`: a comma-separated list of names: no empty item, no name twice, every name
  known;
- `grid` / `grid_points`: a `--grid path=v1,v2,...` axis (no empty value, no value twice)
  and the number of grid points, each of which is a scenario validated before any run;
- `layer_sizes`: a network's hidden layer sizes.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from clusteremu.cluster.errors import UsageError
from clusteremu.cluster.io import cannot_write_in
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import shorten

#: The largest seed (numpy's generators take any non-negative integer; results store int64).
MAX_SEED = 2**63 - 1
#: Memory one worker process takes once it has imported the engine (bytes; a process that
#: ran a small mm-c run peaks at about 245 MB resident, 280 MB with Ray imported; rounded up).
BYTES_PER_WORKER = 300e6
#: Memory one tuning trial keeps until the search ends (bytes: a Ray Tune trial's object,
#: configuration and results in the driver, or an Optuna trial; rounded up).
BYTES_PER_TRIAL = 100e3
#: The most grid points (combinations of --grid values) a command takes: each is a scenario
#: loaded and validated before any run, about 8 ms apiece, so 100,000 take about 15 minutes.
MAX_GRID_POINTS = 100_000


class OptionError(UsageError, ValueError):
    """A command-line option is malformed; the message starts with the option (a
    `UsageError`: exit status 2)."""


def _first_repeat(items: Sequence[object]) -> object | None:
    """The first item that appears a second time (in one pass), None when all differ."""
    seen: set[object] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _shown(text: str) -> str:
    """An option's text as the message shows it: quoted, so that '' and ' ' are visible."""
    return shorten(text)


def out_path(value: str | None, flag: str = "--out") -> str | None:
    """`value` unchanged when it is None or names a path; OptionError for '' or blanks."""
    if value is not None and not value.strip():
        raise OptionError(f"{flag} {_shown(value)}: expected a path, got an empty one")
    if value is not None and "\0" in value:
        raise OptionError(f"{flag}: expected a path, got one with a NUL character")
    if value is not None:
        _can_write_near(value, flag)
    return value


def _can_write_near(value: str, flag: str) -> None:
    """OptionError when no file can be made where `value` points (its nearest folder that
    exists: itself, or the first existing one above it; `clusteremu.cluster.io.cannot_write_in`). A
    path under a file is left to the command's own checks."""
    path = Path(value).expanduser().absolute()
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        folder = folder.parent if folder == path else folder
        if not folder.is_dir():
            return
    reason = cannot_write_in(folder)
    if reason is not None:
        raise OptionError(
            f"{flag} {shorten(value, 200)}: cannot write there, {folder} is not writable "
            f"({reason}); expected a path in a writable folder"
        )


def seed(value: int | None, flag: str = "--seed") -> int | None:
    """`value` when it is None or a seed (0 <= seed <= MAX_SEED); else OptionError."""
    if value is not None and not 0 <= value <= MAX_SEED:
        raise OptionError(f"{flag}: expected a non-negative integer below 2^63, got {value}")
    return value


def seeds(
    text: str,
    flag: str = "--seeds",
    bytes_each: float = limits.BYTES_PER_CELL,
    what: str = "seeds",
) -> tuple[int, ...]:
    """`1-20`, `3` or `1,4,9` -> the seeds (a range includes both ends).

    Refused: an empty list or item (`''`, `1,,2`), a range that runs backwards, a negative
    seed, a seed given twice, and more seeds than fit in memory at `bytes_each` bytes each
    (counted before a range is expanded: `0-1000000000000` is refused at once).
    """
    shown = _shown(text)
    expected = "expected N, A-B (A <= B) or a comma list of non-negative integers"
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        item = part.strip()
        if not item:
            got = "an empty list" if not text.strip() else "an empty item"
            raise OptionError(f"{flag} {shown}: {expected}, got {got}")
        lo, sep, hi = item.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise OptionError(f"{flag} {shown}: {expected}, got {_shown(item)}") from None
        if b < a:
            raise OptionError(f"{flag} {shown}: {expected}; the range {item} runs backwards")
        if b > MAX_SEED:
            raise OptionError(f"{flag} {shown}: {expected} below 2^63")
        ranges.append((a, b))
    count = sum(b - a + 1 for a, b in ranges)
    refusal = limits.count_refusal(count, bytes_each, what)
    if refusal is not None:
        raise OptionError(f"{flag} {shown}: {refusal}")
    out = [s for a, b in ranges for s in range(a, b + 1)]
    twice = _first_repeat(out)
    if twice is not None:
        raise OptionError(f"{flag} {shown}: seeds must be distinct; {twice} is given twice")
    return tuple(out)


def count(
    value: int,
    flag: str,
    minimum: int = 1,
    maximum: int | None = None,
    reason: str = "",
) -> int:
    """`value` when minimum <= value <= maximum; else OptionError (with `reason` for the
    upper bound, e.g. 'the exact planner's limit')."""
    if value < minimum:
        raise OptionError(f"{flag}: expected at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        why = f" ({reason})" if reason else ""
        raise OptionError(f"{flag}: expected at most {maximum:,}{why}, got {value:,}")
    return value


def fits_memory(size: float, bytes_each: float, flag: str, what: str) -> None:
    """OptionError naming `flag` when `size` items of `bytes_each` bytes exceed the memory
    budget (`clusteremu.scenarios.limits.memory_budget_bytes()`); `what` names the items."""
    refusal = limits.count_refusal(size, bytes_each, what)
    if refusal is not None:
        raise OptionError(f"{flag}: {refusal}")


def workers(value: int, flag: str = "--workers", local: bool = True) -> int:
    """`value` when it is at least 1 and, for workers on this machine (`local`), when that
    many worker processes fit in memory; else OptionError.

    More local workers than CPUs is allowed (they share the CPUs; Ray runs them all) and
    said on stderr. On a cluster joined with `--address` only the lower bound applies: the
    cluster's own size is not known before Ray connects.
    """
    if value < 1:
        raise OptionError(f"{flag}: expected at least 1, got {value}")
    if not local:
        return value
    refusal = limits.count_refusal(value, BYTES_PER_WORKER, "worker processes")
    if refusal is not None:
        raise OptionError(f"{flag} {value}: {refusal}")
    cpus = os.cpu_count() or 1
    if value > cpus:
        print(
            f"warning: {flag} {value}: this machine has {cpus} CPUs; the {value} workers share "
            "them",
            file=sys.stderr,
        )
    return value


def time_limit(value: float, flag: str = "--time-limit", maximum: float = 86_400.0) -> float:
    """`value` seconds when finite and 0 < value <= maximum; else OptionError."""
    if not (math.isfinite(value) and 0.0 < value <= maximum):
        raise OptionError(f"{flag}: expected 0 < seconds <= {maximum:g}, got {value}")
    return value


def name_list(
    text: str, flag: str, known: Sequence[str], everything: str | None = None
) -> list[str]:
    """A comma-separated list of names from `known`, in the order given.

    Refused: an empty list or item (`fixed,,`), a name twice, an unknown name. With
    `everything` (e.g. 'all'), that word alone stands for every known name.
    """
    shown = _shown(text)
    if everything is not None and text.strip() == everything:
        return list(known)
    names = [n.strip() for n in text.split(",")]
    expected = f"expected a comma list of {', '.join(known)}"
    if everything is not None:
        expected += f", or {everything}"
    if any(not n for n in names):
        got = "an empty list" if not text.strip() else "an empty item"
        raise OptionError(f"{flag} {shown}: {expected}; got {got}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise OptionError(f"{flag}: unknown {', '.join(unknown)}; {expected}")
    twice = _first_repeat(names)
    if twice is not None:
        raise OptionError(f"{flag} {shown}: {twice} is given twice")
    return names


def layer_sizes(text: str, flag: str = "--net-arch") -> list[int]:
    """`512,512,512` -> [512, 512, 512]: one or more positive layer sizes."""
    try:
        sizes = [int(n) for n in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise OptionError(f"{flag} {_shown(text)}: expected positive layer sizes like 512,512,512")
    return sizes


def grid(text: str, flag: str = "--grid") -> tuple[str, tuple[str, ...]]:
    """`cluster.pools.0.cores=4,8,16` -> ('cluster.pools.0.cores', ('4', '8', '16')).

    Refused: no `=`, an empty path, an empty value (`=1,,2`), a value twice, more values
    than `MAX_GRID_POINTS`.
    """
    shown = _shown(text)
    path, sep, raw = text.partition("=")
    values = tuple(v.strip() for v in raw.split(","))
    if not sep or not path.strip() or not raw.strip():
        raise OptionError(f"{flag} {shown}: expected path.to.field=v1,v2,... with non-empty values")
    if any(not v for v in values):
        raise OptionError(f"{flag} {shown}: expected non-empty values; got an empty one")
    grid_points([len(values)], flag)
    twice = _first_repeat(values)
    if twice is not None:
        raise OptionError(f"{flag} {shown}: repeated values ({shorten(twice)} is given twice)")
    return path.strip(), values


def grid_points(sizes: Sequence[int], flag: str = "--grid") -> int:
    """The number of grid points of axes with these numbers of values; OptionError past
    `MAX_GRID_POINTS` (every point is validated before any run)."""
    points = math.prod(sizes)
    if points > MAX_GRID_POINTS:
        shape = " x ".join(f"{n:,}" for n in sizes)
        raise OptionError(
            f"{flag}: expected at most {MAX_GRID_POINTS:,} grid points (each is a scenario "
            f"validated before any run, about 8 ms apiece), got {points:,} ({shape})"
        )
    return points
