"""Print the tally of bad inputs tried by the hardening tests (tests/clusteremu/badinput.py)."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.clusteremu.badinput import TALLY

    if not TALLY:
        return
    terminalreporter.section("bad inputs tried (all: exit 2, one error line, no traceback)")
    families = sorted({family for family, _ in TALLY})
    for family in families:
        kinds = {k: n for (f, k), n in TALLY.items() if f == family}
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        terminalreporter.write_line(f"{family:<10} {sum(kinds.values()):>4}  ({detail})")
    terminalreporter.write_line(f"{'total':<10} {sum(TALLY.values()):>4}")
