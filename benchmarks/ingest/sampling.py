"""CPU of each process group over time (ingester tree, broker, catalog + PostgreSQL, this process and
everything else on the machine), sampled from /proc and read back for any time window."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.catalog.procstat import cpu_seconds, machine_busy_seconds

OTHER = "other"
BENCHMARK = "benchmark"


@dataclass
class CpuSampler:
    """Cumulative CPU seconds per group at each `sample()`; `cores(t0, t1)` averages a window."""

    groups: dict[str, Callable[[], list[int]]]
    times: list[float] = field(default_factory=list)
    samples: list[dict[str, float]] = field(default_factory=list)

    def sample(self) -> None:
        now = time.time()
        values = {name: cpu_seconds(pids()) for name, pids in self.groups.items()}
        # This process: the producer thread, the DuckDB reader and the pollers.
        values[BENCHMARK] = time.process_time()
        values["_machine"] = machine_busy_seconds()
        self.times.append(now)
        self.samples.append(values)

    def _at(self, when: float, name: str) -> float:
        """The group's cumulative CPU at `when`, interpolated between the nearest samples."""
        i = bisect.bisect_left(self.times, when)
        if i <= 0:
            return self.samples[0].get(name, 0.0)
        if i >= len(self.times):
            return self.samples[-1].get(name, 0.0)
        t0, t1 = self.times[i - 1], self.times[i]
        v0, v1 = self.samples[i - 1].get(name, 0.0), self.samples[i].get(name, 0.0)
        return v0 + (v1 - v0) * ((when - t0) / (t1 - t0) if t1 > t0 else 0.0)

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Average cores busy per group between `start` and `end` (wall-clock seconds), and `other`:
        the machine's busy CPU that none of the groups used (other users of the shared machine)."""
        if not self.samples or end <= start:
            return {}
        span = end - start
        names = [*self.groups, BENCHMARK]
        used = {name: max(0.0, self._at(end, name) - self._at(start, name)) for name in names}
        machine = self._at(end, "_machine") - self._at(start, "_machine")
        result = {name: round(value / span, 2) for name, value in used.items()}
        result[OTHER] = round(max(0.0, machine - sum(used.values())) / span, 2)
        result["machine"] = round(machine / span, 2)
        return result
