"""Where an ingester's cores go, by thread: per-second CPU of the Spark JVMs' executor task threads, JIT
compiler threads and the rest, of the Python drivers and of the Kafka broker, sampled from /proc.

`python -m benchmarks.ingest.thread_cpu --seconds 70` while `python -m benchmarks.ingest ... --only floe`
runs (start it once the backlog is produced): one line per second, then the totals by thread group over
`--window FIRST LAST` (seconds of the series; default: every second in which the JVMs used over one core).
A flight recording samples only threads running Java code; this also shows the JIT compilers, which took
about a third of the ingester's CPU in a 1M-record run (the JVM is minutes from warm)."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")

# (process kind, thread name) → CPU ticks, per (pid, tid).
Sample = dict[tuple[int, int], tuple[str, str, int]]


def _kind(cmdline: bytes) -> str | None:
    text = cmdline.replace(b"\0", b" ").decode(errors="replace")
    if "SparkSubmit" in text and "pyspark-shell" in text:
        return "jvm"
    if "floe.cli ingest" in text or "plain_job" in text:
        return "python"
    if "kafka.Kafka" in text:
        return "broker"
    return None


def sample() -> Sample:
    """Every thread of the ingesters' and the broker's processes, with its CPU ticks so far."""
    found: Sample = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            kind = _kind((entry / "cmdline").read_bytes())
            if kind is None:
                continue
            for task in (entry / "task").iterdir():
                stat = (task / "stat").read_text()
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                found[(int(entry.name), int(task.name))] = (kind, name, int(fields[11]) + int(fields[12]))
        except OSError:  # the process or thread ended meanwhile
            continue
    return found


def group(kind: str, name: str) -> str:
    """A thread's group: the JVM's task threads, JIT compilers and GC apart; digits folded."""
    if kind == "jvm":
        if name.startswith("Executor task"):
            return "jvm: executor tasks"
        if "CompilerThre" in name:
            return "jvm: JIT compilers"
        if name.startswith("GC Thread") or name.startswith("G1 "):
            return "jvm: GC"
    return f"{kind}: {re.sub(r'[0-9]+', 'N', name)}"


def cores(before: Sample, after: Sample, seconds: float) -> dict[str, float]:
    """Cores busy per thread group between two samples."""
    busy: dict[str, float] = {}
    for key, (kind, name, ticks) in after.items():
        earlier = before.get(key)
        used = (ticks - (earlier[2] if earlier else ticks)) / TICKS / seconds
        busy[group(kind, name)] = busy.get(group(kind, name), 0.0) + used
    return busy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=70.0, help="how long to sample")
    parser.add_argument("--window", type=int, nargs=2, metavar=("FIRST", "LAST"), help="seconds summed")
    args = parser.parse_args()
    samples: list[tuple[float, Sample]] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        samples.append((time.monotonic(), sample()))
        time.sleep(1.0)
    busy_seconds = []
    for i, ((t0, s0), (t1, s1)) in enumerate(itertools.pairwise(samples)):
        per = cores(s0, s1, t1 - t0)
        jvm = sum(v for k, v in per.items() if k.startswith("jvm"))
        tasks, jit = per.get("jvm: executor tasks", 0.0), per.get("jvm: JIT compilers", 0.0)
        broker = sum(v for k, v in per.items() if k.startswith("broker"))
        print(f"{i:4d} jvm {jvm:4.2f} (tasks {tasks:4.2f}, JIT {jit:4.2f})  broker {broker:4.2f}")
        if jvm > 1.0:
            busy_seconds.append(i)
    if args.window:
        first, last = args.window
    elif busy_seconds:
        first, last = busy_seconds[0], busy_seconds[-1] + 1
    else:
        print("no second with the JVMs over one core")
        return 1
    (t0, s0), (t1, s1) = samples[first], samples[min(last, len(samples) - 1)]
    print(f"\ncores by thread group, seconds {first}-{last} ({t1 - t0:.1f} s):")
    for name, busy in Counter(cores(s0, s1, t1 - t0)).most_common(15):
        print(f"  {busy:5.3f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
