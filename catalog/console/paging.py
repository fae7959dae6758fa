"""Pages of the console's listings: a page renders and polls a bounded number of rows, however many
clusters and tables there are (issue 29: a cluster of 2,000 tables made each overview poll take 77 s
and 2.6 MB)."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.errors import BadRequest

# The overview: clusters per page, and tables per page of each cluster (at most 200 rows a poll).
CLUSTERS_PER_PAGE = 10
TABLES_PER_PAGE = 20
# The keys page: a cluster may hold `FLOE_QUOTA_KEYS` (1,000) keys, a global administrator sees all.
KEYS_PER_PAGE = 50
_MAX_PAGE_DIGITS = 7


def page_number(raw: str | None) -> int:
    """A `page` query parameter: a positive number (1 when absent)."""
    if raw is None or raw == "":
        return 1
    if not raw.isascii() or not raw.isdigit() or len(raw) > _MAX_PAGE_DIGITS or int(raw) < 1:
        raise BadRequest("Invalid page: expected a positive number")
    return int(raw)


@dataclass(frozen=True, slots=True)
class Pages:
    """Page `number` (1-based, within the pages there are) of `total` items, `size` a page."""

    number: int
    size: int
    total: int

    @classmethod
    def of(cls, requested: int, size: int, total: int) -> Pages:
        """The requested page, or the last one when it lies beyond."""
        return cls(max(1, min(requested, -(-total // size))), size, total)

    @property
    def count(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    @property
    def first(self) -> int:
        """The 1-based position of the page's first item (0 when there are none)."""
        return min(self.offset + 1, self.total)

    @property
    def last(self) -> int:
        return min(self.offset + self.size, self.total)

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.count else None
