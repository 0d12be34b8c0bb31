"""Every command in README.md and docs/*.md runs as written (issue 11, "Docs that run").

The test reads the fenced code blocks of the files at the time it runs (so commands that
others add to the docs are picked up) and runs each block in a scratch folder of its own
document, the blocks of one document in order, as a newcomer who activated the virtual
environment would (`source .venv/bin/activate`: `clusteremu`, `python`, `ray` are the
venv's):

* `bash`, `sh` and unlabelled blocks: each command (continuation lines joined, comments
  dropped) through `bash -e`; exit status 0 expected; commands and `python` blocks see
  the installed package and their own folder on the path, not the checkout (an example
  that imports `tests....` fails, as it would for a user);
* `python` blocks: run with the venv's interpreter, except a block whose first line is a
  comment naming a file (`# my_policies.py`), which is written to that file for the
  commands after it;
* a `toml` block declaring `[project.entry-points."clusteremu.policies"]`: "installed" the
  way `pip install` of a package with that table would, as a `*.dist-info` folder with an
  `entry_points.txt` on the path;
* other blocks (YAML, output) are not commands.

Small sizes: `clusteremu` is `tests/docs_cli.py` with `CLUSTEREMU_DOCS_SMALL=1`, which cuts
run lengths, replications and seeds (and says what it cut on stderr) but nothing else, so
the commands users see are the commands that run. Local Ray instances start without their
dashboard, as everywhere in the suite (`CLUSTEREMU_DASHBOARD=0`, tests/conftest.py;
tests/actors/test_launch.py checks the dashboard itself). Two install steps of the README's first
command (`python3 -m venv .venv`, `.venv/bin/pip install ...`) are what `.ci/run` does
before this test and are not repeated; the README's test command is this suite itself.

An HTML comment just before a block steers it: `<!-- docs-test: skip REASON -->` (reported
as a skip with the reason, e.g. a recipe that needs several machines),
`<!-- docs-test: checkout REASON -->` (a developer's command "from the repository root":
run with the checkout on the path as well, and marked `slow`),
`<!-- docs-test: needs PATH REASON -->` (run when PATH, relative to the checkout, exists;
else a skip naming PATH and REASON: data that lives outside the repository, such as the
Alibaba trace in `../shared`) or `<!-- docs-test: slow -->` (marked `slow`, still run by
CI).

Two halves: this module runs the blocks of README.md and of docs/a*.md to docs/o*.md,
`tests/test_docs_p_to_z.py` those of docs/p*.md to docs/z*.md (`half_of`). The suite runs
on two workers with each test module on one (`--dist loadfile`, pyproject.toml); in one
module the documents' commands (about ten minutes) kept one worker busy for nearly the
whole run. A document stays whole in one module, its blocks in order in its own scratch
folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SECOND_HALF_FROM = "p"  # docs/p*.md to docs/z*.md run in tests/test_docs_p_to_z.py
SHELL = {"", "bash", "sh", "shell", "console"}
SETUP_DONE = (  # the README's install steps, done by .ci/run before the tests
    re.compile(r"^python3? -m venv \.venv$"),
    re.compile(r"^\.venv/bin/pip install .*$"),
)
TEST_SUITE = ".venv/bin/python -m pytest -q"  # the README's test command: this suite
COMMAND_TIMEOUT_S = 600
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
STEER = re.compile(r"<!--\s*docs-test:\s*(?P<what>skip|slow|needs|checkout)\b\s*(?P<why>.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    steer: str = ""  # "skip", "slow", "needs" or "checkout"
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent = len(opening["indent"])
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        body = "\n".join(line[indent:] for line in lines[i + 1 : j])
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        steer = STEER.search(previous)
        found.append(
            Block(
                path,
                i + 1,
                opening["lang"].lower(),
                body,
                steer["what"] if steer else "",
                steer["why"] if steer else "",
            )
        )
        i = j + 1
    return found


def commands_of(text: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comment lines and trailing
    comments dropped (a `#` inside quotes is kept)."""
    commands, pending = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append(_drop_comment(pending + line).strip())
        pending = ""
    if pending.strip():
        commands.append(_drop_comment(pending).strip())
    return [c for c in commands if c]


def _drop_comment(command: str) -> str:
    """The command up to its first unquoted `#` that starts a word."""
    quote = ""
    for index, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            return command[:index]
    return command


def runnable(command: str) -> str:
    """The command without the install steps .ci/run has already done ('' if nothing is
    left)."""
    parts = [p.strip() for p in command.split("&&")]
    kept = [p for p in parts if not any(rx.match(p) for rx in SETUP_DONE)]
    return " && ".join(kept)


ALL_BLOCKS = [b for path in DOCS for b in blocks_of(path)]
RUN_BLOCKS = [
    b
    for b in ALL_BLOCKS
    if b.lang in SHELL | {"python"}
    or (b.lang == "toml" and '[project.entry-points."clusteremu.policies"]' in b.text)
]


def half_of(path: Path) -> int:
    """0 for README.md and docs/a*.md to docs/o*.md (this module), 1 for docs/p*.md to
    docs/z*.md (`tests/test_docs_p_to_z.py`)."""
    in_docs = path.parent == ROOT / "docs"
    return int(in_docs and path.name[:1].lower() >= SECOND_HALF_FROM)


def scratch_folders(tmp_path_factory: pytest.TempPathFactory, half: int) -> dict[Path, Path]:
    """One scratch folder per document of `half`: shipped folders linked in (`scenarios/`,
    `monitoring/`), a `docs/` of its own (outputs such as `--out docs/wham` land here, not
    on the committed figures), and `clusteremu` on PATH and in `.venv/bin` as the small
    wrapper."""
    folders = {}
    for path in (d for d in DOCS if half_of(d) == half):
        folder = tmp_path_factory.mktemp(path.stem.replace(".", "-"))
        for name in ("scenarios", "monitoring", "ray-config.yaml"):
            (folder / name).symlink_to(ROOT / name)
        # `../shared` beside the checkout (data such as the traces) is `../shared` beside
        # the scratch folder too, so the docs' relative paths to it hold.
        shared, beside = ROOT.parent / "shared", folder.parent / "shared"
        if shared.is_dir() and not beside.exists():
            beside.symlink_to(shared)
        (folder / "docs").mkdir()
        bin_dir = folder / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        wrapper = bin_dir / "clusteremu"
        wrapper.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "docs_cli.py"}" "$@"\n'
        )
        wrapper.chmod(0o755)
        folders[path] = folder
    return folders


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    return scratch_folders(tmp_path_factory, 0)


def environment(folder: Path, checkout: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(folder / ".venv" / "bin"), venv_bin, env["PATH"]])
    # The document's own folder only: its examples import clusteremu as installed (the
    # package, not this checkout's `tests/` or `benchmarks/`), as a user's would.
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)]) if checkout else str(folder)
    env["CLUSTEREMU_DOCS_SMALL"] = "1"
    env["MPLBACKEND"] = "Agg"
    env.pop("RAY_ADDRESS", None)
    return env


def install_entry_points(block: Block, folder: Path) -> None:
    info = folder / "docs_example-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: docs-example\nVersion: 0\n")
    section = block.text.split('[project.entry-points."clusteremu.policies"]', 1)[1]
    entries = []
    for line in section.splitlines():
        name, sep, target = line.partition("=")
        if sep:
            entries.append(f"{name.strip()} = {target.strip().strip(chr(34))}")
    (info / "entry_points.txt").write_text("[clusteremu.policies]\n" + "\n".join(entries) + "\n")


def run_block(block: Block, folder: Path) -> None:
    env = environment(folder, checkout=block.steer == "checkout")
    if block.lang == "toml":
        install_entry_points(block, folder)
        return
    if block.lang == "python":
        first = block.text.lstrip().splitlines()[0] if block.text.strip() else ""
        named = re.fullmatch(r"#\s*([\w./-]+\.py)\s*", first)
        if named:
            (folder / named[1]).write_text(block.text)
            return
        done = subprocess.run(
            [sys.executable, "-c", block.text],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        assert done.returncode == 0, f"{block.id}: python block failed\n{done.stderr[-3000:]}"
        return
    for command in commands_of(block.text):
        if command == TEST_SUITE:
            continue  # this suite itself
        todo = runnable(command)
        if not todo:
            continue
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", todo],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"{block.id}: `{command}` exited {done.returncode}\n"
            f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"
        )


def param(block: Block) -> object:
    """`block` as a parameter of `test_doc_block_runs`, with the marks its steer asks for."""
    marks = []
    if block.steer == "skip":
        marks.append(pytest.mark.skip(reason=f"{block.id}: {block.reason or 'marked skip'}"))
    if block.steer in ("slow", "checkout"):
        marks.append(pytest.mark.slow)
    if block.steer == "needs":
        path, _, why = block.reason.partition(" ")
        if not (ROOT / path).exists():
            reason = f"{block.id}: needs {path} ({why or 'not in the repository'}), absent"
            marks.append(pytest.mark.skip(reason=reason))
    return pytest.param(block, id=block.id, marks=marks)


def run_in_scratch(block: Block, scratch: dict[Path, Path]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    run_block(block, scratch[block.path])


@pytest.mark.parametrize("block", [param(b) for b in RUN_BLOCKS if half_of(b.path) == 0])
def test_doc_block_runs(block: Block, scratch: dict[Path, Path]) -> None:
    run_in_scratch(block, scratch)


def test_the_two_halves_hold_every_document() -> None:
    halves = [[d.relative_to(ROOT).as_posix() for d in DOCS if half_of(d) == h] for h in (0, 1)]
    assert halves[0][0] == "README.md" and "docs/cluster.md" in halves[0], halves
    assert "docs/pennyworth.md" in halves[1] and "docs/tuning.md" in halves[1], halves


def test_the_readme_starts_with_the_install_and_test_commands() -> None:
    """CI (`.ci/run`) installs what the README's first command installs and runs exactly
    its test command; both stay the README's first two lines of code."""
    first = next(b for b in blocks_of(ROOT / "README.md") if b.lang in SHELL)
    lines = commands_of(first.text)
    install = 'python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev,ray,grafana,learn,rl]"'
    assert lines[0].startswith(install)
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[dev,ray,grafana,learn,rl]"' in ci, "CI installs otherwise"
    assert lines[1] == TEST_SUITE
    assert TEST_SUITE in (ROOT / ".ci" / "run").read_text()


def test_commands_are_extracted_as_a_reader_would_type_them() -> None:
    text = "clusteremu list   # comment\n# a comment line\nclusteremu run mm-c \\\n    --json\n"
    assert commands_of(text) == ["clusteremu list", "clusteremu run mm-c      --json"]
    assert commands_of("curl -s 'a#b'  # x") == ["curl -s 'a#b'"]
    assert runnable('python3 -m venv .venv && .venv/bin/pip install -q -e ".[x]" && ls') == "ls"
