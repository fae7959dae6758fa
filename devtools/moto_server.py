"""moto's server (S3, STS and the rest of its AWS services on one port) in its own process.

Tests start moto in-process (`ThreadedMotoServer`); a benchmark runs it as a child process instead, so
the CPU it spends is measured apart from the load generator's.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering

# moto accepts any credentials while its IAM authentication is off (the default).
ACCESS_KEY_ID = "moto-access-key"
SECRET_ACCESS_KEY = "moto-secret-key"  # moto's stand-in credential, not a secret
REGION = "us-east-1"


class MotoServer:
    """`python -m moto.server` on 127.0.0.1 and a free port; its log is deleted with it on exit."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="floe-moto-"))
        self.log_path = self.root / "moto.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> MotoServer:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_answering(
            self.process,
            f"{self.endpoint}/moto-api/",
            name="moto server",
            timeout=timeout,
            log_text=self.log_text,
        )
        return self

    def create_bucket(self, name: str) -> None:
        """Create an S3 bucket (path-style, as every client of this endpoint addresses it)."""
        import boto3
        from botocore.config import Config

        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}),
        )
        s3.create_bucket(Bucket=name)

    def file_io_properties(self) -> dict[str, str]:
        """The FileIO (and warehouse) properties that reach this server's S3."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": ACCESS_KEY_ID,
            "s3.secret-access-key": SECRET_ACCESS_KEY,
            "s3.region": REGION,
        }

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        for path in self.root.glob("*"):
            path.unlink(missing_ok=True)
        self.root.rmdir()

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def threaded_moto() -> Iterator[str]:
    """moto's server in this process (a test reads its state here), on 127.0.0.1 and a free port: its
    endpoint, while in the block."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
