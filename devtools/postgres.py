"""A throwaway local PostgreSQL server for tests and benchmarks.

Uses the Debian `postgresql` binaries when installed, else the ones bundled in the `pgserver` wheel.
PostgreSQL refuses to run as root, so as root the server runs as a dedicated system user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from devtools.ports import free_port

SERVICE_USER = "floe-postgres"


def postgres_bin_dir() -> Path:
    """The newest Debian PostgreSQL, else pgserver's bundled binaries."""
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if debian:
        return Path(debian[-1]).parent
    try:
        import pgserver
    except ImportError as exc:
        raise RuntimeError(
            "No PostgreSQL found: install Debian's 'postgresql' package or 'pip install pgserver'"
        ) from exc
    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _ensure_service_user() -> None:
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True,
        )


class LocalPostgres:
    """Start with `with LocalPostgres() as pg: pg.url` — a fresh cluster on 127.0.0.1, deleted on exit."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.bin = postgres_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="floe-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0
        self._options = ""

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", SERVICE_USER, "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, database: str) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> LocalPostgres:
        if self.as_root:
            _ensure_service_user()
            self.root.chmod(0o755)
            shutil.chown(self.root, SERVICE_USER)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._options = options
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not start; see {self.root / 'log'}")

    def create_database(self, name: str) -> str:
        self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-c",
            f'CREATE DATABASE "{name}"',
        )
        return self.database_url(name)

    # Faults for tests that prove what floe does when its database misbehaves.

    def server_pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, walwriter, ...)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        pids = [postmaster]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # The parent pid is the second field after the command, which is in parentheses.
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(stat.parent.name))
        return pids

    def pause(self) -> None:
        """Freeze the whole server (SIGSTOP): connections stay open but nothing answers."""
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Undo `pause` (SIGCONT)."""
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def restart(self) -> None:
        """A graceful (fast) restart: every client connection is closed, the server answers again."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "restart")

    def shut_down(self) -> None:
        """Stop the server (fast shutdown), keeping its data for `start_again`: connections are refused."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def start_again(self) -> None:
        """Start the server `shut_down` stopped."""
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(self.root / "log"), "-w", "start"
        )

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql`; its result rows, unaligned (`|` between columns), one a line."""
        cmd = [str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        cmd += ["-d", database, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql]
        if self.as_root:
            cmd = ["runuser", "-u", SERVICE_USER, "--", *cmd]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()

    def terminate_backends(self, database: str, running: str | None = None) -> int:
        """`pg_terminate_backend` every client connection to `database` (what an administrator or a
        failover proxy does), or only those running a statement that contains `running`; how many."""
        condition = f"datname = '{database}' AND pid <> pg_backend_pid()"
        if running is not None:
            condition += f" AND state = 'active' AND query LIKE '%{running}%'"
        return int(
            self.psql(f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE {condition}")
        )

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.resume()  # a paused server would not stop
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
