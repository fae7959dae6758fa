"""The Kafka offset range of a micro-batch, from Spark's offset log rather than from a job over its records.

Spark writes a batch's end offsets to `<checkpoint>/offsets/<batch id>` before the batch runs (its
write-ahead log); the batch reads each partition from the previous batch's end up to its own. floe's
checkpoints are per query run (ingest/service.py), so the log holds every batch of this run and its
first batch has no predecessor: its range is unknown here (the caller then reads it from the records).

The file is Spark's `OffsetSeqLog` text: a version line (`v1`), the batch's metadata (JSON), then one line
per source with its offsets (`-` for none); the Kafka source's are `{"<topic>": {"<partition>": <next
offset>, ...}}`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
_VERSION_PREFIX = "v"
_READABLE_VERSIONS = {1}


@dataclass(frozen=True)
class BatchRange:
    """Per partition, the first offset a batch reads and the offset after its last (`start` lacks a
    partition the previous batch did not know, e.g. one added to the topic since)."""

    start: dict[int, int]
    end: dict[int, int]

    def partitions(self) -> list[int]:
        """The partitions the batch advances (records, or offsets the broker skipped, in its range)."""
        return sorted(p for p, end in self.end.items() if end > self.start.get(p, -1))


def end_offsets(checkpoint: Path, batch_id: int, topic: str) -> dict[int, int] | None:
    """The next offset per partition after batch `batch_id` of `topic`, or None when the log has no such
    entry or one this code cannot read (a later Spark's format)."""
    path = checkpoint / "offsets" / str(batch_id)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if not lines or not lines[0].startswith(_VERSION_PREFIX):
        return None
    try:
        if int(lines[0][len(_VERSION_PREFIX) :]) not in _READABLE_VERSIONS:
            return None
        for line in lines[2:]:
            if line == "-":
                continue
            offsets = json.loads(line)
            if isinstance(offsets, dict) and isinstance(offsets.get(topic), dict):
                return {int(p): int(o) for p, o in offsets[topic].items()}
    except (ValueError, TypeError):
        log.debug("unreadable offset log entry %s", path)
    return None


def batch_range(checkpoint: Path, batch_id: int, topic: str) -> BatchRange | None:
    """The offsets batch `batch_id` reads, or None when not known from the log (the run's first batch,
    or an entry this code cannot read)."""
    if batch_id < 1:
        return None
    start = end_offsets(checkpoint, batch_id - 1, topic)
    end = end_offsets(checkpoint, batch_id, topic)
    if start is None or end is None:
        return None
    return BatchRange(start=start, end=end)


__all__ = ["BatchRange", "batch_range", "end_offsets"]
