"""`python -m benchmarks.many_tables --maintain`: full maintenance passes over every table while ingesting,
the previous design (`floe maintain --design spark`: every action a Spark job) and the in-process one
(`--design inprocess`: small append-only tables compacted and expired with pyarrow + pyiceberg, Spark
only for a table that needs it) side by side in one run.

Every table gets the benchmark's maintenance policy (`POLICY`, floe.yaml's top-level `maintenance:`
block), so a pass has real work on each quiet table: its hot partition's small files compacted
(`hot_partition_max_files`), snapshots older than a minute expired. A warm-up pass (in-process) first
does what only a first pass does (the metadata properties, the backlog since `floe apply`); then, before
each measured pass, ingestion runs `gap` seconds, so every measured pass faces the same amount of new
work. Measured per pass: wall time of `floe maintain --once` (start to exit, Spark's start included), the
tables it visited and what it did to them (from floe's recorded passes), its CPU and peak RSS, and the
freshness p99 of the records produced meanwhile, and the machine's load around it.

Designs (`--maintain-designs`, comma-separated): `spark`, `inprocess` (this tree's defaults: the
metadata-only skip, one table at a time), `inprocess-pN` (`--parallel N`), and
`before:<folder>`, `floe maintain --design inprocess` run from another source tree (say
`git archive <commit>` unpacked there), so an earlier commit's design is measured in the same run.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil  # type: ignore[import-untyped]

from benchmarks.many_tables.freshness import p99

POLICY = {"hot_partition_max_files": 10, "snapshot_retention": "1m", "min_snapshots_to_keep": 5}


@dataclass
class MaintenancePass:
    design: str
    label: str  # "warm-up" or "measured"
    pass_s: float | None = None  # None: stopped at the limit
    stopped_after_s: float | None = None
    tables_visited: int = 0
    tables_failed: int = 0
    tables_compacted: int = 0
    tables_expired: int = 0
    data_files_rewritten: int = 0
    in_process_actions: int = 0
    spark_actions: int = 0
    cores: float | None = None
    peak_rss_gib: float | None = None
    freshness_p99_s: float | None = None
    window: tuple[float, float] | None = None
    # Tables the metadata-only check skipped (their manifests not read).
    tables_skipped: int = 0
    # All processes' CPU on the machine during the pass (cores), and the 1-minute load average at its end.
    machine_busy_cores: float | None = None
    load_average_end: float | None = None

    @property
    def seconds_per_table(self) -> float | None:
        elapsed = self.pass_s if self.pass_s is not None else self.stopped_after_s
        return round(elapsed / self.tables_visited, 3) if elapsed and self.tables_visited else None


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    except psutil.Error:
        return 0


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of the process and its children, living and ended (the Spark JVM included)."""
    try:
        root = psutil.Process(pid)
        total = 0.0
        for process in [root, *root.children(recursive=True)]:
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        return total
    except psutil.Error:
        return 0.0


@dataclass(frozen=True)
class Visit:
    """What one recorded visit of a table (a `maintenance_passes` row) did."""

    actions: list[dict[str, Any]]
    rewritten: int  # data files its compaction rewrote
    expired: bool  # snapshots expired
    skipped: bool  # the metadata-only check found nothing to do
    failed: bool  # the visit or one of its actions failed

    @classmethod
    def of(cls, row: Any) -> Visit:
        actions: list[dict[str, Any]] = json.loads(row["actions"] or "[]")
        done = [a for a in actions if not a.get("error")]
        return cls(
            actions,
            sum(
                int((a.get("result") or {}).get("rewritten_data_files_count") or 0)
                for a in done
                if a["name"] == "rewrite_data_files"
            ),
            any(a["name"] == "expire_snapshots" for a in done),
            any("quick_check" in (a.get("result") or {}) for a in actions),
            row["error"] is not None or len(done) < len(actions),
        )


def recorded_passes(fetch: Callable[[str, float], list[Any]], since: float) -> list[Any]:
    query = "SELECT table_name, actions, error FROM maintenance_passes WHERE started_at >= to_timestamp($1)"
    return fetch(query, since)


def maintain_command(design: str) -> tuple[list[str], str | None]:
    """`floe maintain` for a design name, and the source tree to run it from (None: this one)."""
    base = [
        sys.executable,
        "-m",
        "floe.cli",
        "maintain",
        "--once",
        "--master",
        "local[2]",
        "--metrics-port",
        "0",
    ]
    if design.startswith("before:"):
        return [*base, "--design", "inprocess"], design.split(":", 1)[1]
    if design.startswith("inprocess-p"):
        return [*base, "--design", "inprocess", "--parallel", design.removeprefix("inprocess-p")], None
    return [*base, "--design", design], None


def run_pass(
    design: str,
    label: str,
    env_vars: dict[str, str],
    log_path: Path,
    fetch: Callable[[str, float], list[Any]],
    poll: Callable[[], None],
    limit: float,
) -> MaintenancePass:
    """One `floe maintain --once --design D` over every table, while the caller's producer and
    ingestion go on (`poll` keeps the freshness record)."""
    command, tree = maintain_command(design)
    if tree is not None:
        # The other tree's code first (`python -m` also puts the working folder first).
        env_vars = {**env_vars, "PYTHONPATH": tree}
    outcome = MaintenancePass(f"before ({Path(tree).name})" if tree else design, label)
    peak = 0
    cpu = 0.0
    with log_path.open("ab") as log:
        started = time.time()
        machine_before = psutil.cpu_times()
        process = subprocess.Popen(
            command, env=env_vars, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tree
        )
        while process.poll() is None and time.time() - started < limit:
            poll()
            peak = max(peak, tree_rss(process.pid))
            # Sampled while it runs (an ended process has no CPU to read): up to 0.5 s may be missed.
            cpu = max(cpu, tree_cpu_seconds(process.pid))
            time.sleep(0.5)
        ended = time.time()
        if process.poll() is None:
            outcome.stopped_after_s = round(ended - started, 1)
            process.terminate()
            process.wait(60)
        else:
            outcome.pass_s = round(ended - started, 1)
    poll()
    machine_after = psutil.cpu_times()
    busy = (machine_after.user + machine_after.system + machine_after.nice) - (
        machine_before.user + machine_before.system + machine_before.nice
    )
    outcome.machine_busy_cores = round(busy / (ended - started), 2)
    outcome.load_average_end = round(os.getloadavg()[0], 2)
    outcome.window = (started, ended)
    outcome.cores = round(cpu / (ended - started), 2)
    outcome.peak_rss_gib = round(peak / 2**30, 2)
    for row in recorded_passes(fetch, started):
        visit = Visit.of(row)
        outcome.tables_visited += 1
        outcome.tables_failed += int(visit.failed)
        outcome.tables_compacted += int(visit.rewritten > 0)
        outcome.data_files_rewritten += visit.rewritten
        outcome.tables_expired += int(visit.expired)
        outcome.tables_skipped += int(visit.skipped)
        for action in visit.actions:
            if action["name"] in ("remove_old_metadata_files", "remove_orphan_files"):
                continue  # never Spark, in either design
            engine = action.get("result", {}).get("engine")
            if engine == "in-process":
                outcome.in_process_actions += 1
            else:
                outcome.spark_actions += 1
    return outcome


def freshness_p99(
    seen: dict[tuple[str, int], float], produced: dict[tuple[str, int], float], low: float, high: float
) -> float | None:
    """p99 of produce → committed for the records produced during [low, high - 10 s]."""
    ages = sorted(
        seen[key] - sent for key, sent in produced.items() if key in seen and low <= sent <= high - 10
    )
    return round(p99(ages), 2) if ages else None


def markdown_rows(tables: int, passes: list[MaintenancePass]) -> list[str]:
    rows = []
    for p in passes:
        elapsed = f"{p.pass_s} s" if p.pass_s is not None else f"stopped at {p.stopped_after_s} s"
        rows.append(
            f"| {p.design} | {p.label} | {tables:,} | {elapsed} | {p.tables_visited:,} | "
            f"{p.seconds_per_table} s | {p.tables_compacted:,} ({p.data_files_rewritten:,} files) | "
            f"{p.tables_expired:,} | {p.in_process_actions:,} / {p.spark_actions:,} | {p.tables_failed} | "
            f"{p.cores} | {p.peak_rss_gib} GiB | {p.freshness_p99_s} s | {p.tables_skipped:,} | "
            f"{p.machine_busy_cores} | {p.load_average_end} |"
        )
    return rows


MARKDOWN_HEADER = [
    "| design | pass | tables (data) | full pass | tables visited (data + dead-letter) | per table | "
    "tables compacted (files rewritten) | tables expired | actions in-process / Spark | tables failed | "
    "maintenance CPU (cores) | maintenance peak RSS | ingestion freshness p99 meanwhile | "
    "tables skipped (metadata only) | machine busy (cores, all processes) | load average at end |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]


@dataclass
class WorkerRound:
    """The k-th visit of every table by the long-running `floe maintain` (`--maintain-alongside`)."""

    round: int  # 1: each table's first visit
    tables_visited: int
    began_min: float  # minutes after `floe ingest` started
    took_s: float  # the round's first visit's start to its last visit's end
    tables_compacted: int = 0
    data_files_rewritten: int = 0
    tables_expired: int = 0
    snapshots_expired: int = 0
    tables_skipped: int = 0
    tables_failed: int = 0
    # Each visit's own duration: median and longest.
    visit_p50_s: float = 0.0
    visit_max_s: float = 0.0


def start_worker(env_vars: dict[str, str], log: IO[bytes], nice: int) -> subprocess.Popen[bytes]:
    """`floe maintain` as an operator runs it: the long-running worker, the built-in policy (every
    table every 10 minutes, `max_snapshots` 100), the in-process design, its own session, at niceness
    `nice`."""
    command = [
        sys.executable, "-m", "floe.cli", "maintain", "--design", "inprocess", "--master", "local[2]",
        "--metrics-port", "0", "--nice", str(nice),
    ]  # fmt: skip
    return subprocess.Popen(
        command, env=env_vars, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def worker_rounds(
    fetch: Callable[[str, float], list[Any]], since: float, tables: set[str]
) -> tuple[list[WorkerRound], float | None]:
    """The worker's visits of `tables` since `since` (epoch s) grouped into rounds, and the longest time
    between two visits of one of them (seconds; its interval is what it should be). Other tables (the
    one a run adds and removes during its window) are left out: they would stretch a round."""
    query = (
        "SELECT table_name, extract(epoch from started_at) AS began, duration_seconds, actions, "
        "before, after, error FROM maintenance_passes WHERE started_at >= to_timestamp($1) "
        "AND table_name NOT LIKE '%\\_dlq' ORDER BY started_at"
    )
    visits: dict[str, list[Any]] = {}
    for row in fetch(query, since):
        if row["table_name"] in tables:
            visits.setdefault(row["table_name"], []).append(row)
    gaps = [
        float(b["began"]) - float(a["began"]) for rows in visits.values() for a, b in itertools.pairwise(rows)
    ]
    rounds: list[WorkerRound] = []
    for k in range(max((len(rows) for rows in visits.values()), default=0)):
        kth = [rows[k] for rows in visits.values() if len(rows) > k]
        began = min(float(r["began"]) for r in kth)
        ended = max(float(r["began"]) + float(r["duration_seconds"]) for r in kth)
        durations = sorted(float(r["duration_seconds"]) for r in kth)
        one = WorkerRound(
            k + 1, len(kth), round((began - since) / 60, 1), round(ended - began, 1),
            visit_p50_s=round(statistics.median(durations), 2), visit_max_s=round(durations[-1], 2),
        )  # fmt: skip
        for row in kth:
            visit = Visit.of(row)
            one.tables_compacted += int(visit.rewritten > 0)
            one.data_files_rewritten += visit.rewritten
            one.tables_expired += int(visit.expired)
            if visit.expired:
                before = json.loads(row["before"] or "{}").get("snapshots") or 0
                after = json.loads(row["after"] or "{}").get("snapshots") or 0
                one.snapshots_expired += max(0, int(before) - int(after))
            one.tables_skipped += int(visit.skipped)
            one.tables_failed += int(visit.failed)
        rounds.append(one)
    return rounds, (round(max(gaps), 1) if gaps else None)


def worker_markdown(rounds: list[WorkerRound], longest_gap_s: float | None) -> list[str]:
    lines = [
        "| round | began (min after ingest start) | tables visited | took | visit p50 / max | "
        "tables compacted (files rewritten) | tables expired (snapshots) | tables skipped | failed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        lines.append(
            f"| {r.round} | {r.began_min} | {r.tables_visited:,} | {r.took_s} s | "
            f"{r.visit_p50_s} / {r.visit_max_s} s | {r.tables_compacted:,} ({r.data_files_rewritten:,}) | "
            f"{r.tables_expired:,} ({r.snapshots_expired:,}) | {r.tables_skipped:,} | {r.tables_failed} |"
        )
    lines += ["", f"Longest time between two visits of one data table: {longest_gap_s} s."]
    return lines


__all__ = [
    "MARKDOWN_HEADER",
    "POLICY",
    "MaintenancePass",
    "WorkerRound",
    "freshness_p99",
    "markdown_rows",
    "run_pass",
    "start_worker",
    "worker_markdown",
    "worker_rounds",
]
