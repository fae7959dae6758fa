"""A real Trino 476 coordinator on 127.0.0.1, with catalogs from properties text (tests, trying floe out).

The server (`io.trino:trino-server:476`, an 821 MB archive) and the CLI (`io.trino:trino-cli:476`, an
executable jar) come from Maven Central, pinned by SHA-1 and cached in floe's download cache
(`runtime.artifacts`). Only what an Iceberg catalog needs is unpacked — the server's `lib/`, the `iceberg`
plugin and the secrets plugin, 475 MB unpacked — so the coordinator loads one connector and starts in
seconds. It runs as one node (`node-scheduler.include-coordinator=true`) with a modest heap.

Trino 476 needs Java 24 or newer: `FLOE_TRINO_JAVA_HOME` names one; else `JAVA_HOME` when it is new
enough; else the newest JDK under `/usr/lib/jvm`, `/usr/local/lib/jvm` or `/opt`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering
from devtools.settings import DevSettings
from runtime.artifacts import Artifact, cache_dir, fetch
from runtime.java import java_major_version
from runtime.settings import read_settings

TRINO_VERSION = "476"
MINIMUM_JAVA = 24
SERVER = Artifact(
    "io.trino", "trino-server", TRINO_VERSION, "c9b38be4017ebd2f7095455aaac772fb40247ebe", extension="tar.gz"
)
CLI = Artifact(
    "io.trino",
    "trino-cli",
    TRINO_VERSION,
    "c835824e01842036d4e0c071b5e2b7e1d28ba299",
    classifier="executable",
)
# What an Iceberg-only coordinator needs from the archive (its other 40 connectors are 600 MB).
_UNPACKED = ("lib/", "plugin/iceberg/", "secrets-plugin/")
JDK_FOLDERS = (Path("/usr/lib/jvm"), Path("/usr/local/lib/jvm"), Path("/opt"))
INSTALL_HINT = (
    "install a JDK 24+ (e.g. Eclipse Temurin 25: https://adoptium.net, or your distribution's "
    "openjdk-25-jdk-headless) and set FLOE_TRINO_JAVA_HOME to it"
)

# Trino's recommended JVM options (its jvm.config), with a heap for one small test node.
JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=32M",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:PerMethodRecompilationCutoff=10000",
    "-XX:PerBytecodeRecompilationCutoff=10000",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "-Djdk.nio.maxCachedBufferSize=2000000",
    "-Dfile.encoding=UTF-8",
    # Tiered compilation stops early: a short-lived test server never repays C2's compile time.
    "-XX:TieredStopAtLevel=1",
)


def _java_in(home: Path) -> Path:
    return home / "bin" / "java"


def _version_or_none(java: Path) -> int | None:
    try:
        return java_major_version(str(java)) if java.is_file() else None
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return None


def find_trino_java() -> str:
    """A `java` of Java 24+ for Trino: `FLOE_TRINO_JAVA_HOME`, else `JAVA_HOME` if it is 24+, else the
    newest under the usual JDK folders; a RuntimeError saying what to install when there is none."""
    explicit = read_settings(DevSettings).trino_java_home
    if explicit is not None:
        java = _java_in(explicit.expanduser())
        version = _version_or_none(java)
        if version is None or version < MINIMUM_JAVA:
            found = "no java" if version is None else f"Java {version}"
            raise RuntimeError(
                f"FLOE_TRINO_JAVA_HOME ({explicit}) has {found}; Trino {TRINO_VERSION} needs Java "
                f"{MINIMUM_JAVA}+ ({INSTALL_HINT})"
            )
        return str(java)
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(_java_in(Path(os.environ["JAVA_HOME"]).expanduser()))
    for folder in JDK_FOLDERS:
        if folder.is_dir():
            candidates.extend(_java_in(home) for home in sorted(folder.iterdir()) if home.is_dir())
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    best: tuple[int, Path] | None = None
    for java in candidates:
        version = _version_or_none(java)
        if version is not None and version >= MINIMUM_JAVA and (best is None or version > best[0]):
            best = (version, java)
    if best is None:
        raise RuntimeError(f"No Java {MINIMUM_JAVA}+ found for Trino {TRINO_VERSION}: {INSTALL_HINT}")
    return str(best[1])


def _unpack(archive: Path, destination: Path) -> None:
    """The server's `lib/` and the plugins floe needs from `archive` into `destination`.

    The archive stores each jar once and the copies in other plugins as hard links to it (often to
    plugins left out here), so a first pass maps links to their targets and the second, one sequential
    read of the gzip stream, writes every kept file and every kept link of it."""
    top = f"trino-server-{TRINO_VERSION}/"

    def kept(name: str) -> str | None:
        relative = name.removeprefix(top)
        if relative == name or not relative.startswith(_UNPACKED) or ".." in relative.split("/"):
            return None
        return relative

    links: dict[str, list[str]] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            relative = kept(member.name)
            if member.islnk() and relative is not None:
                links.setdefault(member.linkname, []).append(relative)
    with tarfile.open(archive, "r|gz") as stream:
        for member in stream:
            if not member.isfile():
                continue
            relative = kept(member.name)
            wanted = ([relative] if relative is not None else []) + links.get(member.name, [])
            if not wanted:
                continue
            source = stream.extractfile(member)
            assert source is not None  # a regular file
            first = destination / wanted[0]
            first.parent.mkdir(parents=True, exist_ok=True)
            with first.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            for other in wanted[1:]:
                (destination / other).parent.mkdir(parents=True, exist_ok=True)
                os.link(first, destination / other)


def trino_install() -> Path:
    """The unpacked server (lib, the Iceberg plugin) in floe's cache, fetched and unpacked on first use."""
    target = cache_dir() / "trino" / f"trino-server-{TRINO_VERSION}-iceberg"
    if (target / "lib").is_dir():
        return target
    archive = fetch(SERVER)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unpacked beside the target and renamed: an interrupted unpack never looks complete.
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        _unpack(archive, partial)
        try:
            partial.replace(target)
        except OSError:  # another process unpacked it first
            if not (target / "lib").is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def trino_cli() -> Path:
    """The CLI's executable jar from floe's cache (`java -jar trino-cli-476-executable.jar`)."""
    return fetch(CLI)


class TrinoQueryError(RuntimeError):
    """A query Trino answered with an error; the message is Trino's."""

    def __init__(self, message: str, error_name: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def _error_text(error: dict[str, Any]) -> str:
    """Trino's message and those of its causes (what `trino --debug` shows): a connector's message
    ("Failed to create transaction") often hides the catalog's own answer in a cause."""
    messages = [str(error.get("message"))]
    failure = error.get("failureInfo")
    while isinstance(failure, dict):
        message = failure.get("message")
        if message and message not in messages:
            messages.append(str(message))
        failure = failure.get("cause")
    return "\n  caused by: ".join(messages)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]


class LocalTrino:
    """One Trino coordinator on 127.0.0.1: `with LocalTrino(dir, {"floe": text}) as trino: trino.query(sql)`.

    `catalogs` maps catalog names to the text of their properties files (`etc/catalog/<name>.properties`),
    written as given. `data_dir` holds `etc/`, the node's data and `server.log`.
    """

    def __init__(
        self,
        data_dir: Path,
        catalogs: dict[str, str],
        *,
        heap: str = "2G",
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.catalogs = catalogs
        self.heap = heap
        self.extra_env = env or {}
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.java = ""
        self.log_path = data_dir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_etc(self, install: Path) -> Path:
        etc = self.data_dir / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        (etc / "node.properties").write_text(
            "node.environment=floe_test\n"
            f"node.id={uuid.uuid4()}\n"
            f"node.data-dir={self.data_dir / 'data'}\n"
            "node.bind-ip=127.0.0.1\n"
            "node.internal-address=127.0.0.1\n"
        )
        (etc / "jvm.config").write_text("\n".join([*JVM_OPTIONS, f"-Xmx{self.heap}"]) + "\n")
        (etc / "config.properties").write_text(
            "coordinator=true\n"
            "node-scheduler.include-coordinator=true\n"
            f"http-server.http.port={self.port}\n"
            f"discovery.uri=http://127.0.0.1:{self.port}\n"
            f"plugin.dir={install / 'plugin'}\n"
            f"catalog.config-dir={etc / 'catalog'}\n"
            "query.max-memory=1GB\n"
            "query.max-memory-per-node=512MB\n"
            # Lean: no web UI, no HTTP request log, few threads for one tiny node.
            "web-ui.enabled=false\n"
            "http-server.log.enabled=false\n"
            "task.concurrency=2\n"
            "task.max-worker-threads=4\n"
            "query.min-expire-age=1m\n"
        )
        (etc / "log.properties").write_text("io.trino=WARN\nio.airlift=WARN\n")
        for name, text in self.catalogs.items():
            (etc / "catalog" / f"{name}.properties").write_text(text)
        return etc

    def start(self, timeout: float = 180) -> LocalTrino:
        self.java = find_trino_java()
        install = trino_install()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        etc = self._write_etc(install)
        jvm = [line for line in (etc / "jvm.config").read_text().splitlines() if line]
        command = [
            self.java,
            *jvm,
            f"-Dconfig={etc / 'config.properties'}",
            f"-Dlog.levels-file={etc / 'log.properties'}",
            f"-Dlog.output-file={self.log_path}",
            *(
                f"-D{line}"
                for line in (etc / "node.properties").read_text().splitlines()
                if line and not line.startswith("#")
            ),
            "-cp",
            str(install / "lib" / "*"),
            "io.trino.server.TrinoServer",
        ]
        console = (self.data_dir / "console.log").open("ab")
        self.process = subprocess.Popen(
            command,
            cwd=self.data_dir,
            env={**os.environ, **self.extra_env},
            stdout=console,
            stderr=subprocess.STDOUT,
        )
        wait_until_answering(
            self.process, f"{self.url}/v1/info", name="Trino", timeout=timeout, log_text=self.log_text
        )
        deadline = time.monotonic() + timeout
        while httpx.get(f"{self.url}/v1/info", timeout=5).json().get("starting", True):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"Trino did not finish starting: {self.log_text()[-3000:]}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def log_text(self) -> str:
        parts = [
            p.read_text(errors="replace")
            for p in (self.data_dir / "console.log", self.log_path)
            if p.exists()
        ]
        return "\n".join(parts)

    def query(self, sql: str, *, catalog: str | None = None, schema: str | None = None) -> QueryResult:
        """Run one statement over Trino's HTTP protocol; its columns and rows, or `TrinoQueryError`.

        NO_NODES_AVAILABLE is refused before the statement runs anything: the single-node cluster's
        coordinator briefly lists no active node when its own announcement lapses (seen once in a full
        suite run), so such a statement is sent again for up to 30 s."""
        deadline = time.monotonic() + 30
        while True:
            try:
                return self._query_once(sql, catalog=catalog, schema=schema)
            except TrinoQueryError as exc:
                if exc.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def _query_once(self, sql: str, *, catalog: str | None, schema: str | None) -> QueryResult:
        headers = {"X-Trino-User": "floe-test"}
        if catalog:
            headers["X-Trino-Catalog"] = catalog
        if schema:
            headers["X-Trino-Schema"] = schema
        columns: list[str] = []
        rows: list[list[Any]] = []
        with httpx.Client(timeout=300, headers=headers) as client:
            answer = client.post(f"{self.url}/v1/statement", content=sql.encode()).json()
            while True:
                if "error" in answer:
                    error = answer["error"]
                    raise TrinoQueryError(_error_text(error), str(error.get("errorName")))
                if answer.get("columns") and not columns:
                    columns = [c["name"] for c in answer["columns"]]
                rows.extend(answer.get("data") or [])
                next_uri = answer.get("nextUri")
                if not next_uri:
                    return QueryResult(columns, rows)
                answer = client.get(next_uri).json()

    def rows(self, sql: str, **kwargs: Any) -> list[tuple[Any, ...]]:
        """`query`'s rows as tuples."""
        return [tuple(row) for row in self.query(sql, **kwargs).rows]

    def cli(self, *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run Trino's own CLI against this server (`--server` given), as a user would."""
        return subprocess.run(
            [self.java, "-jar", str(trino_cli()), "--server", self.url, "--user", "floe-test", *arguments],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def __enter__(self) -> LocalTrino:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
