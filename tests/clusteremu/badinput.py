"""Drive the command line with bad input and check how it ends: exit status 2, one line on
stderr that starts with `error:`, no traceback, nothing printed whole (issue 11).

`refused(argv, family, kind)` runs `clusteremu.cli.main` in this process and tallies the
input under (command family, class of bad input); the tally is printed at the end of the
test session (tests/conftest.py), the count of bad inputs tried.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout

from clusteremu.cli import MAX_MESSAGE_CHARS, main

#: (command family, class of bad input) -> inputs tried, all of which ended as expected.
TALLY: Counter[tuple[str, str]] = Counter()


def refused(argv: Sequence[str], family: str, kind: str, expect: str | None = None) -> str:
    """Run `clusteremu ARGV`; assert exit 2 with one clear error line; return the line."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    text = err.getvalue()
    shown = f"clusteremu {' '.join(a[:80] for a in argv)}"[:400]
    assert code == 2, f"{shown}: exit {code}, stderr {text[-600:]!r}"
    assert "Traceback" not in text, f"{shown}: {text[-2000:]}"
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"{shown}: expected one line, got {lines[:5]!r}"
    line = lines[0]
    assert line.startswith("error: "), f"{shown}: {line[:300]!r}"
    assert len(line) <= MAX_MESSAGE_CHARS + 20, f"{shown}: a {len(line)}-character message"
    assert out.getvalue() == "", f"{shown}: printed {out.getvalue()[:200]!r} on stdout"
    if expect is not None:
        assert expect in line, f"{shown}: {expect!r} not in {line[:400]!r}"
    TALLY[(family, kind)] += 1
    return line
