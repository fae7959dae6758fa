"""The Apache Iceberg REST Compatibility Kit (RCK) run against a live REST catalog.

The kit is Iceberg's own catalog test suite (`CatalogTests`, `ViewCatalogTests`) driven through the Java
`RESTCatalog` client: `org.apache.iceberg:iceberg-open-api:1.11.0` with the classifiers `tests` and
`test-fixtures`. Its runtime classpath is pinned by SHA-1 in `devtools/data/iceberg-rck-1.11.0-classpath.txt`
and fetched once into floe's jar cache (`runtime.artifacts`). The JUnit console launcher runs the two kit
classes against a remote server (`rck.local=false`); the client's catalog properties come from `CATALOG_*`
environment variables, as the kit reads them (`CATALOG_OAUTH2__SERVER__URI` is `oauth2-server-uri`). The
outcome is read from the launcher's JUnit XML report. Needs Java 17+.

    python -m devtools.rck --uri http://127.0.0.1:8181 --credential id:secret --warehouse default
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from devtools.pins import maven_artifact, pin_lines
from runtime.artifacts import Artifact, fetch
from runtime.java import find_java

RCK_VERSION = "1.11.0"
MINIMUM_JAVA = 17
LAUNCHER_CLASS = "org.junit.platform.console.ConsoleLauncher"
KIT_CLASSES = (
    "org.apache.iceberg.rest.RESTCompatibilityKitCatalogTests",
    "org.apache.iceberg.rest.RESTCompatibilityKitViewCatalogTests",
)

RCK_CLASSPATH: tuple[Artifact, ...] = tuple(
    maven_artifact(*line.split()) for line in pin_lines(f"iceberg-rck-{RCK_VERSION}-classpath.txt")
)

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One kit test: `Class.method` or `Class.method[n]` (simple class name), its status and, when not
    passed, why."""

    name: str
    status: Status
    message: str = ""


@dataclass(frozen=True, slots=True)
class RCKReport:
    """Every kit test's outcome, from the launcher's JUnit XML report."""

    outcomes: tuple[TestOutcome, ...]

    def counts(self) -> dict[Status, int]:
        """Tests per status (every status present, zero when none)."""
        counted = Counter(outcome.status for outcome in self.outcomes)
        return {"passed": counted["passed"], "failed": counted["failed"], "skipped": counted["skipped"]}

    def failed(self) -> dict[str, str]:
        """Failed test → its failure message."""
        return {outcome.name: outcome.message for outcome in self.outcomes if outcome.status == "failed"}

    def passed(self) -> set[str]:
        return {outcome.name for outcome in self.outcomes if outcome.status == "passed"}


def rck_classpath() -> list[Path]:
    """The kit's jars from floe's cache, downloaded (in parallel, SHA-1-verified) on first use."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(fetch, RCK_CLASSPATH))


def java_executable() -> str:
    return find_java(
        f"The Iceberg REST Compatibility Kit {RCK_VERSION}",
        "install a JDK, e.g. Debian's openjdk-17-jre-headless, or set JAVA_HOME",
        MINIMUM_JAVA,
    )


def catalog_environment(uri: str, credential: str, warehouse: str) -> dict[str, str]:
    """The `CATALOG_*` variables the kit turns into the client's catalog properties (`_` is `.`,
    `__` is `-`)."""
    return {
        "CATALOG_URI": uri,
        "CATALOG_CREDENTIAL": credential,
        "CATALOG_WAREHOUSE": warehouse,
        "CATALOG_OAUTH2__SERVER__URI": f"{uri.rstrip('/')}/v1/oauth/tokens",
    }


def _test_name(testcase: ElementTree.Element) -> str:
    """`Class.method`, or `Class.method[n]` for the n-th invocation of a parameterized test (the legacy
    XML report names cases `method()` and `method(Type)[n]` in fully qualified classes)."""
    simple_class = testcase.get("classname", "").rsplit(".", 1)[-1]
    name = testcase.get("name", "")
    method, _, rest = name.partition("(")
    invocation = rest[rest.index("[") :] if "[" in rest else ""
    return f"{simple_class}.{method}{invocation}"


def _failure_text(element: ElementTree.Element) -> str:
    kind = element.get("type", "")
    lines = (element.text or "").strip().splitlines()
    message = element.get("message") or (lines[0] if lines else "")
    return f"{kind}: {message}" if kind else message


def parse_reports(reports_dir: Path) -> RCKReport:
    """The outcomes in every `TEST-*.xml` under `reports_dir` (the console launcher's legacy XML report)."""
    outcomes: list[TestOutcome] = []
    for report in sorted(reports_dir.glob("TEST-*.xml")):
        for testcase in ElementTree.parse(report).getroot().iter("testcase"):
            name = _test_name(testcase)
            problem = testcase.find("failure")
            if problem is None:
                problem = testcase.find("error")
            if problem is not None:
                outcomes.append(TestOutcome(name, "failed", _failure_text(problem)))
            elif (skipped := testcase.find("skipped")) is not None:
                outcomes.append(TestOutcome(name, "skipped", skipped.get("message", "")))
            else:
                outcomes.append(TestOutcome(name, "passed"))
    return RCKReport(tuple(outcomes))


def run_rck(
    uri: str,
    credential: str,
    warehouse: str,
    reports_dir: Path,
    *,
    names_with_dot: bool = True,
    timeout: float = 1800,
) -> RCKReport:
    """Run the kit's catalog and view tests against the REST catalog at `uri` with OAuth2 client
    credentials (`client_id:secret`), then parse the report it writes to `reports_dir`.

    The launcher's console output is kept in `reports_dir/console.txt`; its exit status (non-zero when a test
    failed) is not an error here, the report is the result. A run that writes no report raises.
    """
    java = java_executable()
    classpath = os.pathsep.join(str(path) for path in rck_classpath())
    reports_dir.mkdir(parents=True, exist_ok=True)
    # Only the variables given here reach the kit: a developer's own CATALOG_* must not leak into the run.
    env = {key: value for key, value in os.environ.items() if not key.startswith("CATALOG_")}
    env.update(catalog_environment(uri, credential, warehouse))
    command = [
        java,
        "-Drck.local=false",
        "-Drck.requires-namespace-create=true",
        f"-Drck.supports-names-with-dot={str(names_with_dot).lower()}",
        "-cp",
        classpath,
        LAUNCHER_CLASS,
        "execute",
        "--disable-banner",
        "--details=tree",
        "--reports-dir",
        str(reports_dir),
        *(f"--select-class={name}" for name in KIT_CLASSES),
    ]
    with (reports_dir / "console.txt").open("wb") as console:
        subprocess.run(
            command, env=env, stdout=console, stderr=subprocess.STDOUT, timeout=timeout, check=False
        )
    report = parse_reports(reports_dir)
    if not report.outcomes:
        console_text = (reports_dir / "console.txt").read_text(errors="replace")
        raise RuntimeError(f"The RCK wrote no test report to {reports_dir}: {console_text[-3000:]}")
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the kit against a running catalog and print every failure and the counts."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uri", required=True, help="the catalog's base URL")
    parser.add_argument("--credential", required=True, help="OAuth2 client credentials, client_id:secret")
    parser.add_argument("--warehouse", default="default")
    parser.add_argument("--reports-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    reports_dir = args.reports_dir or Path(tempfile.mkdtemp(prefix="floe-rck-"))
    report = run_rck(args.uri, args.credential, args.warehouse, reports_dir)
    for name, message in sorted(report.failed().items()):
        print(f"FAILED {name}: {message}")
    print(f"{report.counts()} (reports in {reports_dir})")
    return 1 if report.failed() else 0


if __name__ == "__main__":
    raise SystemExit(main())
