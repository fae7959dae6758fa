"""The Apache Iceberg REST Compatibility Kit against a real `floe serve`, once per backend.

Iceberg's own catalog and view test suites (`RESTCompatibilityKitCatalogTests`,
`RESTCompatibilityKitViewCatalogTests` of `iceberg-open-api:1.11.0`) run through the Java `RESTCatalog` with
OAuth2 client credentials and names with dots allowed (`devtools/rck.py`). Every failure fails this test
unless `DEVIATIONS` lists it with the reason floe differs; a listed test that passes fails it too, so the
list only ever names real differences.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.catalog_server import CatalogProcess
from devtools.rck import parse_reports, run_rck

# Tests the kit runs with these settings (the reference server: 144 pass and 13 are skipped).
KIT_TESTS = 157

# Kit test (`Class.method`) → why floe answers differently from the Java reference.
DEVIATIONS: dict[str, str] = {
    "RESTCompatibilityKitCatalogTests.testLoadTableWithMissingMetadataFile": (
        "deliberate: floe serves a table's metadata from its database, so a table whose current metadata "
        "file was deleted from storage still loads (the reference reads the file and fails)"
    ),
}

# Top-level folders the kit's namespaces get in a warehouse at /tmp (`ns`, `ns1`, `newdb`, `other_ns`, …).
KIT_FOLDER = re.compile(r"ns.*|newdb|other_ns")
# The kit's table at a custom location (`file:/tmp/a/t1-<random>`): its folder, not /tmp/a, is this run's.
KIT_CUSTOM = Path("/tmp/a")
KIT_CUSTOM_TABLE = re.compile(r"t1-[0-9a-f]{12}")


@pytest.fixture
def tmp_warehouse() -> Iterator[str]:
    """/tmp as the warehouse; the kit's namespace folders created there are removed afterwards.

    The kit asks for tables at hard-coded `file:/tmp/...` locations, and floe confines every location to
    the warehouse: a warehouse at /tmp lets floe honour them, as the reference does.
    """
    tmp = Path("/tmp")
    before = {entry.name for entry in tmp.iterdir()}
    custom_before = {entry.name for entry in KIT_CUSTOM.iterdir()} if KIT_CUSTOM.is_dir() else set()
    yield "file:///tmp"
    for entry in tmp.iterdir():
        if entry.name not in before and entry.is_dir() and KIT_FOLDER.fullmatch(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
    for entry in KIT_CUSTOM.iterdir() if KIT_CUSTOM.is_dir() else ():
        if entry.name not in custom_before and KIT_CUSTOM_TABLE.fullmatch(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
    with contextlib.suppress(OSError):  # left while another run's table is there
        KIT_CUSTOM.rmdir()


@pytest.mark.e2e
def test_rest_compatibility_kit(fresh_database_url: str, tmp_warehouse: str, tmp_path: Path) -> None:
    env = {"FLOE_WAREHOUSE": tmp_warehouse}
    with CatalogProcess(fresh_database_url, home=tmp_path / "home", env=env) as server:
        report = run_rck(server.url, server.admin_credential, "default", tmp_path / "rck-reports")
    counts = report.counts()
    print(f"RCK: {counts}")
    assert len(report.outcomes) == KIT_TESTS, f"the kit ran {len(report.outcomes)} tests: {counts}"
    unexpected = {name: message for name, message in report.failed().items() if name not in DEVIATIONS}
    assert not unexpected, "\n\n".join(f"{name}: {message}" for name, message in sorted(unexpected.items()))
    now_passing = sorted(set(DEVIATIONS) & report.passed())
    assert not now_passing, f"deviations that pass now (remove them from DEVIATIONS): {now_passing}"
    not_run = sorted(set(DEVIATIONS) - {outcome.name for outcome in report.outcomes})
    assert not not_run, f"listed as deviations but not run by the kit: {not_run}"


def test_report_parsing_names_each_invocation(tmp_path: Path) -> None:
    """The launcher's legacy XML report: a parameterized test is one outcome per invocation."""
    kit = "org.apache.iceberg.rest.RESTCompatibilityKitCatalogTests"
    failure = "org.apache.iceberg.exceptions.ServiceFailureException"
    (tmp_path / "TEST-junit-jupiter.xml").write_text(
        f"""<testsuite name="JUnit Jupiter" tests="4">
  <testcase name="testLoadTable()" classname="{kit}" time="0.1"/>
  <testcase name="createTableTransaction(int)[1]" classname="{kit}" time="0.1"/>
  <testcase name="createTableTransaction(int)[3]" classname="{kit}" time="0.1">
    <failure message="Server error" type="{failure}">trace</failure>
  </testcase>
  <testcase name="testNamespaceWithDot()" classname="{kit}" time="0"><skipped/></testcase>
</testsuite>"""
    )
    report = parse_reports(tmp_path)
    assert report.counts() == {"passed": 2, "failed": 1, "skipped": 1}
    assert report.passed() == {
        "RESTCompatibilityKitCatalogTests.testLoadTable",
        "RESTCompatibilityKitCatalogTests.createTableTransaction[1]",
    }
    assert report.failed() == {
        "RESTCompatibilityKitCatalogTests.createTableTransaction[3]": (
            "org.apache.iceberg.exceptions.ServiceFailureException: Server error"
        )
    }
