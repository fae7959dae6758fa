"""A real Schema Registry for floe's registry mode, on 127.0.0.1 (its client is `ingest.registry_client`).

The registry is Apicurio Registry, run from Maven Central artifacts only and kept in memory (its
embedded in-memory H2 store: nothing to install, nothing persisted). floe talks to it through its
Confluent-compatible API, `http://127.0.0.1:<port>/apis/ccompat/v7`, which is what registry mode (and
any Confluent serializer) expects. Used by `floe dev schema-registry`, the tests and the quick start.

Why Apicurio 2.4.2.Final (checked on Maven Central):
- 3.x: `apicurio-registry-app` 3.3.3 is compiled for Java 21; the 3.0.9 and 3.3.2 POMs name a parent
  POM Maven Central does not have, so their dependencies cannot be resolved. No 3.x runs on Java 17.
- 2.5.x and 2.6.x need Apicurio modules that were never published there (`apicurio-registry-utils-kafka`,
  `apicurio-common-app-components-*`). 2.4.2.Final is the newest whose dependencies all are, with two
  substitutions: `com.github.erosb:everit-json-schema` (the same `org.everit.json.schema` classes) for
  the jitpack-only `com.github.everit-org.json-schema`, and the config-index extension's deployment jar
  at 0.1.10.Final (identical build step) as 0.1.18.Final's is missing.
- No version ships the Quarkus `-runner.jar` there (only GitHub releases do); the published app jar is
  the plain, not yet "augmented" Quarkus application.

So floe does Quarkus's production build itself, once: the application model Quarkus's Maven plugin
computes for that jar (every dependency with its Quarkus flags) is pinned by SHA-1 in
`devtools/data/apicurio-2.4.2.Final-model.txt`, fetched into floe's jar cache (`runtime.artifacts`), and
handed to Quarkus's bootstrap API by a small Java program (`devtools/data/QuarkusAugment.java`, run in the
JVM's source-file mode, so the one-time build needs a JDK). The output
(Apicurio's own packaging: a runner jar and its lib/) is cached in `~/.cache/floe/apicurio`; every later
start is a plain `java -jar`. Neither Maven nor the network is needed after the first run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from devtools.pins import data_text, maven_artifact, pin_lines
from devtools.ports import free_port, port_is_free
from devtools.processes import stop_process, wait_until_answering
from runtime.artifacts import Artifact, cache_dir, fetch
from runtime.java import find_java

APICURIO_VERSION = "2.4.2.Final"
QUARKUS_VERSION = "2.16.4.Final"
MINIMUM_JAVA = 17
CCOMPAT_PATH = "/apis/ccompat/v7"

APICURIO_APP = Artifact(
    "io.apicurio", "apicurio-registry-app", APICURIO_VERSION, "17239ca86e70b71ae6387f3881f1e722cec8f8b2"
)

_MODEL_FILE = f"apicurio-{APICURIO_VERSION}-model.txt"
_AUGMENT_FILE = "QuarkusAugment.java"


def _model_entry(line: str) -> tuple[int, Artifact]:
    flags, coordinates, sha1 = line.split()
    return int(flags), maven_artifact(coordinates, sha1)


APICURIO_MODEL: tuple[tuple[int, Artifact], ...] = tuple(
    _model_entry(line) for line in pin_lines(_MODEL_FILE)
)

# Quarkus's production build ("augmentation") from an application model floe pins instead of Maven
# resolving it; the same steps as Quarkus's own re-augmentation of mutable jars (ReaugmentTask).
# Manifest lines (tab-separated): `app <coords> <jar>`, `dep <flags> <coords> <jar>`,
# `platform <key> <value>`, `property <key> <value>`; coords are group:name:classifier:type:version.
_AUGMENT_SOURCE = data_text(_AUGMENT_FILE)

# The application's name in its logs and the runner jar's base name.
_BASE_NAME = f"apicurio-registry-{APICURIO_VERSION}"
_BUILD_PROPERTIES = {
    "quarkus.application.name": "apicurio-registry",
    "quarkus.application.version": APICURIO_VERSION,
    "quarkus.version": QUARKUS_VERSION,
}
# The quarkus-bom platform property the build's config refers to (`quarkus.native.builder-image`).
_PLATFORM_PROPERTIES = {"platform.quarkus.native.builder-image": "mandrel"}


def _build_key() -> str:
    """Changes whenever anything that goes into the build does, so a stale build is never reused."""
    digest = hashlib.sha256()
    # The pins and the Java source hashed as they read when they were Python literals (a leading newline,
    # no comments), so registries built before they became data files stay valid.
    pins = "".join(f"\n{line}" for line in pin_lines(_MODEL_FILE)) + "\n"
    for part in (APICURIO_APP.sha1, pins, "\n" + _AUGMENT_SOURCE, repr(_BUILD_PROPERTIES)):
        digest.update(part.encode())
    return digest.hexdigest()[:12]


def registry_build_dir() -> Path:
    """Where the built registry (runner jar + lib/) is cached: `~/.cache/floe/apicurio/<version>-<key>`."""
    return cache_dir() / "apicurio" / f"{APICURIO_VERSION}-{_build_key()}"


def runner_jar_path() -> Path:
    return registry_build_dir() / f"{_BASE_NAME}-runner.jar"


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Across processes: two first starts at once build the registry once, not twice."""
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _manifest(app: Path, jars: list[Path]) -> str:
    lines = [f"app\t{APICURIO_APP.group}:{APICURIO_APP.name}::jar:{APICURIO_APP.version}\t{app}"]
    for (flags, artifact), jar in zip(APICURIO_MODEL, jars, strict=True):
        lines.append(f"dep\t{flags}\t{artifact.group}:{artifact.name}::jar:{artifact.version}\t{jar}")
    lines += [f"platform\t{key}\t{value}" for key, value in _PLATFORM_PROPERTIES.items()]
    lines += [f"property\t{key}\t{value}" for key, value in _BUILD_PROPERTIES.items()]
    return "\n".join(lines) + "\n"


def build_registry(java: str | None = None, *, timeout: float = 1800) -> Path:
    """The registry's runner jar: built once per machine from the pinned jars (downloaded first if needed)."""
    runner = runner_jar_path()
    if runner.exists():
        return runner
    build_dir = runner.parent
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(build_dir.with_name(build_dir.name + ".lock")):
        if runner.exists():
            return runner  # Another process built it while this one waited.
        java = java or java_executable()
        with ThreadPoolExecutor(max_workers=8) as pool:
            app = pool.submit(fetch, APICURIO_APP)
            jars = list(pool.map(fetch, [artifact for _, artifact in APICURIO_MODEL]))
            app_jar = app.result()
        work = Path(tempfile.mkdtemp(prefix=f"{build_dir.name}.", suffix=".part", dir=build_dir.parent))
        try:
            manifest = work / "model.tsv"
            manifest.write_text(_manifest(app_jar, jars))
            source = work / "QuarkusAugment.java"
            source.write_text(_AUGMENT_SOURCE)
            output = work / "registry"
            log = work / "build.log"
            classpath = os.pathsep.join(str(jar) for jar in jars)
            command = [java, "-Xmx1g", "-cp", classpath, str(source), str(manifest), str(output), _BASE_NAME]
            with log.open("wb") as out:
                result = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=work,
                    timeout=timeout,
                    check=False,
                )
            if result.returncode != 0 or not (output / runner.name).is_file():
                hint = ""
                if not (Path(java).resolve().parent / "javac").exists():
                    hint = f" (building it once needs a JDK, not only a JRE: {java} has no javac next to it)"
                raise RuntimeError(
                    f"Building Apicurio Registry {APICURIO_VERSION} failed ({result.returncode}){hint}:\n"
                    f"{log.read_text(errors='replace')[-3000:]}"
                )
            if build_dir.exists():
                shutil.rmtree(build_dir)  # An incomplete leftover (its runner jar is gone).
            output.rename(build_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return runner


def java_executable() -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH; Java 17 or newer (a JDK for the one-time build)."""
    return find_java(
        "the schema registry", "a JDK, e.g. Debian's openjdk-17-jdk-headless, or set JAVA_HOME", MINIMUM_JAVA
    )


class LocalSchemaRegistry:
    """Apicurio Registry, in memory, on 127.0.0.1: `with LocalSchemaRegistry() as registry: registry.url`.

    `url` is the Confluent-compatible base URL (what floe.yaml's `schema_registry.url` and Confluent
    serializers take). Every start begins empty. The JVM's output goes to `log_path`, in `log_dir` (a
    temporary directory, removed on exit, unless one is given).
    """

    def __init__(self, port: int | None = None, *, heap: str = "256m", log_dir: Path | None = None) -> None:
        self.port = port
        self.heap = heap
        self.owns_log_dir = log_dir is None
        self.log_dir = Path(tempfile.mkdtemp(prefix="floe-registry-")) if log_dir is None else Path(log_dir)
        self.process: subprocess.Popen[bytes] | None = None
        # Seconds from launching the JVM until the API answered, and (first run only) to download and build.
        self.startup_seconds: float | None = None
        self.build_seconds: float | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("The schema registry has no port yet: start() it first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API: `http://127.0.0.1:<port>/apis/ccompat/v7`."""
        return self.base_url + CCOMPAT_PATH

    @property
    def log_path(self) -> Path:
        return self.log_dir / "registry.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, characters: int = 4000) -> str:
        if not self.log_path.exists():
            return "(no log output)"
        return self.log_path.read_text(errors="replace")[-characters:]

    def start(self, timeout: float = 180) -> LocalSchemaRegistry:
        """Build the registry when not cached yet, start the JVM and wait until its API answers."""
        if self.running:
            return self
        if self.process is not None:
            self.stop()  # It exited on its own: reap it before starting anew.
        java = java_executable()
        build_started = time.monotonic()
        already_built = runner_jar_path().exists()
        runner = build_registry(java)
        self.build_seconds = None if already_built else time.monotonic() - build_started
        if self.port is None:
            self.port = free_port()
        elif not port_is_free(self.port):
            raise RuntimeError(
                f"Port {self.port} on 127.0.0.1 is already in use; choose another registry port"
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [java, *self._jvm_options(), "-jar", str(runner)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.log_dir,
                    # Its own session: a terminal's Ctrl-C reaches floe, which then stops the JVM.
                    start_new_session=True,
                )
            wait_until_answering(
                self.process,
                self.url + "/subjects",
                name=f"Apicurio Registry {APICURIO_VERSION}",
                timeout=timeout,
                log_text=self.log_tail,
                interval=0.25,
            )
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _jvm_options(self) -> list[str]:
        return [
            "-Xms64m",
            f"-Xmx{self.heap}",
            # A dev registry serves a handful of requests: one GC thread and the quick compiler use the
            # least CPU on a shared machine, and start sooner.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            # Apicurio's in-memory H2 store; its production pool of 20 connections is more than needed.
            "-Dquarkus.datasource.jdbc.initial-size=2",
            "-Dquarkus.datasource.jdbc.min-size=2",
        ]

    def stop(self) -> None:
        """SIGTERM (Quarkus's graceful shutdown), then SIGKILL after 15 s."""
        stop_process(self.process)
        self.process = None

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self.owns_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
