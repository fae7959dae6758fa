"""The catalog benchmark's peers: choosing them, reporting several side by side, and the Lakekeeper
launcher's pure parts (cargo's git redirects, the loopback patch, the warehouse request).

Starting Lakekeeper needs its cargo build (an hour or more on 2 cores), so no test here starts it:
`python -m benchmarks.catalog --peers reference,lakekeeper` does, when its binary is in the cache.
"""

from __future__ import annotations

import argparse
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.catalog import run
from benchmarks.catalog.loadgen import LoadResult
from benchmarks.catalog.report import (
    FLOE,
    LAKEKEEPER,
    REFERENCE,
    Measurement,
    WorkloadResult,
    render_markdown,
    results_document,
)
from benchmarks.catalog.workloads import SeedInfo, Target, workloads
from devtools import lakekeeper


def test_peers_option_takes_known_servers_in_order() -> None:
    assert run.parse_args([]).peers == [REFERENCE]
    assert run.parse_args(["--peers", "reference,lakekeeper"]).peers == [REFERENCE, LAKEKEEPER]
    assert run.parse_args(["--peers", "lakekeeper, lakekeeper"]).peers == [LAKEKEEPER]
    with pytest.raises(argparse.ArgumentTypeError):
        run._peers("reference,nessie")
    assert run.output_name([REFERENCE]) == "catalog"
    assert run.output_name([REFERENCE, LAKEKEEPER]) == "catalog-lakekeeper"


def test_lakekeeper_paths_carry_the_catalog_root_and_page_size() -> None:
    target = Target(LAKEKEEPER, "http://127.0.0.1:8181/catalog", "/catalog/v1/abc", list_page_size=1000)
    assert target.origin == "http://127.0.0.1:8181"
    assert target.table_path("bench", "events") == "/catalog/v1/abc/namespaces/bench/tables/events"
    assert (
        target.list_tables_path("bench_list") == "/catalog/v1/abc/namespaces/bench_list/tables?pageSize=1000"
    )
    floe = Target(FLOE, "http://127.0.0.1:9000", "/v1/default")
    assert floe.list_tables_path("bench_list") == "/v1/default/namespaces/bench_list/tables"


def _measurement(rps: int, status: int, notes: dict[str, Any] | None = None) -> Measurement:
    """`rps` requests answered `status` in one second."""
    result = LoadResult(
        concurrency=32,
        duration_s=1.0,
        latencies_ns=[1_000_000] * rps,
        statuses=Counter({status: rps}),
        loadgen_cpu_s=0.05,
        wall_s=1.0,
    )
    return Measurement.of(result, server_cpu_s=1.0, notes=notes or {})


def test_report_puts_every_peer_side_by_side_and_refuses_a_304_ratio_without_etags() -> None:
    chosen = {w.key: w for w in workloads(clients=32)}
    load = WorkloadResult.of(chosen["load_table"])
    load.results = {
        FLOE: _measurement(3000, 200),
        REFERENCE: _measurement(2000, 200),
        LAKEKEEPER: _measurement(6000, 200),
    }
    etag = WorkloadResult.of(chosen["load_table_etag"])
    etag.results = {
        FLOE: _measurement(4000, 304, {"etag": '"v1"', "etag_supported": True, "conditional_status": 304}),
        REFERENCE: _measurement(
            2000, 304, {"etag": '"r1"', "etag_supported": True, "conditional_status": 304}
        ),
        LAKEKEEPER: _measurement(
            5000, 200, {"etag": None, "etag_supported": False, "conditional_status": 200}
        ),
    }
    seeded = SeedInfo(
        snapshots=8,
        metadata_json_bytes=1,
        load_table_response_bytes=2,
        list_tables_response_bytes=3,
        seconds=1,
    )
    doc = results_document(
        settings={"started_at": "now", "duration_s": 1, "warmup_s": 0, "git_commit": "abc"},
        machine={"cpus": 2, "cpu_model": "test", "memory_gb": 1, "os": "test", "load_average_before": []},
        version_info={"floe": "test", "lakekeeper": "0.7.3"},
        servers={FLOE: "floe", REFERENCE: "the reference", LAKEKEEPER: "Lakekeeper 0.7.3"},
        seeds={FLOE: seeded, REFERENCE: seeded, LAKEKEEPER: seeded},
        workload_results=[load, etag],
    )
    assert doc["workloads"][0]["floe_vs_peer_throughput"] == {REFERENCE: 1.5, LAKEKEEPER: 0.5}
    assert doc["workloads"][1]["floe_vs_peer_throughput"] == {REFERENCE: 2.0, LAKEKEEPER: None}
    markdown = render_markdown(doc)
    assert markdown.startswith(
        "# Catalog benchmark: floe vs the Apache Iceberg reference REST server and Lakekeeper"
    )
    header = next(line for line in markdown.splitlines() if line.startswith("| Workload | Clients"))
    separator = markdown.splitlines()[markdown.splitlines().index(header) + 1]
    assert header.count("|") == separator.count("|")
    assert "| floe ÷ reference | floe ÷ Lakekeeper |" in header
    rows = [line for line in markdown.splitlines() if line.startswith("| loadTable")]
    assert rows[0].startswith("| loadTable (full response) | 32 | 3,000 | 2,000 | 6,000 | 1.50x | 0.50x |")
    assert rows[1].startswith(
        "| loadTable with If-None-Match | 32 | 4,000 | 2,000 | n/a (no ETag) | 2.00x | n/a |"
    )
    assert "Lakekeeper: ETag none; a conditional request is answered 200. It sends no ETag" in markdown


def test_cargo_environment_redirects_only_git_dependencies_with_a_mirror(tmp_path: Path) -> None:
    (tmp_path / "lakekeeper+iceberg-rust" / "repo").mkdir(parents=True)
    build = lakekeeper.LakekeeperBuild(root=tmp_path / "build")
    env = lakekeeper.cargo_environment(build, mirrors=tmp_path)
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert (
        env["GIT_CONFIG_KEY_0"] == f"url.{(tmp_path / 'lakekeeper+iceberg-rust' / 'repo').as_uri()}.insteadOf"
    )
    assert env["GIT_CONFIG_VALUE_0"] == "https://github.com/lakekeeper/iceberg-rust.git"
    assert env["CARGO_TARGET_DIR"] == str(tmp_path / "build" / "target")
    assert env["RUSTUP_TOOLCHAIN"] == "stable"
    # git itself reads the redirect from that environment: the URL cargo asks for becomes the mirror.
    resolved = subprocess.run(
        ["git", "ls-remote", "--get-url", "https://github.com/lakekeeper/iceberg-rust.git"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert resolved == (tmp_path / "lakekeeper+iceberg-rust" / "repo").as_uri()


def test_loopback_patch_applies_once_and_notices_a_changed_source(tmp_path: Path) -> None:
    for relative, original, _ in lakekeeper.LOOPBACK_PATCHES:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"let a = 1;\n{original}\n")
    lakekeeper.patch_source(tmp_path)
    lakekeeper.patch_source(tmp_path)  # again: nothing left to do
    for relative, original, replacement in lakekeeper.LOOPBACK_PATCHES:
        text = (tmp_path / relative).read_text()
        assert replacement in text
        assert original not in text
        assert "127, 0, 0, 1" in replacement
    (tmp_path / lakekeeper.LOOPBACK_PATCHES[0][0]).write_text("something else\n")
    with pytest.raises(lakekeeper.LakekeeperBuildFailed, match="LOOPBACK_PATCHES"):
        lakekeeper.patch_source(tmp_path)


def test_missing_binary_says_how_to_build_it(tmp_path: Path) -> None:
    build = lakekeeper.LakekeeperBuild(root=tmp_path)
    with pytest.raises(lakekeeper.LakekeeperNotBuilt, match=r"python -m devtools\.lakekeeper build"):
        lakekeeper.lakekeeper_binary(build=build)


def test_warehouse_request_uses_path_style_s3_without_sts() -> None:
    storage = lakekeeper.S3Storage("http://127.0.0.1:5000", "bucket", "key", "secret")
    request = lakekeeper.create_warehouse_request("wh", storage)
    assert request["warehouse-name"] == "wh"
    profile = request["storage-profile"]
    assert profile["type"] == "s3"
    assert profile["endpoint"] == "http://127.0.0.1:5000"
    assert profile["path-style-access"] is True
    assert profile["sts-enabled"] is False
    assert request["storage-credential"]["aws-secret-access-key"] == "secret"
    assert lakekeeper.postgres_url(5432, "lakekeeper") == "postgres://postgres@127.0.0.1:5432/lakekeeper"
