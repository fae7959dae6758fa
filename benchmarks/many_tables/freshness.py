"""Freshness as the many-tables results report it: a record's age is from its delivery (produce
confirmed) to the first poll of floe's database that shows its table's committed offset past it."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

Key = tuple[str, int]  # (topic, offset)


def p99(ages: list[float]) -> float:
    """The 99th percentile of sorted, non-empty `ages`, as every row of these results has it."""
    return ages[min(len(ages) - 1, int(len(ages) * 0.99))]


def near_an_apply(sent: float, applies: Sequence[float]) -> bool:
    """Whether a record delivered at `sent` is in the stretch an apply could disturb: from 5 s before
    it began to 15 s after."""
    return any(began - 5 <= sent <= began + 15 for began in applies)


def window_ages(
    produced: dict[Key, float],
    seen: dict[Key, float],
    window: tuple[float, float],
    applies: Sequence[float],
    started: Callable[[str], bool],
) -> tuple[list[float], list[float], list[float], int]:
    """The sorted ages of the records delivered in `window` (epoch s) to topics whose table `started`,
    those of them not near an apply, those near one, and how many were never seen committed."""
    low, high = window
    ages: list[float] = []
    away: list[float] = []
    around: list[float] = []
    missing = 0
    for (topic, offset), sent in produced.items():
        if not low <= sent <= high or not started(topic):
            continue
        shown = seen.get((topic, offset))
        if shown is None:
            missing += 1
            continue
        ages.append(shown - sent)
        (around if near_an_apply(sent, applies) else away).append(shown - sent)
    return sorted(ages), sorted(away), sorted(around), missing


def by_minute(
    produced: dict[Key, float],
    seen: dict[Key, float],
    start: float,
    end: float,
    step: float = 60.0,
) -> list[list[float]]:
    """[minute, records, p50, p99, missing] of the records produced in each whole minute (or `step`
    seconds: the row's first number counts them) after `start` up to `end`: how freshness moves as the
    tables grow and maintenance runs."""
    minutes: dict[int, list[float | None]] = {}
    for key, sent in produced.items():
        if start <= sent <= end:
            shown = seen.get(key)
            minutes.setdefault(int((sent - start) // step), []).append(
                None if shown is None else shown - sent
            )
    rows: list[list[float]] = []
    for minute, found in sorted(minutes.items()):
        ages = sorted(a for a in found if a is not None)
        if ages:
            median, high = round(statistics.median(ages), 2), round(p99(ages), 2)
            rows.append([minute, len(found), median, high, len(found) - len(ages)])
    return rows
