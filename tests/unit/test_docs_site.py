"""The documentation site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: a broken link or anchor,
a page missing from the nav or a nav entry without its page fails the suite. README stays short and links
into the site, and the quick start's first query is README's, word for word."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
QUICKSTART_BLOCK = re.compile(r"<!-- quickstart: duckdb -->\n```python\n(.*?)\n```\n", re.DOTALL)


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """mkdocs.yml's `!!python/name:` tags (superfences' Mermaid fence) read as plain text."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)


def nav_pages(entries: Any) -> list[str]:
    """Every page the nav names, in order."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "floe-yaml" / "index.html").exists()


def test_every_nav_page_exists_and_every_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    pages = nav_pages(config["nav"])
    assert len(pages) == len(set(pages)), "a page is twice in the nav"
    missing = [page for page in pages if not (DOCS / page).is_file()]
    assert not missing, f"nav pages without a file: {missing}"
    on_disk = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert on_disk == set(pages), f"pages not in the nav: {sorted(on_disk - set(pages))}"
    # Issue 33's pages, by topic.
    for page in (
        "quickstart.md",
        "concepts.md",
        "reference/floe-yaml.md",
        "sources.md",
        "upsert.md",
        "engines.md",
        "console.md",
        "operations/status.md",
        "operations/maintenance.md",
        "operations/backups-upgrades.md",
        "operations/sizing.md",
        "deployment/index.md",
        "deployment/containers.md",
        "deployment/spark-cluster.md",
        "deployment/s3-glue.md",
        "security.md",
        "reference/configuration.md",
        "architecture/index.md",
    ):
        assert page in pages, page


def test_the_architecture_page_has_a_diagram_and_the_console_page_a_screenshot() -> None:
    assert "```mermaid\n" in (DOCS / "architecture" / "index.md").read_text(encoding="utf-8")
    console = (DOCS / "console.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", console)
    assert images, "the console page shows no screenshot"
    for image in images:
        assert (DOCS / image).is_file(), image


def test_readme_is_short_and_its_links_into_the_site_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link


def test_the_quick_start_page_runs_readmes_first_query() -> None:
    """tests/e2e/test_quickstart.py runs README's block; the site's quick start shows the same one."""
    (readme,) = QUICKSTART_BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    (page,) = QUICKSTART_BLOCK.findall((DOCS / "quickstart.md").read_text(encoding="utf-8"))
    assert page == readme
