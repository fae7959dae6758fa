"""Lakekeeper, a Rust Iceberg REST catalog, as a local peer for the catalog benchmark.

Lakekeeper publishes no binary on a package registry, so it is built here from its source release with
cargo (release profile, `nice -n 19`, 2 jobs) and cached in `~/.cache/floe/lakekeeper/<version>/`
(source, cargo target directory, build log and `build.json` with the build's duration). Its Cargo.lock
pins git dependencies on GitHub forks; where a local mirror of such a repository exists
(`$LAKEKEEPER_GIT_MIRRORS/<owner>+<name>/repo`, bare git directories), git is pointed at it for the build
through `GIT_CONFIG_*` variables of cargo's environment only, nothing global.

Version 0.7.3 is the newest release whose git dependencies all resolve from the mirrors available
here (later releases pin commits of lakekeeper/iceberg-rust, azure-sdk-for-rust and nats.rs forks
that no mirror holds). Its binary is still called `iceberg-catalog` (renamed `lakekeeper` in 0.8).
It hard-codes binding 0.0.0.0; two one-line patches make it bind 127.0.0.1, as every floe dev server.

`LakekeeperServer` runs `iceberg-catalog migrate` and `serve` on a PostgreSQL database, bootstraps
the server and creates one warehouse on an S3 bucket of a moto server (Lakekeeper 0.7 has no local
file system storage) with static credentials and no STS: clients that write data files bring their own
S3 credentials. Authentication: none (no OpenID provider configured, authorization `allowall`),
Lakekeeper's development mode.

    python -m devtools.lakekeeper build    # builds (or reuses) the binary and prints its path
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import io
import json
import os
import secrets
import subprocess
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering
from runtime.artifacts import cache_dir

LAKEKEEPER_VERSION = "0.7.3"
SOURCE_REPOSITORY = "lakekeeper/lakekeeper"
PACKAGE = "iceberg-catalog-bin"
BINARY = "iceberg-catalog"
TOOLCHAIN = "stable"
BUILD_JOBS = 2
DEFAULT_MIRRORS = Path("/work/.mirror")

# The git sources of v0.7.3's Cargo.lock, as the URL written there -> the GitHub repository.
GIT_DEPENDENCIES: dict[str, str] = {
    "https://github.com/c-thiel/openfga-rs.git": "c-thiel/openfga-rs",
    "https://github.com/lakekeeper/console": "lakekeeper/console",
    "https://github.com/lakekeeper/iceberg-rust.git": "lakekeeper/iceberg-rust",
    "https://github.com/twuebi/opendal.git": "twuebi/opendal",
    "https://github.com/twuebi/reqsign.git": "twuebi/reqsign",
}

# (file, original, replacement): 0.7.3 binds every interface, with no setting to change it.
LOOPBACK_PATCHES: tuple[tuple[str, str, str], ...] = (
    (
        "crates/iceberg-catalog-bin/src/main.rs",
        "SocketAddr::from(([0, 0, 0, 0], CONFIG.listen_port))",
        "SocketAddr::from(([127, 0, 0, 1], CONFIG.listen_port))",
    ),
    (
        "crates/iceberg-catalog/src/metrics.rs",
        ".with_http_listener(([0, 0, 0, 0], metrics_port))",
        ".with_http_listener(([127, 0, 0, 1], metrics_port))",
    ),
)


# Cargo.lock pins this session's toolchain refuses: metrics 0.24.1 casts a trait object's raw pointer
# to extend its lifetime, an error since rustc 1.89 (rust-lang/rust#141402); 0.24.2 compiles.
LOCK_UPDATES: tuple[tuple[str, str], ...] = (("metrics", "0.24.2"),)


# utoipa-swagger-ui's build script downloads Swagger UI from GitHub, which is out of reach here; npm
# publishes the same files as swagger-ui-dist, repacked into the zip layout the script reads
# (`<top>/dist/<file>`) and given to it as a file:// URL.
SWAGGER_UI_VERSION = "5.17.14"
SWAGGER_UI_TARBALL = (
    f"https://registry.npmjs.org/swagger-ui-dist/-/swagger-ui-dist-{SWAGGER_UI_VERSION}.tgz",
    "e2c222e5bf9e15ccf80ec4bc08b4aaac09792fd6",
)


class LakekeeperNotBuilt(RuntimeError):
    """The binary is not in the cache and building it was not asked for."""


class LakekeeperBuildFailed(RuntimeError):
    """cargo (or preparing the source) failed; the message ends with the build log's tail."""


def mirrors_dir() -> Path:
    return Path(os.environ.get("LAKEKEEPER_GIT_MIRRORS", DEFAULT_MIRRORS))


def mirror_of(repository: str, mirrors: Path | None = None) -> Path:
    """Where a local bare mirror of `owner/name` lives (it may not exist)."""
    return (mirrors or mirrors_dir()) / repository.replace("/", "+") / "repo"


@dataclass(frozen=True)
class LakekeeperBuild:
    """The cached build of one Lakekeeper version: source, cargo target directory, log, binary."""

    version: str = LAKEKEEPER_VERSION
    root: Path | None = None

    @property
    def directory(self) -> Path:
        return self.root or cache_dir() / "lakekeeper" / self.version

    @property
    def source(self) -> Path:
        return self.directory / "src"

    @property
    def target(self) -> Path:
        return self.directory / "target"

    @property
    def binary(self) -> Path:
        return self.target / "release" / BINARY

    @property
    def log(self) -> Path:
        return self.directory / "build.log"

    @property
    def info_path(self) -> Path:
        return self.directory / "build.json"

    def info(self) -> dict[str, Any]:
        """What `build.json` recorded about the build that produced the binary (empty if nothing)."""
        try:
            recorded: dict[str, Any] = json.loads(self.info_path.read_text())
        except (OSError, ValueError):
            return {}
        return recorded

    def is_built(self) -> bool:
        return self.binary.is_file() and os.access(self.binary, os.X_OK)


def cargo_environment(build: LakekeeperBuild, mirrors: Path | None = None) -> dict[str, str]:
    """cargo's environment: the pinned toolchain, git through its CLI, and each git dependency with
    a local mirror redirected to it (a `url.<mirror>.insteadOf` for this process tree only)."""
    env = {
        **os.environ,
        # The source's rust-toolchain file (when there is one) pins a nightly; stable builds it.
        "RUSTUP_TOOLCHAIN": TOOLCHAIN,
        "CARGO_NET_GIT_FETCH_WITH_CLI": "true",
        "CARGO_TARGET_DIR": str(build.target),
        "SWAGGER_UI_DOWNLOAD_URL": (build.directory / f"swagger-ui-{SWAGGER_UI_VERSION}.zip").as_uri(),
    }
    redirects = [
        (url, mirror_of(repository, mirrors))
        for url, repository in GIT_DEPENDENCIES.items()
        if mirror_of(repository, mirrors).is_dir()
    ]
    env["GIT_CONFIG_COUNT"] = str(len(redirects))
    for index, (url, mirror) in enumerate(redirects):
        env[f"GIT_CONFIG_KEY_{index}"] = f"url.{mirror.as_uri()}.insteadOf"
        env[f"GIT_CONFIG_VALUE_{index}"] = url
    return env


def swagger_ui_zip(build: LakekeeperBuild) -> Path:
    """Swagger UI's dist files from npm as the zip utoipa-swagger-ui's build script expects (cached)."""
    target = build.directory / f"swagger-ui-{SWAGGER_UI_VERSION}.zip"
    if target.is_file():
        return target
    url, sha1 = SWAGGER_UI_TARBALL
    with urllib.request.urlopen(url, timeout=300) as response:
        tarball = response.read()
    if hashlib.sha1(tarball).hexdigest() != sha1:
        raise LakekeeperBuildFailed(f"{url}: checksum mismatch")
    partial = target.with_suffix(".partial")
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive, zipfile.ZipFile(partial, "w") as out:
        for member in archive.getmembers():
            content = archive.extractfile(member) if member.isfile() else None
            if content is not None and member.name.startswith("package/"):
                name = member.name.removeprefix("package/")
                out.writestr(f"swagger-ui-{SWAGGER_UI_VERSION}/dist/{name}", content.read())
    partial.replace(target)
    return target


def patch_source(source: Path) -> None:
    """Apply LOOPBACK_PATCHES (again: a patched file is left as it is)."""
    for relative, original, replacement in LOOPBACK_PATCHES:
        path = source / relative
        text = path.read_text()
        if replacement in text:
            continue
        if original not in text:
            raise LakekeeperBuildFailed(
                f"{relative} no longer contains {original!r}: update LOOPBACK_PATCHES"
            )
        path.write_text(text.replace(original, replacement))


def prepare_source(build: LakekeeperBuild, mirrors: Path | None = None) -> None:
    """Check the release tag out of the mirror of lakekeeper/lakekeeper into the cache and patch it."""
    if not (build.source / "Cargo.toml").is_file():
        repository = mirror_of(SOURCE_REPOSITORY, mirrors)
        if not repository.is_dir():
            raise LakekeeperBuildFailed(
                f"no git mirror of {SOURCE_REPOSITORY} at {repository}: set LAKEKEEPER_GIT_MIRRORS to a "
                "directory holding <owner>+<name>/repo bare clones"
            )
        build.source.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", f"--git-dir={repository}", "archive", f"v{build.version}"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(build.source)], input=archive.stdout, check=True)
    patch_source(build.source)
    update_lock(build, mirrors)
    swagger_ui_zip(build)


def update_lock(build: LakekeeperBuild, mirrors: Path | None = None) -> None:
    """Move the LOCK_UPDATES crates to their versions in the source's Cargo.lock (once)."""
    for crate, version in LOCK_UPDATES:
        lock = (build.source / "Cargo.lock").read_text()
        if f'name = "{crate}"\nversion = "{version}"' in lock:
            continue
        subprocess.run(
            ["cargo", "update", "-p", crate, "--precise", version],
            cwd=build.source,
            env=cargo_environment(build, mirrors),
            check=True,
        )


def rustc_version() -> str | None:
    try:
        done = subprocess.run(
            ["rustc", "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "RUSTUP_TOOLCHAIN": TOOLCHAIN},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def build_binary(build: LakekeeperBuild | None = None, jobs: int = BUILD_JOBS) -> Path:
    """Build the release binary (slow: the better part of an hour of CPU for about 750 crates), at the
    lowest CPU priority, appending cargo's output to the build log; record the build in build.json."""
    build = build or LakekeeperBuild()
    prepare_source(build)
    command = [
        "nice", "-n", "19",
        "cargo", "build", "--release", "--locked", "-j", str(jobs), "-p", PACKAGE,
    ]  # fmt: skip
    started_at = dt.datetime.now(dt.UTC)
    started = time.monotonic()
    with build.log.open("ab") as log:
        log.write(f"\n# {started_at.isoformat()} {' '.join(command)}\n".encode())
        log.flush()
        done = subprocess.run(
            command, cwd=build.source, env=cargo_environment(build), stdout=log, stderr=subprocess.STDOUT
        )
    seconds = round(time.monotonic() - started, 1)
    # A failed attempt keeps what it compiled and the next resumes: the build's cost is all attempts.
    attempts = [*build.info().get("attempts", []), {"seconds": seconds, "returncode": done.returncode}]
    build.info_path.write_text(
        json.dumps(
            {
                "version": build.version,
                "command": " ".join(command),
                "rustc": rustc_version(),
                "started_at": started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
                "seconds": seconds,
                "returncode": done.returncode,
                "attempts": attempts,
                "total_seconds": round(sum(a["seconds"] for a in attempts), 1),
            },
            indent=2,
        )
        + "\n"
    )
    if done.returncode != 0 or not build.is_built():
        tail = build.log.read_text(errors="replace")[-3000:]
        raise LakekeeperBuildFailed(f"cargo build failed ({done.returncode}); {build.log}:\n{tail}")
    return build.binary


def lakekeeper_binary(*, build_if_missing: bool = False, build: LakekeeperBuild | None = None) -> Path:
    """The cached binary; built first when missing only if asked (it takes long), else an error that
    says how to build it."""
    build = build or LakekeeperBuild()
    if build.is_built():
        return build.binary
    if not build_if_missing:
        raise LakekeeperNotBuilt(
            f"Lakekeeper {build.version} is not built ({build.binary} is missing). Build it once with "
            "`python -m devtools.lakekeeper build` (cargo, release profile, nice 19, 2 jobs: expect an "
            f"hour or more on 2 cores; log in {build.log})"
        )
    print(
        f"building Lakekeeper {build.version} with cargo into {build.directory} (slow; log: {build.log}) ...",
        flush=True,
    )
    return build_binary(build)


def postgres_url(port: int, database: str, user: str = "postgres", host: str = "127.0.0.1") -> str:
    """The connection URL sqlx takes (not SQLAlchemy's `postgresql+asyncpg://`)."""
    return f"postgres://{user}@{host}:{port}/{database}"


@dataclass(frozen=True)
class S3Storage:
    """The S3 bucket a warehouse lives in and the static credentials Lakekeeper uses for it."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"
    key_prefix: str = "warehouse"


def create_warehouse_request(name: str, storage: S3Storage) -> dict[str, Any]:
    """The management API's CreateWarehouseRequest for a warehouse on an S3-compatible endpoint with
    path-style addressing, without STS (loadTable then offers remote signing, and vends nothing)."""
    return {
        "warehouse-name": name,
        "storage-profile": {
            "type": "s3",
            "bucket": storage.bucket,
            "key-prefix": storage.key_prefix,
            "endpoint": storage.endpoint,
            "region": storage.region,
            "path-style-access": True,
            "flavor": "s3-compat",
            "sts-enabled": False,
        },
        "storage-credential": {
            "type": "s3",
            "credential-type": "access-key",
            "aws-access-key-id": storage.access_key_id,
            "aws-secret-access-key": storage.secret_access_key,
        },
        "delete-profile": {"type": "hard"},
    }


class LakekeeperServer:
    """`iceberg-catalog serve` on 127.0.0.1 and a free port, migrated, bootstrapped and with one
    warehouse; its log lives in a temporary directory that is deleted on exit."""

    def __init__(
        self,
        database_url: str,
        storage: S3Storage,
        *,
        binary: Path | None = None,
        warehouse: str = "floe_bench",
        port: int | None = None,
    ) -> None:
        self.database_url = database_url
        self.storage = storage
        self.binary = binary
        self.warehouse = warehouse
        self.port = port or free_port()
        self.metrics_port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="floe-lakekeeper-"))
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def catalog_url(self) -> str:
        """The Iceberg REST catalog's URI (what clients call `uri`)."""
        return f"{self.base_url}/catalog"

    @property
    def management_url(self) -> str:
        return f"{self.base_url}/management/v1"

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "LAKEKEEPER__LISTEN_PORT": str(self.port),
            "LAKEKEEPER__METRICS_PORT": str(self.metrics_port),
            "LAKEKEEPER__BASE_URI": self.base_url,
            "LAKEKEEPER__PG_DATABASE_URL_READ": self.database_url,
            "LAKEKEEPER__PG_DATABASE_URL_WRITE": self.database_url,
            # Encrypts the warehouse's storage credential in PostgreSQL.
            "LAKEKEEPER__PG_ENCRYPTION_KEY": secrets.token_urlsafe(32),
            "LAKEKEEPER__AUTHZ_BACKEND": "allowall",
        }

    def start(self, timeout: float = 60) -> LakekeeperServer:
        binary = self.binary or lakekeeper_binary()
        env = self.environment()
        with self.log_path.open("ab") as log:
            subprocess.run(
                [str(binary), "migrate"], env=env, stdout=log, stderr=subprocess.STDOUT, check=False
            ).check_returncode()
        log_file = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(binary), "serve"], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
        wait_until_answering(
            self.process,
            f"{self.base_url}/health",
            name="Lakekeeper",
            timeout=timeout,
            log_text=self.log_text,
            interval=0.2,
        )
        with httpx.Client(base_url=self.management_url, timeout=60) as http:
            http.post("/bootstrap", json={"accept-terms-of-use": True}).raise_for_status()
            http.post(
                "/warehouse", json=create_warehouse_request(self.warehouse, self.storage)
            ).raise_for_status()
        return self

    def version(self) -> str | None:
        binary = self.binary or lakekeeper_binary()
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
        return done.stdout.strip() or None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        self.log_path.unlink(missing_ok=True)
        self.root.rmdir()

    def __enter__(self) -> LakekeeperServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.lakekeeper", description=__doc__)
    parser.add_argument(
        "command", choices=["build", "path"], help="build (or reuse) the binary; print its path"
    )
    args = parser.parse_args(argv)
    try:
        binary = lakekeeper_binary(build_if_missing=args.command == "build")
    except (LakekeeperNotBuilt, LakekeeperBuildFailed) as exc:
        print(exc)
        return 1
    print(binary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
