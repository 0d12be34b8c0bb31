"""File output: atomic files, and output folders whose files are written together.

Every file is written to a temporary file in its folder, then renamed over the target, so
a reader never sees a truncated table or summary. Files get the user's normal permissions
(0666 less the umask), not the 0600 of a temporary file.

A command's results (a run's `jobs.parquet` and `summary.json`, ...) are written with
`output_folder`: first into a staging folder inside the output folder, then moved in
together while SIGINT and SIGTERM are held, and a manifest (`clusteremu-manifest.json`,
naming the command, the files and a run id) is written last. An interrupted command leaves
the previous results in place, never a mix of two runs; a folder without a manifest but
with result files was written by an older version (or cut by SIGKILL mid-move).
`check_output_folder` refuses, before any work, a path that cannot take the files (a file,
a path under a file, a folder without write permission, an immutable file, a result name
that is a folder) or a folder that holds another command's results. Staging folders and
temporary files of processes that no longer exist are removed when a folder is next
written.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: The manifest written last into an output folder: which command, which files, which run.
MANIFEST = "clusteremu-manifest.json"
#: Prefix of the staging folders inside an output folder (followed by the writer's pid).
STAGE_PREFIX = ".clusteremu-stage-"
#: The files (or folders) each command writes into its output folder. A folder holding one
#: command's files is refused to another (a run's summary.json is not a learner's).
COMMAND_FILES: dict[str, tuple[str, ...]] = {
    "run": ("jobs.parquet", "summary.json"),
    "compare": ("compare.png", "compare.json"),
    "compare --grid": ("compare-grid.json", "convergence.png", "heuristics.png"),
    "learn": ("estimates.parquet", "estimates.png", "summary.json"),
    "sweep": ("sweep.json", "runs"),
    "dashboard": ("clusteremu_grafana_dashboard.json",),
    "provision train": ("sizing.json", "profile.parquet"),
    "gpu-frag": ("gpu-frag.parquet", "gpu-frag.json", "gpu-frag.png"),
    "tune": ("tune.json", "experiments.parquet", "tune.png", "placer.yaml", "trials"),
    "synthesize": ("tree.json", "report.json", "examples"),
    # (and jobs.parquet, which `run` claims: `import` names it when it checks its folder)
    "import": ("scenario.yaml", "nodes.parquet", "import-report.json", "load.png"),
    "provision compare": (
        "provision-compare.json",
        "provision-compare.parquet",
        "provision-compare.png",
    ),
}
#: The files that identify a command's folder when it has no manifest (default: its files
#: that no other command writes); a `runs` folder alone is too common a name to claim.
_MARKERS: dict[str, tuple[str, ...]] = {
    "sweep": ("sweep.json",),
    "tune": ("tune.json",),
    "synthesize": ("tree.json", "report.json"),
    "import": ("import-report.json",),
}
#: Results that are folders by design (a sweep's cells, Ray Tune's trials, a synthesis's
#: examples): a file of that name is refused, an existing folder is replaced or resumed.
RESULT_FOLDERS = frozenset({"runs", "trials", "examples"})
#: Errors of the file system while writing (disk full, quota, file too large, read-only):
#: whatever was being written, the output cannot be written.
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
#: Temporary files of `_atomic`: `.<name>.<pid>.<random>.tmp`.
_TMP_FILE = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]+\.tmp$")
_STAGE_DIR = re.compile(rf"^{re.escape(STAGE_PREFIX)}(\d+)-[A-Za-z0-9_]+$")
#: Linux inode flags that forbid replacing a file (chattr +i, +a), read by FS_IOC_GETFLAGS.
_FS_IOC_GETFLAGS = 0x80086601
_LOCKED_FLAGS = 0x10 | 0x20


class OutputError(ValueError):
    """An output path cannot take a command's files; the message names it and why."""


# --- permissions and atomic files ----------------------------------------------------------


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # not on Linux: read it by setting it (and put it back)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a newly created file gets: 0666 less the umask."""
    return 0o666 & ~_umask()


def _atomic(path: Path, write: Callable[[str], None]) -> None:
    with atomic_path(path) as tmp:
        write(tmp)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[str]:
    """A temporary file next to `path` (`.<name>.<pid>.<random>.tmp`) to write, renamed
    over `path` when the block ends without an error (removed on an error): a reader never
    sees a partial file, and one a killed process left is removed when its folder is
    next written (`remove_stale`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_parquet(table: pa.Table, path: str | Path) -> None:
    """Write an Arrow table to Parquet atomically (deterministic bytes for equal tables)."""
    _atomic(Path(path), lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


#: How a number that has no meaning for a run (NaN: a zero-length measurement window, no
#: measured job, an interval from one sample) is printed; JSON writes it as null.
NOT_APPLICABLE = "n/a"


def number_text(value: Any, spec: str = ".6g") -> str:
    """`value` formatted with `spec`, or `n/a` for NaN and None (no meaning for the run);
    anything else that is not a number is `str(value)`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_APPLICABLE
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def to_json(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, sort_keys=False)


def write_json(data: Any, path: str | Path) -> None:
    """Write JSON atomically (NaN and infinity become null)."""
    text = to_json(data) + "\n"

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    _atomic(Path(path), write)


def write_text(text: str, path: str | Path) -> None:
    """Write a text file atomically."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    _atomic(Path(path), write)


# --- checking an output path before the work ------------------------------------------------


def _is_locked(path: Path) -> bool:
    """Whether a file is immutable or append-only (it cannot be replaced, even by root)."""
    try:
        import array
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (ImportError, OSError):
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags)
        return bool(flags[0] & _LOCKED_FLAGS)
    except OSError:
        return False
    finally:
        os.close(fd)


def cannot_write_in(folder: Path) -> str | None:
    """Why no file can be made in the existing `folder` (None when one can): found by making
    and removing an empty file there, since permission bits do not tell (root may "write"
    to /proc by them, and an immutable folder passes `os.access`)."""

    try:
        fd, probe = tempfile.mkstemp(prefix=".clusteremu-probe-", dir=folder)
    except OSError as exc:
        return os.strerror(exc.errno) if exc.errno is not None else str(exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _writable_folder(folder: Path) -> bool:
    return cannot_write_in(folder) is None


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of an output folder, or None (absent or not a manifest)."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("command"), str) else None


def owner_of(folder: Path) -> str | None:
    """The command whose results `folder` holds: its manifest's, else recognised by file
    names (a folder written before manifests); None for a folder without results."""
    manifest = read_manifest(folder)
    if manifest is not None:
        return str(manifest["command"])
    present = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    for command, files in COMMAND_FILES.items():
        markers = set(_MARKERS.get(command, files))
        unique = markers - {f for c, fs in COMMAND_FILES.items() if c != command for f in fs}
        if unique & present:
            return command
    return None


def check_output_folder(
    path: str | Path, command: str, files: Sequence[str] | None = None, option: str = "--out"
) -> Path:
    """Raise OutputError unless `path` can take `command`'s files; create nothing (a probe
    file made to test the folder is removed at once).

    `path` must be a folder or a path that can become one (not a file, not under a file,
    in a writable place); an existing result file must be replaceable (not a folder, not
    immutable); the folder must not hold another command's results.
    """
    out = Path(path)
    names = tuple(files if files is not None else COMMAND_FILES[command])
    shown = str(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{option} {shown}: is a file; expected a folder (or a new path)")
    if not out.exists():
        ancestor = out.absolute().parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputError(
                f"{option} {shown}: {ancestor} is a file, so no folder can be made under it"
            )
        if not _writable_folder(ancestor):
            raise OutputError(
                f"{option} {shown}: cannot create it, {ancestor} is not writable "
                "(permissions, a read-only file system or an immutable folder)"
            )
        return out
    if not _writable_folder(out):
        raise OutputError(
            f"{option} {shown}: the folder is not writable "
            "(permissions, a read-only file system or an immutable folder)"
        )
    for name in names:
        target = out / name
        if name in RESULT_FOLDERS:  # a folder by design, replaced or resumed
            if target.exists() and not target.is_dir():
                raise OutputError(f"{option} {shown}: {target} is a file; expected a folder")
            continue
        if target.is_dir():
            raise OutputError(
                f"{option} {shown}: {target} is a folder, so the {name} result cannot be "
                "written; remove it or use another folder"
            )
        if target.exists() and _is_locked(target):
            raise OutputError(f"{option} {shown}: {target} is immutable and cannot be replaced")
    owner = owner_of(out)
    if owner is not None and owner != command:
        held = ", ".join(n for n in COMMAND_FILES.get(owner, ()) if (out / n).exists())
        raise OutputError(
            f"{option} {shown}: the folder holds the results of `clusteremu {owner}`"
            + (f" ({held})" if held else "")
            + f"; use another folder for `clusteremu {command}` (or remove them)"
        )
    return out


def check_output_file(path: str | Path, command: str, option: str = "--out") -> Path:
    """Raise OutputError unless `path` can take one result file of `command` written on
    its own (atomically, with no manifest: the file claims itself, not its folder); create
    nothing. `path` must not be a folder, its folder must be able to take a file (as in
    `check_output_folder`), and it must not be one of the files another command's results
    in that folder are made of (its manifest's, or the command's usual names)."""
    out = Path(path)
    if out.is_dir():
        raise OutputError(f"{option} {out}: is a folder; expected a file name")
    folder = out.parent
    owner = owner_of(folder) if folder.is_dir() else None
    if owner is not None and owner != command:
        manifest = read_manifest(folder)
        files = manifest.get("files") if manifest is not None else None
        claimed = set(files) if isinstance(files, list) else set(COMMAND_FILES.get(owner, ()))
        if out.name in claimed:
            raise OutputError(
                f"{option} {out}: is one of the results of `clusteremu {owner}` in {folder}; "
                "use another name"
            )
    # the folder's own checks; its results (if any) are another command's, left alone
    check_output_folder(folder, owner or command, [out.name], option)
    return out


# --- writing an output folder -----------------------------------------------------------


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(folder: Path) -> list[Path]:
    """Remove staging folders and temporary files left by processes that no longer exist."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        stage = _STAGE_DIR.match(entry.name)
        tmp = _TMP_FILE.match(entry.name)
        match = stage or tmp
        if match is None or _alive(int(match.group(1))):
            continue
        with suppress(OSError):
            if stage is not None and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif tmp is not None and entry.is_file():
                entry.unlink()
            else:
                continue
            removed.append(entry)
    return removed


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the duration (delivered on exit): a short section that
    must not be cut in the middle. Only in the main thread (elsewhere, no effect)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        caught.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


def _commit(stage: Path, out: Path, command: str, label: str) -> list[Path]:
    produced = sorted(p.name for p in stage.iterdir() if not p.name.startswith("."))
    manifest = {
        "command": command,
        "label": label,
        "run_id": uuid.uuid4().hex,
        "written_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": produced,
    }
    text = to_json(manifest) + "\n"
    with signals_held():
        with suppress(FileNotFoundError):
            (out / MANIFEST).unlink()
        for name in produced:
            if (out / name).is_dir() and not (out / name).is_symlink():
                # a result folder (Ray Tune's trials) cannot be renamed over: the old one
                # goes into the staging folder, removed with it
                os.replace(out / name, stage / f".replaced-{name}")
            os.replace(stage / name, out / name)
        write_text(text, out / MANIFEST)
    return [out / name for name in produced]


def write_fault(exc: OSError, out: Path, option: str = "--out") -> OutputError | None:
    """The OutputError naming `out` for an error of writing there (disk full, quota, file
    too large, read-only file system, or a permission error on a path inside `out`), or
    None for any other OSError (not the output's fault)."""
    inside = False
    if exc.filename is not None:
        with suppress(OSError, ValueError):
            inside = Path(os.fspath(exc.filename)).absolute().is_relative_to(out.absolute())
    if exc.errno not in WRITE_FAULTS and not (inside and exc.errno in (errno.EACCES, errno.EPERM)):
        return None
    reason = os.strerror(exc.errno) if exc.errno is not None else str(exc)
    return OutputError(
        f"{option} {out}: cannot write the results ({reason}); nothing was written, the "
        "folder keeps what it held"
    )


@contextmanager
def output_folder(
    path: str | Path,
    command: str,
    files: Sequence[str] | None = None,
    label: str = "",
    option: str = "--out",
) -> Iterator[Path]:
    """Write a command's files into `path` together.

    Yields a staging folder: write the results there. When the block ends without an
    error they are moved into `path` at once (SIGINT and SIGTERM held) and the manifest is
    written last; on an error or an interrupt the staging folder is removed and `path`
    keeps what it held.
    """
    out = check_output_folder(path, command, files, option)
    existed = out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{option} {out}: cannot create it ({exc.strerror})") from None
    remove_stale(out)
    stage: Path | None = None
    try:
        with signals_held():  # an interrupt cannot fall between making the stage and `try`
            try:
                stage = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=out))
            except OSError as exc:
                reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "error")
                raise OutputError(f"{option} {out}: cannot write into it ({reason})") from None
        try:
            yield stage
            _commit(stage, out, command, label)
        except OSError as exc:
            fault = write_fault(exc, out, option)
            if fault is None:
                raise
            raise fault from None
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if not existed:  # a folder this call made and left empty (an error) goes too
            with contextlib.suppress(OSError):
                out.rmdir()
