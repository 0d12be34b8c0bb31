"""One progress convention for every long command, always on stderr (stdout keeps results):

* on a terminal, a tqdm bar, shown after a second;
* anywhere else (a log file, a pipe, CI), a line such as
  ``gpu-frag: 40% (24/60 replays), 12 s`` every `every_s` seconds -- 5 by default, or what
  the environment variable ``CLUSTEREMU_PROGRESS_S`` says (0: a line at every change) --
  the first only after that long, so short commands stay silent; and, when a line was
  printed, a last one (``gpu-frag: done in 51 s``) when the work ends.

`Progress` is callable with the fraction done (what `clusteremu.cluster.runner.run_spec` and the
engine report); `update(done=..., total=...)` takes counts; `say(text)` prints one line
at once (``mm-c: compiling the event loop (first run only)…``, see `compile_note`).
`progress(label, enabled)` is the context manager the commands use. Progress stays on
under `--json` (stdout then holds only the JSON); `enabled=False` shows nothing. Each
line is printed after flushing stdout, so in a log that holds both streams a command's
results and its progress lines are in the order they happened.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

#: Environment variable: seconds between progress lines off a terminal.
EVERY_ENV = "CLUSTEREMU_PROGRESS_S"
DEFAULT_EVERY_S = 5.0
#: Seconds before a bar appears on a terminal.
BAR_DELAY_S = 1.0


def every_s() -> float:
    """Seconds between lines off a terminal: $CLUSTEREMU_PROGRESS_S, else 5."""
    raw = os.environ.get(EVERY_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_EVERY_S
    return value if math.isfinite(value) and value >= 0 else DEFAULT_EVERY_S


class Progress:
    """The progress of one piece of work labelled `label` (see the module doc)."""

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "",
        enabled: bool = True,
        stream: IO[str] | None = None,
        terminal: bool | None = None,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = _isatty(self.stream) if terminal is None else terminal
        self.interval_s = every_s() if interval_s is None else interval_s
        self.clock = clock
        self.start = self.last = clock()
        self.fraction = 0.0
        self.done: int | None = None
        self.note = ""
        self.shown = ""  # the last line printed, less its seconds
        self.printed = False
        self.bar: Any = None

    def __call__(self, fraction: float) -> None:
        self.update(fraction)

    def update(
        self,
        fraction: float | None = None,
        *,
        done: int | None = None,
        total: int | None = None,
        note: str | None = None,
    ) -> None:
        """Record the fraction done, or `done` of `total` items, and an optional note."""
        if total is not None:
            self.total = total
        if done is not None:
            self.done = done
            if fraction is None:
                fraction = done / self.total if self.total else 0.0
        if fraction is not None:
            self.fraction = min(max(float(fraction), 0.0), 1.0)
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        if self.terminal:
            self._draw()
            return
        now = self.clock()
        if now - self.last < self.interval_s:
            return
        text = self._text()
        if text != self.shown:
            self.shown = text
            self.last = now
            self._print(f"{text}, {now - self.start:.0f} s")

    def say(self, text: str) -> None:
        """Print `LABEL: TEXT` at once (not held back by the interval): a phase that
        reports no fraction, such as compiling, announced before it starts."""
        if not self.enabled:
            return
        line = f"{self.label}: {text}"
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self, finished: bool = True) -> None:
        """End the bar; off a terminal, a last line when any was printed (and the work
        `finished`: an interrupted command says so itself)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.printed and finished:
            self._print(f"{self.label}: done in {self.clock() - self.start:.0f} s")
            self.printed = False

    def __getstate__(self) -> dict[str, Any]:
        # Ray Tune pickles its searcher, callbacks and all (checkpoints): a copy writes to
        # its own process's stderr and draws its own bar.
        state = dict(self.__dict__)
        state["stream"] = state["bar"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.stream = sys.stderr

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        self.close(finished=kind is None)

    # -- drawing -------------------------------------------------------------------------

    def _counts(self) -> str:
        if self.done is None or not self.total:
            return ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.done}/{self.total}{unit}"

    def _text(self) -> str:
        extra = ", ".join(x for x in (self._counts(), self.note) if x)
        return f"{self.label}: {100 * self.fraction:.0f}%" + (f" ({extra})" if extra else "")

    def _print(self, line: str) -> None:
        _flush_stdout()
        print(line, file=self.stream, flush=True)
        self.printed = True

    def _draw(self) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(
                total=1000,
                desc=self.label,
                delay=BAR_DELAY_S,
                file=self.stream,
                leave=False,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}",
            )
        extra = ", ".join(x for x in (self._counts(), self.note) if x)
        if extra:
            self.bar.set_postfix_str(extra, refresh=False)
        self.bar.n = int(1000 * self.fraction)
        if self.clock() - self.start >= BAR_DELAY_S:  # refresh() would ignore tqdm's delay
            self.bar.refresh()


def _flush_stdout() -> None:
    """Flush stdout before a progress line, so results printed earlier come first."""
    with suppress(AttributeError, OSError, ValueError):  # closed, or the reader went away
        sys.stdout.flush()


#: The note printed before a run whose event loop numba has not compiled yet.
COMPILE_NOTE = "compiling the event loop (first run only; cached in {folder})…"


def numba_cache_dir() -> Path:
    """The folder numba caches the compiled event loop in (set by `cluster`)."""
    import numba

    import clusteremu.cluster  # noqa: F401 - sets numba's cache folder

    return Path(getattr(numba.config, "CACHE_DIR"))  # noqa: B009 - not in numba's stubs


def compile_note() -> str:
    """`COMPILE_NOTE` when the cache holds no compiled event loop (a fresh install, or
    the kernel's sources changed): the next run compiles for minutes before its first
    progress. "" when the loop is cached."""
    folder = numba_cache_dir()
    try:
        cached = next(folder.rglob("kernel.run_kernel_*.nbi"), None) is not None
    except OSError:
        cached = False
    return "" if cached else COMPILE_NOTE.format(folder=folder)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress(
    label: str, enabled: bool = True, *, total: int | None = None, unit: str = ""
) -> Iterator[Progress]:
    """A `Progress` on stderr for the `with` block (closed at its end)."""
    with Progress(label, total=total, unit=unit, enabled=enabled) as shown:
        yield shown
