"""`python -m benchmarks.many_tables.collector_reclaim`: the pauses of floe's garbage-collector policy
(`catalog/collector.py`) in a process holding 1,000 tables' models, floe's reclaim and one tried beside
it, each in a process of its own.

Both policies freeze what survives each full collection, so a full collection scans only what was
allocated since the last one, and now and then unfreeze everything so that one whole collection
reclaims reference cycles that died frozen: a pause as long as scanning every live object takes. floe
takes that whole collection every `reclaim_seconds` (600); the policy tried takes it only when the
frozen generation has also grown to twice what the last whole collection left (`reclaim_growth`).

Each process installs its policy, builds `--tables` table models of `--snapshots` snapshots (the
catalog's commit core, the shared consumer's summaries: the catalog's cache of parsed models), then
for `--seconds` commits to the tables in turn: one append applied by the commit core, the oldest
snapshot dropped past `--snapshots` (the history maintenance keeps bounded), the new model replacing
the old, and `--garbage` reference cycles of ten objects dropped (a request's asyncio task, future and
frames are such cycles: only the collector frees them, and they are what makes it run at all, since the
models alone are freed as fast as they are made). `reclaim_seconds` is scaled down (`--reclaim-seconds`)
so that a run of minutes shows what hours would. Measured with a gc callback of its own: every full
collection's pause, the whole ones, and the longest gap between two commits (what a request or a table
waiting behind the collector sees).
Results: benchmarks/results/many-tables-collector-reclaim.{md,json}.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from typing import Any

from benchmarks.many_tables.__main__ import RESULTS, git_commit, write_markdown
from benchmarks.many_tables.metadata_growth import append
from benchmarks.many_tables.metadata_json_cycle import tables
from catalog.collector import _FreezeSurvivors

MODULE = "benchmarks.many_tables.collector_reclaim"


DESIGNS = {
    "floe's: a whole collection every reclaim_seconds": "timed",
    "tried: a whole collection only once the frozen objects also doubled": "growth",
}


class Pauses:
    """Every full collection's pause, and whether it scanned the frozen objects too."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, bool]] = []
        self._started = 0.0
        self._frozen_before = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._frozen_before = gc.get_freeze_count()
            self._started = time.perf_counter()
        else:
            self.pauses.append((time.perf_counter() - self._started, self._frozen_before == 0))


def child(design: str, args: argparse.Namespace) -> dict[str, Any]:
    pauses = Pauses()
    gc.callbacks.insert(0, pauses)  # timed before the policy's own callback runs
    gc.freeze()  # what is loaded by now, as keep_full_collections_short does
    growth = None if design == "timed" else 2.0
    gc.callbacks.append(_FreezeSurvivors(args.reclaim_seconds, reclaim_growth=growth))
    models = tables(args.tables, args.snapshots)
    pauses.pauses.clear()  # the build's own collections aside: measured from the first commit
    began = time.perf_counter()
    cpu = time.process_time()
    last = began
    longest_gap = 0.0
    commits = 0
    sequence = args.snapshots
    while (now := time.perf_counter()) - began < args.seconds:
        longest_gap = max(longest_gap, now - last)
        last = now
        index = commits % len(models)
        if index == 0:
            sequence += 1
        model = append(models[index], sequence)
        if len(model.snapshots) > args.snapshots:  # maintenance's expiry, as far as the cache sees it
            model = model.model_copy(
                update={"snapshots": model.snapshots[1:], "snapshot_log": model.snapshot_log[1:]}
            )
        models[index] = model
        for _ in range(args.garbage):
            ring: list[Any] = [{} for _ in range(9)]
            for left, right in zip(ring, ring[1:] + ring[:1], strict=True):
                left["next"] = right
            ring[0]["ring"] = ring
        commits += 1
    whole = [p for p, full in pauses.pauses if full]
    short = [p for p, full in pauses.pauses if not full]
    return {
        "design": design,
        "seconds": round(time.perf_counter() - began, 1),
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "commits": commits,
        "full_collections": len(pauses.pauses),
        "whole_collections": len(whole),
        "whole_pause_s": [round(p, 3) for p in whole],
        "other_full_pause_max_s": round(max(short, default=0.0), 3),
        "pause_total_s": round(sum(p for p, _ in pauses.pauses), 2),
        "longest_gap_s": round(longest_gap, 3),
        "frozen_objects_end": gc.get_freeze_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--snapshots", type=int, default=100, help="snapshots each table keeps")
    parser.add_argument("--seconds", type=float, default=120.0, help="commits measured for this long")
    parser.add_argument("--reclaim-seconds", type=float, default=20.0, help="floe's is 600")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each policy, alternating")
    parser.add_argument("--tried-first", action="store_true", help="start the alternation with it")
    parser.add_argument("--garbage", type=int, default=4, help="reference cycles dropped per commit")
    parser.add_argument("--child", choices=sorted(set(DESIGNS.values())), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    started = time.time()
    rows = []
    order = list(DESIGNS.items())
    if args.tried_first:
        order.reverse()
    # Alternating (floe's, tried, tried, floe's, ...): the machine's drift falls on both alike.
    runs = [pair for r in range(args.repeat) for pair in (order if r % 2 == 0 else order[::-1])]
    for label, design in runs:
        print(f"== {label}", flush=True)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.many_tables.collector_reclaim",
                *sys.argv[1:],
                "--child",
                design,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows.append({"label": label, **json.loads(out.strip().splitlines()[-1])})
        print(f"   {rows[-1]}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "many-tables-collector-reclaim"
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    paragraphs = (__doc__ or "").split("\n\n")
    lines = [
        "# The garbage collector's whole collections in a process holding 1,000 tables' models",
        "",
        f"Generated by `python -m benchmarks.many_tables.collector_reclaim --tables {args.tables} "
        f"--snapshots {args.snapshots} --garbage {args.garbage} --repeat {args.repeat}"
        f"{' --tried-first' if args.tried_first else ''} "
        f"--seconds {args.seconds:g} --reclaim-seconds {args.reclaim_seconds:g}` "
        f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({time.time() - started:.0f} s). {paragraphs[1]}",
        "",
        paragraphs[2],
        "",
        "| policy | commits | full collections | whole ones | their pauses | longest other full "
        "collection | all full collections' pauses | longest gap between commits | CPU |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        whole = ", ".join(f"{p:.2f}" for p in row["whole_pause_s"]) or "-"
        lines.append(
            f"| {row['label']} | {row['commits']:,} | {row['full_collections']} | {row['whole_collections']} "
            f"| {whole} s | {row['other_full_pause_max_s']:.3f} s | {row['pause_total_s']:.2f} s "
            f"| {row['longest_gap_s']:.2f} s | {row['cpu_seconds']:.1f} s |"
        )
    write_markdown(name, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
