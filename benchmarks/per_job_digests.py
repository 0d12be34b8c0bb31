"""Digests of every shipped scenario's per-job table and summary, to show that a change to
the engine's structure changes no result (issue 38: "the per-job tables of the shipped
scenarios byte-identical before and after").

    python benchmarks/per_job_digests.py --save before.json     # on the old code
    python benchmarks/per_job_digests.py --check before.json    # on the new code

A table's digest is the SHA-256 of its Arrow IPC stream (schema and every column's bytes,
independent of Parquet's writer metadata); a summary's is that of its JSON with sorted
keys (floats written with their shortest round-trip repr, so any change of a bit shows).
Each scenario runs as shipped, or with `--jobs N` as its first N jobs (`stop.jobs`). A
metric added on purpose is left out of the summaries' digests with `--ignore KEY`:

    python benchmarks/per_job_digests.py --check before.json --ignore p90_response_time_s
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]


def table_digest(table: pa.Table) -> str:
    """SHA-256 of `table`'s Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def without(value: object, keys: frozenset[str]) -> object:
    """`value` with the mapping entries named in `keys` dropped, at every depth."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    return value


def summary_digest(summary: dict, ignore: frozenset[str] = frozenset()) -> str:
    """SHA-256 of the summary's JSON (sorted keys), without the `ignore` keys (metrics a
    change added on purpose) at any depth."""
    text = json.dumps(without(summary, ignore), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def digests(
    names: list[str], jobs: int | None, ignore: frozenset[str] = frozenset()
) -> dict[str, dict[str, object]]:
    from clusteremu.cluster.runner import run_spec
    from clusteremu.scenarios.loader import load_scenario

    out: dict[str, dict[str, object]] = {}
    for name in names:
        overrides = [] if jobs is None else [f"stop.jobs={jobs}"]
        start = time.perf_counter()
        try:
            result = run_spec(load_scenario(name, overrides))
        except Exception as exc:  # noqa: BLE001 - a scenario that cannot run at this size
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        else:
            out[name] = {
                "rows": result.jobs.num_rows,
                "table": table_digest(result.jobs),
                "summary": summary_digest(result.summary, ignore),
            }
        print(f"{name}: {out[name]} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the digests to this JSON file")
    group.add_argument("--check", type=Path, help="compare with the digests in this file")
    parser.add_argument("--jobs", type=int, default=None, help="run each scenario's first N jobs")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="KEY",
        help="a summary key added on purpose, left out of the summary's digest (repeatable)",
    )
    parser.add_argument("scenarios", nargs="*", help="names (default: every shipped scenario)")
    args = parser.parse_args()
    names = args.scenarios or sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
    now = digests(names, args.jobs, frozenset(args.ignore))
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} scenarios saved to {args.save}")
        return 0
    before = json.loads(args.check.read_text())
    tables = [n for n in names if before.get(n, {}).get("table") == now[n].get("table")]
    summaries = [n for n in names if before.get(n, {}).get("summary") == now[n].get("summary")]
    for n in names:
        if n not in tables or n not in summaries:
            print(f"DIFFERS {n}: before {before.get(n)}, now {now[n]}")
    print(f"per-job tables identical: {len(tables)} of {len(names)} scenarios")
    print(f"summaries identical: {len(summaries)} of {len(names)}", end="")
    print(f" (without {', '.join(sorted(args.ignore))})" if args.ignore else "")
    return 0 if len(tables) == len(summaries) == len(names) else 1


if __name__ == "__main__":
    raise SystemExit(main())
