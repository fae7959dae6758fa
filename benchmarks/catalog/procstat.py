"""CPU time of process trees (a server with its workers, PostgreSQL with its backends), from /proc."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is parenthesized and may contain spaces: split after it.
    return raw[raw.rindex(")") + 2 :].split()


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def tree_pids(roots: list[int]) -> list[int]:
    """The roots and all their live descendants."""
    children = _children_by_parent()
    seen: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.append(pid)
        stack.extend(children.get(pid, []))
    return seen


def cpu_seconds(roots: list[int]) -> float:
    """User + system CPU seconds used so far by the live processes of the trees under `roots`."""
    total = 0
    for pid in tree_pids(roots):
        fields = _stat_fields(pid)
        if fields is not None:
            # After the command name: state is field 0, utime field 11, stime field 12.
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS_PER_SECOND


def postmaster_pid(data_dir: Path) -> int | None:
    """PostgreSQL's postmaster pid from `postmaster.pid` in its data directory."""
    try:
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine spent busy so far (every core summed), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    # user nice system idle iowait irq softirq steal ...: everything but idle and iowait is busy.
    ticks = [int(v) for v in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS_PER_SECOND


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds the threads of the given processes have spent on a CPU so far, from
    /proc/<pid>/task/<tid>/schedstat: exact, where `cpu_seconds` counts 10 ms clock ticks, too coarse
    for one request. Threads that have exited are not counted."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total
