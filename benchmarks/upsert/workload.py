"""The benchmark's keyed change stream: an initial load of every key, then updates (90 %), inserts of
new keys (8 %) and deletes (2 %, tombstones), each record carrying its sequence number and produce time."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

# The value's fields, for floe's floe.yaml and the plain job's Spark DDL alike.
FIELDS = [
    {"name": "id", "id": 1, "type": "long"},
    {"name": "version", "id": 2, "type": "int"},
    {"name": "region", "id": 3, "type": "string"},
    {"name": "amount", "id": 4, "type": "double"},
    {"name": "seq", "id": 5, "type": "long"},
    {"name": "sent_at_us", "id": 6, "type": "long"},
    {"name": "note", "id": 7, "type": "string"},
]
SPARK_DDL = "id BIGINT, version INT, region STRING, amount DOUBLE, seq BIGINT, sent_at_us BIGINT, note STRING"
UPDATE_SHARE = 0.90
INSERT_SHARE = 0.08  # the rest (2 %) are deletes
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


@dataclass(frozen=True)
class Change:
    key: bytes
    value: bytes | None  # None: a tombstone
    seq: int


class ChangeStream:
    """Deterministic for a seed: the same changes for both systems."""

    def __init__(self, keys: int, seed: int = 13) -> None:
        self.rng = random.Random(seed)
        self.live: list[int] = []
        self.position: dict[int, int] = {}
        self.next_key = 0
        self.initial_keys = keys
        self.seq = 0
        self.versions: dict[int, int] = {}

    def _value(self, key: int) -> bytes:
        version = self.versions.get(key, 0) + 1
        self.versions[key] = version
        note = " ".join(self.rng.choice(_WORDS) for _ in range(24))
        row = {
            "id": key,
            "version": version,
            "region": f"r{key % 11}",
            "amount": round(self.rng.random() * 1000, 2),
            "seq": self.seq,
            "sent_at_us": int(time.time() * 1e6),
            "note": note,
        }
        return json.dumps(row).encode()

    def _add(self, key: int) -> None:
        self.position[key] = len(self.live)
        self.live.append(key)

    def _remove(self, key: int) -> None:
        index = self.position.pop(key)
        last = self.live.pop()
        if last != key:
            self.live[index] = last
            self.position[last] = index

    def _next(self, kind: str) -> Change:
        self.seq += 1
        if kind == "insert" or not self.live:
            key = self.next_key
            self.next_key += 1
            self._add(key)
            return Change(str(key).encode(), self._value(key), self.seq)
        key = self.live[self.rng.randrange(len(self.live))]
        if kind == "delete":
            self._remove(key)
            self.versions.pop(key, None)
            return Change(str(key).encode(), None, self.seq)
        return Change(str(key).encode(), self._value(key), self.seq)

    def initial_load(self) -> Iterator[Change]:
        for _ in range(self.initial_keys):
            yield self._next("insert")

    def changes(self, count: int | None = None) -> Iterator[Change]:
        produced = 0
        while count is None or produced < count:
            draw = self.rng.random()
            kind = (
                "update"
                if draw < UPDATE_SHARE
                else "insert"
                if draw < UPDATE_SHARE + INSERT_SHARE
                else "delete"
            )
            yield self._next(kind)
            produced += 1
