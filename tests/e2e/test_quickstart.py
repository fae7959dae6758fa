"""The quick start (docs/quickstart.md, README's first query), driven the way a user does it: `floe up`
in a terminal (a pseudo-terminal here).

One fresh FLOE_HOME through the first hour (issues 12 and 33): start and wait for the ready line,
produce, query (the first record must be visible within 10 s of "ready") with each snippet the ready
summary prints, run as printed (DuckDB, pyiceberg), sign in to the console it names and see the table,
create a reader key as the quick start says and query with it (a write with it is refused), Ctrl-C,
restart at once, `floe apply` an own floe.yaml with deliberate mistakes (reported at their YAML lines
with hints, nothing applied) and then fixed (a table added), Ctrl-C and restart again — the added table
is still ingested (a restart never undoes `floe apply`). The whole terminal output of floe up and of
every command has no traceback and no ERROR line.
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import pty
import re
import shlex
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from confluent_kafka import Producer
from pyiceberg.catalog.rest import RestCatalog

from catalog.client import FloeClient, Forbidden
from catalog.console.session import CSRF_FIELD
from devtools.ports import free_port
from floe.cli.up import port_answers
from tests.e2e.duckdb_client import attach_catalog, connect, printed_lines
from tests.e2e.process_tree import assert_no_secret_on_command_lines
from tests.unit.test_ready_summary import block

# `floe up` (catalog, Kafka broker, Spark ingestion and maintenance): `pytest -m "not e2e"` skips it.
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
READY = "ready: "
FIRST_RECORD_SECONDS = 10.0
STEADY_P50_SECONDS = 5.0


# A table a user adds to the example floe.yaml (the mistakes are filled in, then the fixes).
CLICKS_TABLE = """\
  - source_cluster_name: local
    source_topic: clicks
    source_format: json
    schema_mode: inline
    partitioning_scheme: {partitioning}
    schema:
      fields:
        - {{ name: user_id, id: 1, type: long }}
        - {{ name: action, id: 2, type: {action_type} }}
"""


class Terminal:
    """A command in a pseudo-terminal of its own (it is the terminal's foreground process group, so
    typing Ctrl-C sends SIGINT as a shell would), its output collected as a user would read it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes the command
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        # 160 columns: rich wraps the ready summary at the terminal's width.
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        self.pid, self.fd = pid, fd
        self._output = bytearray()
        self._lock = threading.Lock()
        self.returncode: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the command exited and the terminal closed
                return
            if not chunk:
                return
            with self._lock:
                self._output += chunk

    @property
    def text(self) -> str:
        with self._lock:
            return _ESCAPES.sub(b"", bytes(self._output)).decode(errors="replace")

    def wait_for(self, needle: str, timeout: float, after: int = 0) -> float:
        """Wait until `needle` is printed (past character `after`); when it was seen (monotonic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text[after:]:
                return time.monotonic()
            if self.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} not printed (exit {self.returncode}):\n{self.text[-6000:]}")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError(f"still running {timeout} s after Ctrl-C:\n{self.text[-6000:]}")
            time.sleep(0.1)
        self._reader.join(timeout=5)
        os.close(self.fd)
        assert self.returncode is not None
        return self.returncode


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, json.dumps(record).encode())
    assert producer.flush(30) == 0


def _visible_after(
    catalog: RestCatalog, table: str, user_id: int, since: float, timeout: float = 60
) -> float:
    """Seconds from `since` until the row with `user_id` is in the table (scanned as a reader does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        loaded = catalog.load_table(table)
        if loaded.current_snapshot() is not None:
            rows = loaded.scan(row_filter=f"user_id = {user_id}", selected_fields=("user_id",)).to_arrow()
            if rows.num_rows:
                return time.monotonic() - since
        time.sleep(0.25)
    raise AssertionError(f"user_id {user_id} not in {table} after {timeout} s")


def _pipeline_keys(home: Path) -> dict[str, dict[str, str]]:
    """The pipeline keys floe up keeps, by name; each file readable by its owner only."""
    keys = {}
    for path in sorted((home / "keys").glob("*.json")):
        assert path.stat().st_mode & 0o077 == 0, oct(path.stat().st_mode)
        keys[path.stem] = json.loads(path.read_text())
    return keys


def _quickstart_block() -> str:
    """README's first query: the block after `<!-- quickstart: duckdb -->`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- quickstart: duckdb -->\n```python\n(.*?)\n```\n", text, re.DOTALL)
    assert match is not None, "README.md has no block marked <!-- quickstart: duckdb -->"
    return match.group(1) + "\n"


def _run_python(program: str, tmp_path: Path) -> str:
    """`program` run by this Python with a fresh HOME (DuckDB's ~/.duckdb empty); its output."""
    home = tmp_path / f"python-home-{len(list(tmp_path.glob('python-home-*')))}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")} | {
        "HOME": str(home),
        "TZ": "UTC",
    }
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def _quickstart_command(marker: str) -> list[str]:
    """docs/quickstart.md's command after `<!-- quickstart: {marker} -->`, its `floe` run as this Python's
    `-m floe.cli` (the test's floe is the work tree's)."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- quickstart: {marker} -->\n```sh\n(.*?)\n```\n", text, re.DOTALL)
    assert match is not None, f"docs/quickstart.md has no block marked <!-- quickstart: {marker} -->"
    words = shlex.split(match.group(1), comments=True)
    assert words[0] in ("floe", ".venv/bin/floe"), words
    return [sys.executable, "-m", "floe.cli", *words[1:]]


def _clean(output: str, what: str) -> None:
    """A user's terminal: no traceback, no ERROR line."""
    for marker in ("Traceback", " ERROR ", "\nERROR "):
        at = output.find(marker)
        assert at < 0, f"{marker!r} in {what}:\n{output[max(0, at - 2000) : at + 2000]}"


def _floe(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A floe command as a user runs it next to floe up; its output checked for tracebacks and ERRORs."""
    if argv[0] != sys.executable:
        argv = [sys.executable, "-m", "floe.cli", *argv]
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    _clean(done.stdout + done.stderr, f"`floe {' '.join(argv[3:])}`")
    return done


def _console_overview(console_url: str, client_id: str, client_secret: str) -> str:
    """Sign in at the console URL the ready summary prints, as a browser does (the sign-in form's CSRF
    token, the session cookie), and read the overview's text."""
    with httpx.Client(timeout=30, follow_redirects=True) as browser:
        form = browser.get(console_url)  # not signed in: the sign-in page
        assert form.status_code == 200, form.text[:2000]
        assert "/sign-in" in str(form.url), form.url
        token = re.search(rf'name="{CSRF_FIELD}" value="([^"]+)"', form.text)
        assert token is not None, form.text[:2000]
        signed_in = browser.post(
            str(form.url),
            data={"client_id": client_id, "client_secret": client_secret, CSRF_FIELD: token.group(1)},
        )
        assert signed_in.status_code == 200, signed_in.text[:2000]
        overview = browser.get(console_url)
        assert overview.status_code == 200, overview.text[:2000]
        assert "/sign-in" not in str(overview.url), overview.text[:2000]
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", overview.text)).split())


def test_floe_up_as_a_user_runs_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port, kafka_port, metrics_port = free_port(), free_port(), free_port()
    url, bootstrap = f"http://127.0.0.1:{port}", f"127.0.0.1:{kafka_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
    env |= {"FLOE_HOME": str(home), "FLOE_SPARK_MASTER": "local[2]", "TERM": "xterm-256color"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "floe.cli", "up", "--port", str(port), "--kafka-port", str(kafka_port)]
    argv += ["--metrics-port", str(metrics_port)]
    transcript: list[str] = []
    timings: dict[str, float] = {}
    apply_env = {**env, "FLOE_URL": url}  # the other commands, run beside floe up

    def run_until_ready(label: str) -> tuple[Terminal, float]:
        started = time.monotonic()
        terminal = Terminal(argv, env, tmp_path)
        ready = terminal.wait_for(READY, timeout=300)
        timings[f"{label}: start → ready"] = ready - started
        return terminal, ready

    def stop(terminal: Terminal) -> None:
        terminal.ctrl_c()
        assert terminal.wait(timeout=120) == 0, terminal.text[-6000:]
        assert "floe stopped" in terminal.text
        transcript.append(terminal.text)

    # 1. First start on a fresh home: the example floe.yaml is written and applied.
    terminal, ready = run_until_ready("first start")
    try:
        assert (home / "floe.yaml").exists()
        assert "applied as revision 1" in terminal.text
        assert str(home / "admin.json") in terminal.text
        admin = json.loads((home / "admin.json").read_text())
        catalog = RestCatalog(
            "floe", uri=url, credential=f"{admin['client_id']}:{admin['client_secret']}", warehouse="default"
        )
        _produce(bootstrap, "events", [{"user_id": 0, "action": "first", "amount": 0.0}])
        timings["first start: ready → first record visible"] = first = _visible_after(
            catalog, "local.events", 0, ready
        )
        assert first <= FIRST_RECORD_SECONDS, (timings, terminal.text[-4000:])
        latencies = []
        for user_id in range(1, 4):
            produced = time.monotonic()
            _produce(bootstrap, "events", [{"user_id": user_id, "action": "probe", "amount": 1.0}])
            latencies.append(_visible_after(catalog, "local.events", user_id, produced))
        timings["steady: produce → visible p50"] = statistics.median(latencies)
        assert statistics.median(latencies) <= STEADY_P50_SECONDS, latencies
        _produce(
            bootstrap, "events", [{"user_id": 100 + i, "action": "click", "amount": i / 2} for i in range(96)]
        )
        terminal.wait_for("local.events:", timeout=60)  # the commit lines
        duck = connect(tmp_path / "duckdb")
        attach_catalog(
            duck,
            endpoint=url,
            warehouse="default",
            client_id=admin["client_id"],
            client_secret=admin["client_secret"],
        )
        deadline = time.monotonic() + 60
        while (duck.execute("SELECT count(*) FROM floe.local.events").fetchone() or (0,))[0] < 100:
            assert time.monotonic() < deadline, terminal.text[-4000:]
            time.sleep(1)
        assert duck.execute("SELECT count(*), sum(amount) FROM floe.local.events").fetchone() == (
            100,
            3.0 + sum(i / 2 for i in range(96)),
        )
        # Issue 33 item 2: the ready summary's DuckDB program, copied from the terminal, and README's first
        # query run as written (each in a fresh HOME: the extensions come from the duckdb extra's wheels,
        # nothing is downloaded; a timestamp read into Python needs the extra's pytz).
        printed = terminal.text[terminal.text.index("floe is ready") :]
        install, *program = block(printed, "DuckDB")
        assert "-m pip install '.[duckdb]'" in install
        summary_run = _run_python(
            "\n".join(program).replace("<client_secret>", admin["client_secret"]), tmp_path
        )
        assert printed_lines(summary_run) == ["[(100,)]"], summary_run
        first_query = _quickstart_block().replace("http://127.0.0.1:8181", url)
        first_query = first_query.replace("<client_id>", admin["client_id"])
        readme_run = _run_python(first_query.replace("<client_secret>", admin["client_secret"]), tmp_path)
        assert re.search(r"│\s*click\s*│\s*96\s*│", readme_run), readme_run
        assert "datetime.datetime(" in readme_run, readme_run
        assert re.search(r"│\s*partition\s*│\s*offset\s*│\s*error\s*│", readme_run), readme_run
        # The summary's pyiceberg line, pasted into Python as printed (it is an expression: the import is
        # the reader's, as for any one-liner).
        new_user_steps = time.monotonic()
        (pyiceberg_line,) = block(printed, "pyiceberg")
        pyiceberg_program = f"print({pyiceberg_line}.num_rows)".replace(
            "<client_secret>", admin["client_secret"]
        )
        pyiceberg_run = _run_python(
            "from pyiceberg.catalog import load_catalog\n" + pyiceberg_program, tmp_path
        )
        assert pyiceberg_run.split() == ["100"], pyiceberg_run
        # The console the summary names: signed in with the admin key, its overview lists the table and
        # its 100 rows.
        console = re.search(r"^  console +(\S+)", printed, re.MULTILINE)
        assert console is not None, printed
        assert console.group(1) == f"{url}/console", printed
        overview = _console_overview(console.group(1), admin["client_id"], admin["client_secret"])
        assert "Cluster local" in overview, overview
        row = overview[overview.index("local.events") :][:300]
        assert re.search(r"\b100\b", row), row
        # A reader key for an engine, created as the quick start says; its own client id and secret in
        # the first query: reads work, a write is refused.
        created = _floe(_quickstart_command("reader-key"), apply_env, tmp_path)
        assert created.returncode == 0, created.stderr
        reader = json.loads(created.stdout)
        assert (reader["role"], reader["cluster"]) == ("reader", "local"), reader
        reader_query = _quickstart_block().replace("http://127.0.0.1:8181", url)
        reader_query = reader_query.replace("<client_id>", reader["client_id"])
        reader_run = _run_python(reader_query.replace("<client_secret>", reader["client_secret"]), tmp_path)
        assert re.search(r"│\s*click\s*│\s*96\s*│", reader_run), reader_run
        read_only = connect(tmp_path / "duckdb-reader")
        attach_catalog(
            read_only,
            endpoint=url,
            warehouse="default",
            client_id=reader["client_id"],
            client_secret=reader["client_secret"],
        )
        assert read_only.execute("SELECT count(*) FROM floe.local.events").fetchone() == (100,)
        # (An INSERT into an ingested table fails in DuckDB 1.5.5 for any key, before asking floe: it
        # cannot write a table partitioned on a field nested in _kafka.)
        with pytest.raises(duckdb.Error) as refused:
            read_only.execute("CREATE TABLE floe.local.notes (note VARCHAR)")
        assert "Role reader of key" in str(refused.value), refused.value  # floe's 403, through DuckDB
        assert "may not create" in str(refused.value), refused.value
        read_only.close()
        assert not catalog.table_exists("local.notes")
        print(f"a reader's CREATE TABLE in DuckDB: {refused.value}")
        timings["pyiceberg line, console, reader key"] = time.monotonic() - new_user_steps
        # Issue 29 items 12 and 13: ingestion and maintenance run under pipeline keys of the cluster,
        # whose secrets, like the admin's, are on no command line.
        keys = _pipeline_keys(home)
        assert set(keys) == {"pipeline-ingest-local", "pipeline-maintain-local"}
        assert "pipeline-ingest-local" in terminal.text  # the ready summary names them
        first_keys = keys
        # Issue 29 item 12: no process floe up started (catalog, Kafka broker, Spark's JVM) carries a secret.
        assert_no_secret_on_command_lines(
            terminal.pid,
            [admin["client_secret"], *(k["client_secret"] for k in keys.values())],
            expected=(b"kafka.Kafka", b"org.apache.spark.deploy.SparkSubmit", b"serve"),
        )
        ingest_key = keys["pipeline-ingest-local"]
        with FloeClient(url, admin["client_id"], admin["client_secret"]) as floe:
            entries = floe.audit(limit=500).entries
        commits = [e for e in entries if e.action in ("updateTable", "commitTransaction")]
        assert commits
        assert {e.subject for e in commits} <= {k["client_id"] for k in keys.values()}, commits
        assert ingest_key["client_id"] in {e.subject for e in commits if "events" in e.target}
        pipeline_client = FloeClient(url, ingest_key["client_id"], ingest_key["client_secret"])
        with pipeline_client, pytest.raises(Forbidden):
            pipeline_client.create_key("admin", description="escalation")
    finally:
        stop(terminal)
    assert not port_answers("127.0.0.1", port), "the catalog kept running"
    assert not port_answers("127.0.0.1", kafka_port), "the broker kept running"

    # 2. Restart at once (ports in TIME-WAIT), then add a table with floe apply.
    terminal, ready = run_until_ready("restart")
    try:
        assert "unchanged since floe up applied it" in terminal.text
        # Each start rotates the pipeline keys: same keys, new secrets.
        keys = _pipeline_keys(home)
        for name, key in keys.items():
            assert key["client_id"] == first_keys[name]["client_id"]
            assert key["client_secret"] != first_keys[name]["client_secret"]
        _produce(bootstrap, "events", [{"user_id": 1000, "action": "again"}])
        timings["restart: ready → first record visible"] = after_restart = _visible_after(
            catalog, "local.events", 1000, ready
        )
        assert after_restart <= FIRST_RECORD_SECONDS, timings
        # Own floe.yaml: the example with a table added by hand, with two mistakes a newcomer makes (a
        # partition transform split by YAML's flow list at its comma, a misspelt type). Each is reported
        # at its YAML path and line with how to fix it; the command fails and nothing is applied.
        own_file_steps = time.monotonic()
        add = tmp_path / "add.yaml"
        mistaken = (home / "floe.yaml").read_text() + CLICKS_TABLE.format(
            partitioning="[bucket(16, user_id)]", action_type="strng"
        )
        add.write_text(mistaken)
        lines = mistaken.splitlines()
        bucket_line = lines.index("    partitioning_scheme: [bucket(16, user_id)]") + 1
        type_line = lines.index("        - { name: action, id: 2, type: strng }") + 1
        wrong = _floe(["apply", "-f", str(add)], apply_env, tmp_path)
        assert wrong.returncode != 0, wrong.stderr
        assert "2 error(s), nothing applied" in wrong.stderr, wrong.stderr
        assert f"tables[1].partitioning_scheme[0] (line {bucket_line}):" in wrong.stderr, wrong.stderr
        assert 'quote it — ["bucket(16, user_id)"]' in wrong.stderr, wrong.stderr
        assert f"tables[1].schema.fields[1].type (line {type_line}): unknown type 'strng'" in wrong.stderr
        assert "did you mean 'string'?" in wrong.stderr, wrong.stderr
        assert not catalog.table_exists("local.clicks")
        # Fixed as the hints say, it applies, as revision 2.
        add.write_text(
            (home / "floe.yaml").read_text()
            + CLICKS_TABLE.format(partitioning='["bucket(16, user_id)"]', action_type="string")
        )
        # Marked before the apply: floe up may take revision 2 (and say so) before `floe apply` exits.
        mark = len(terminal.text)
        applied = _floe(["apply", "-f", str(add)], apply_env, tmp_path)
        assert applied.returncode == 0, applied.stderr
        assert "revision 2 applied" in applied.stderr
        timings["own floe.yaml: mistaken, then fixed"] = time.monotonic() - own_file_steps
        # floe up creates the new topic on its broker and starts ingesting it (within a poll).
        terminal.wait_for("local.clicks: ingesting topic clicks", timeout=60, after=mark)
        _produce(bootstrap, "clicks", [{"user_id": 2000, "action": "added"}])
        _visible_after(catalog, "local.clicks", 2000, time.monotonic())
    finally:
        stop(terminal)

    # 3. Restart again: revision 2 stays applied, so clicks is still ingested.
    terminal, ready = run_until_ready("second restart")
    try:
        assert "revision 2" in terminal.text
        assert "topic clicks → table local.clicks" in terminal.text
        _produce(bootstrap, "clicks", [{"user_id": 2001, "action": "still"}])
        timings["second restart: ready → first record visible"] = again = _visible_after(
            catalog, "local.clicks", 2001, ready
        )
        assert again <= FIRST_RECORD_SECONDS, timings
        dry = _floe(["apply", "-f", str(add), "--dry-run"], apply_env, tmp_path)
        assert dry.returncode == 0, dry.stderr
        assert "resumed" not in dry.stdout  # add.yaml is what runs
    finally:
        stop(terminal)

    print("\n".join(f"{name}: {seconds:.1f} s" for name, seconds in timings.items()))
    output = "\n".join(transcript)
    (tmp_path / "terminal.txt").write_text(output)  # what the user saw, kept for a failure's reader
    for marker in ("Traceback", " ERROR ", "WARN"):
        at = output.find(marker)
        assert at < 0, f"{marker!r} in floe up's output:\n{output[max(0, at - 2000) : at + 2000]}"
    _clean((home / "catalog.log").read_text(errors="replace"), "the catalog's log")
    # The ready summary says where the admin secret is; the secret itself never reaches the terminal.
    secret = json.loads((home / "admin.json").read_text())["client_secret"]
    assert secret not in output
