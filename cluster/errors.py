"""`UsageError`: what a user gave (an option, a file, an address) cannot be used. Raised
before any work by every layer that checks input (the CLI, `clusteremu.actors.launch`, the option
checks); `clusteremu` prints its message and exits with status 2."""

from __future__ import annotations


class UsageError(Exception):
    """A command-line option or input is malformed or unusable (exit status 2)."""
