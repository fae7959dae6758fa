"""`devtools.containers.dns_server_stopped`: after `down`, a lingering aardvark-dns is waited for, and
stopped when it serves no network (podman 4.3 kept a lingering one, with stale records, for the next `up`).

The server is a real process named `aardvark-dns` (a copy of `sleep`), in a stand-in for netavark's
directory."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import containers


@pytest.fixture
def dns_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "aardvark-dns"
    directory.mkdir()
    monkeypatch.setattr(containers, "AARDVARK_DIR", directory)
    return directory


@pytest.fixture
def server(tmp_path: Path, dns_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    (tmp_path / "bin").mkdir()
    binary = tmp_path / "bin" / "aardvark-dns"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
    process = subprocess.Popen([str(binary), "60"])
    (dns_dir / "aardvark.pid").write_text(f"{process.pid}\n")
    yield process
    process.kill()
    process.wait()


def test_a_server_serving_no_network_is_stopped(server: subprocess.Popen[bytes]) -> None:
    started = time.monotonic()
    containers.dns_server_stopped(timeout=0.5)
    assert server.wait(5) is not None
    assert time.monotonic() - started < 5


def test_a_server_still_serving_a_network_is_left_running(
    server: subprocess.Popen[bytes], dns_dir: Path
) -> None:
    (dns_dir / "other_default").write_text("10.89.1.1\n")
    containers.dns_server_stopped(timeout=0.3)
    assert server.poll() is None


def test_a_server_that_exits_by_itself_is_waited_for(server: subprocess.Popen[bytes]) -> None:
    subprocess.Popen(["sh", "-c", f"sleep 0.5; kill {server.pid}"])
    containers.dns_server_stopped(timeout=10)
    # It exited by itself (SIGTERM from the helper, not dns_server_stopped after 10 s): reaped soon after.
    assert server.wait(5) is not None


def test_no_pid_file_or_a_reused_pid_is_nothing_to_wait_for(dns_dir: Path) -> None:
    containers.dns_server_stopped(timeout=5)  # no pid file
    other = subprocess.Popen(["sleep", "60"])  # the pid now belongs to another program
    try:
        (dns_dir / "aardvark.pid").write_text(str(other.pid))
        started = time.monotonic()
        containers.dns_server_stopped(timeout=5)
        assert time.monotonic() - started < 1
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
