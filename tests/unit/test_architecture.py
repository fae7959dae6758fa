"""Package boundaries: dependencies run one way (issue 10, section 1), checked on the source.

Every module of floe's packages is parsed with `ast` and each of its imports (module level, function level,
under `if TYPE_CHECKING:`) is checked against the rules below:

    floe.cli ──► everything (the `floe` command line is the one place that wires all parts together)
    ingest, maintenance ──► runtime, and the catalog's public surface (CATALOG_SURFACE) only; never floe
    catalog (server) ──► nothing of floe, ingest, maintenance, runtime, devtools
    runtime ──► no floe package;  devtools ──► runtime only
    nothing but floe.cli imports floe.cli; no package imports tests or benchmarks

and no production module is longer than MAX_MODULE_LINES (the developers' guide), but for the modules of
OVER_THE_LIMIT, each being split; that list only shrinks (a listed module back under the limit fails).

Tests and benchmarks may import anything (they exercise the command line and start dev components).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("floe", "catalog", "ingest", "maintenance", "runtime", "devtools")
CLI = "floe.cli"
TEST_CODE = ("tests", "benchmarks")

# What ingest/ and maintenance/ may import from the catalog: its public, typed surface, each with why.
# (Other engineers may rename these modules: keep this list in step, never widen it to all of `catalog`.)
CATALOG_SURFACE: dict[str, str] = {
    "catalog.pipelines": "the floe.yaml model: tables, schemas, maintenance policies",
    "catalog.client": "the typed management/catalog HTTP client (OAuth2 client credentials)",
    "catalog.kafka_offsets": (
        "the snapshot-summary keys of the exactly-once fence: ingestion writes them, the catalog checks "
        "them, so both sides take them from one definition"
    ),
    "catalog.metadata_files": (
        "how a metadata file is named for each codec: the catalog writes them, maintenance removes old "
        "ones, so both recognize them by one rule (pure, no I/O)"
    ),
    "catalog.s3_files": (
        "the FileIO that writes an S3 file with one request: the catalog's metadata files and ingestion's "
        "data files, one definition of how floe writes to S3"
    ),
}

# Packages a package must never import (beyond the rules on floe.cli, tests and the catalog surface).
# `floe` is the command line's package: nothing below it imports it (floe.cli imports them).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "catalog": ("floe", "ingest", "maintenance", "runtime", "devtools"),
    "ingest": ("floe", "maintenance", "devtools"),
    "maintenance": ("floe", "ingest", "devtools"),
    "runtime": ("floe", "catalog", "ingest", "maintenance", "devtools"),
    "devtools": ("floe", "catalog", "ingest", "maintenance"),
}

# The developers' guide: production modules are at most this long (split one you push over).
MAX_MODULE_LINES = 600
# Modules over the limit today, each with who is splitting it. Only remove entries: the test fails when a
# listed module is back under the limit (so the list cannot go stale) and when any other module is over it.
OVER_THE_LIMIT: dict[str, str] = {}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(*packages: str) -> Iterator[Path]:
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


ALL_MODULES = frozenset(module_name(path) for path in source_files(*PACKAGES, *TEST_CODE))


def imports_of(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module `source` imports, anywhere in it; `from a import b` counts as `a.b` when that is
    a module of the tree, else as `a`. Relative imports are resolved against `module`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in ALL_MODULES else base)
    return found


def violation(importer: str, imported: str) -> str | None:
    """Why `importer` must not import `imported`, or None when it may."""
    top = importer.split(".")[0]
    if any(within(imported, test_code) for test_code in TEST_CODE):
        return "production code never imports tests or benchmarks"
    if within(importer, CLI):
        return None
    if within(imported, CLI):
        return "only the command line itself imports floe.cli"
    for forbidden in FORBIDDEN.get(top, ()):
        if within(imported, forbidden):
            return f"{top} never imports {forbidden}"
    in_surface = any(within(imported, allowed) for allowed in CATALOG_SURFACE)
    if top in ("ingest", "maintenance") and within(imported, "catalog") and not in_surface:
        return f"{top} uses the catalog only through {', '.join(CATALOG_SURFACE)}"
    return None


def test_imports_follow_the_package_boundaries() -> None:
    problems = []
    for path in source_files(*PACKAGES):
        module = module_name(path)
        for imported in sorted(imports_of(path.read_text(), module, is_package=path.name == "__init__.py")):
            reason = violation(module, imported)
            if reason:
                problems.append(f"{path.relative_to(ROOT)}: imports {imported} ({reason})")
    assert not problems, "\n".join(problems)


def module_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_production_module_is_over_the_line_limit() -> None:
    over = {
        str(path.relative_to(ROOT)): lines
        for path in source_files(*PACKAGES)
        if (lines := module_lines(path)) > MAX_MODULE_LINES
    }
    unlisted = {module: lines for module, lines in over.items() if module not in OVER_THE_LIMIT}
    assert not unlisted, f"over {MAX_MODULE_LINES} lines (split them): {unlisted}"


def test_each_module_over_the_limit_still_is() -> None:
    for module in sorted(OVER_THE_LIMIT):
        path = ROOT / module
        assert path.exists(), f"{module} is gone: remove it from OVER_THE_LIMIT"
        lines = module_lines(path)
        assert lines > MAX_MODULE_LINES, (
            f"{module} is {lines} lines, within the limit now: remove it from OVER_THE_LIMIT"
        )


def test_the_catalog_surface_exists() -> None:
    for module in CATALOG_SURFACE:
        assert module in ALL_MODULES, f"{module} is gone: update CATALOG_SURFACE to its new name"


def test_the_checker_sees_every_kind_of_import() -> None:
    source = """
from typing import TYPE_CHECKING
import ingest.service
from catalog import pipelines
if TYPE_CHECKING:
    from devtools.kafka_broker import LocalKafka
def later():
    from . import metrics
    from ..cli import main
"""
    assert imports_of(source, "maintenance.worker") == {
        "typing",
        "ingest.service",
        "catalog.pipelines",
        "devtools.kafka_broker",
        "maintenance.metrics",
        "cli",
    }
    assert imports_of("from .output import console", "floe.cli", is_package=True) == {"floe.cli.output"}


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("catalog.service.tables", "ingest.service", False),
        ("catalog.api.app", "runtime.spark", False),
        ("catalog.store", "devtools.postgres", False),
        ("catalog.service.tables", "floe.cli", False),
        ("catalog.api.app", "floe", False),
        ("catalog.settings", "floe.cli.settings", False),
        ("ingest.service", "floe.cli.output", False),
        ("maintenance.worker", "floe", False),
        ("devtools.catalog_server", "floe.cli", False),
        ("runtime.spark", "floe.cli.services", False),
        ("floe.cli", "catalog.service.tables", True),
        ("floe.cli.maintain", "maintenance.worker", True),
        ("floe.cli.up", "devtools.kafka_broker", True),
        ("floe.cli.ingest", "ingest.service", True),
        ("floe.cli.status", "tests.conftest", False),
        ("ingest.service", "runtime.spark", True),
        ("ingest.service", "maintenance.worker", False),
        ("ingest.service", "devtools.kafka_broker", False),
        ("ingest.tables", "catalog.pipelines.config", True),
        ("ingest.batches", "catalog.kafka_offsets", True),
        ("ingest.service", "catalog.store", False),
        ("ingest.service", "floe.cli.services", False),
        ("maintenance.worker", "ingest.spark", False),
        ("maintenance.worker", "catalog.client", True),
        ("maintenance.worker", "catalog.settings", False),
        ("runtime.spark", "catalog.pipelines", False),
        ("devtools.kafka_broker", "runtime.artifacts", True),
        ("devtools.catalog_server", "catalog.settings", False),
        ("devtools.catalog_server", "benchmarks.catalog", False),
    ],
)
def test_the_rules(importer: str, imported: str, allowed: bool) -> None:
    assert (violation(importer, imported) is None) is allowed
