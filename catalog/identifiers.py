"""Namespace and table identifiers as they appear in REST paths and in the store.

Namespace levels travel joined by the unit separator (``%1F``) in paths and in the ``parent`` query
parameter; the store keys a namespace by its levels joined with the same character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_plus

from catalog.errors import BadRequest

SEPARATOR = "\x1f"
# PostgreSQL text cannot hold NUL, and no client means one in a name: refused on every backend alike.
NUL = "\x00"
_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True, slots=True)
class Namespace:
    levels: tuple[str, ...]

    @property
    def key(self) -> str:
        """The store key: levels joined by the unit separator."""
        return SEPARATOR.join(self.levels)

    @property
    def parent_key(self) -> str:
        return SEPARATOR.join(self.levels[:-1])

    def __str__(self) -> str:
        return ".".join(self.levels)

    @classmethod
    def from_key(cls, key: str) -> Namespace:
        return cls(tuple(key.split(SEPARATOR)))

    @classmethod
    def of(cls, levels: list[str] | tuple[str, ...]) -> Namespace:
        """Validate levels sent in a request body."""
        if not levels:
            raise BadRequest("Namespace must have at least one level")
        for level in levels:
            if not isinstance(level, str) or level == "":
                raise BadRequest(f"Invalid namespace {list(levels)!r}: levels must be non-empty strings")
            if SEPARATOR in level:
                raise BadRequest(f"Invalid namespace {list(levels)!r}: levels must not contain 0x1F")
            if NUL in level:
                raise BadRequest(f"Invalid namespace {list(levels)!r}: levels must not contain NUL")
        return cls(tuple(levels))


@dataclass(frozen=True, slots=True)
class TableIdent:
    namespace: Namespace
    name: str

    def __post_init__(self) -> None:
        if isinstance(self.name, str) and NUL in self.name:
            raise BadRequest(f"Invalid name {self.name!r}: must not contain NUL")

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


def decode_segment(raw: str) -> str:
    """Decode one raw (still percent-encoded) path segment, rejecting malformed escapes and UTF-8."""
    if _MALFORMED_ESCAPE.search(raw):
        # `unquote` would keep a stray `%` as is; clients encode a literal `%` as `%25`.
        raise BadRequest(f"Invalid percent-encoding in path segment {raw!r}")
    try:
        # `+` is a space: the Java client encodes path segments with `URLEncoder` (and a literal `+`
        # as `%2B`), and the reference server decodes them with `URLDecoder`.
        decoded = unquote_plus(raw, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Invalid percent-encoding in path segment {raw!r}") from exc
    if NUL in decoded:
        raise BadRequest(f"Invalid path segment {raw!r}: must not contain NUL (%00)")
    return decoded


def parse_namespace(raw: str) -> Namespace:
    """Parse a namespace path parameter or ``parent`` query value.

    ``raw`` is still percent-encoded (see `catalog.api.rawpath`); levels are split on ``%1F`` (or a
    literal 0x1F from clients that do not encode it) before each level is decoded, so a level may itself
    contain ``/``, ``.``, ``%`` or any unicode character.
    """
    if raw == "":
        raise BadRequest("Namespace must not be empty")
    normalized = raw.replace("%1F", SEPARATOR).replace("%1f", SEPARATOR)
    levels = [decode_segment(part) for part in normalized.split(SEPARATOR)]
    return Namespace.of(levels)


def parse_name(raw: str, what: str = "table") -> str:
    name = decode_segment(raw)
    if name == "":
        raise BadRequest(f"Invalid {what} name: must not be empty")
    return name
