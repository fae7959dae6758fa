"""The benchmark run: start floe (on a real PostgreSQL) and its peers (the reference server, and
Lakekeeper when asked), seed each the same way, measure every workload on each, and write
`catalog.json` and `catalog.md` (`catalog-lakekeeper.*` when Lakekeeper is among the peers)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.catalog import reference
from benchmarks.catalog.loadgen import LoadResult
from benchmarks.catalog.procstat import cpu_seconds, machine_busy_seconds, postmaster_pid
from benchmarks.catalog.report import (
    FLOE,
    LAKEKEEPER,
    REFERENCE,
    Measurement,
    WorkloadResult,
    machine_info,
    render_markdown,
    results_document,
    versions,
    write_results,
)
from benchmarks.catalog.workloads import (
    Dataset,
    SeedInfo,
    Target,
    Workload,
    discover,
    measure,
    seed,
    workloads,
)
from benchmarks.provenance import git_commit
from devtools import lakekeeper, moto_server
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


@dataclass
class Server:
    """A started catalog under test and how to find the processes whose CPU it uses."""

    target: Target
    description: str
    pids: Callable[[], list[int]]


@dataclass
class Sample:
    """One run of a workload on a server, with the CPU the server's processes used meanwhile and the
    CPU everything else on the machine used (other work there disturbs the numbers)."""

    result: LoadResult
    server_cpu_s: float
    other_cpu_s: float
    notes: dict[str, Any]


def sample(
    server: Server, dataset: Dataset, workload: Workload, duration_s: float, warmup_s: float
) -> Sample:
    return sample_of(server, lambda: measure(server.target, dataset, workload, duration_s, warmup_s))


def sample_of(server: Server, load: Callable[[], tuple[LoadResult, dict[str, Any]]]) -> Sample:
    """Run `load` (its result and notes), with the CPU the server's processes and everything else used
    meanwhile."""
    roots = server.pids()
    cpu_before, busy_before = cpu_seconds(roots), machine_busy_seconds()
    result, notes = load()
    server_cpu = cpu_seconds(roots) - cpu_before
    other_cpu = machine_busy_seconds() - busy_before - server_cpu - result.loadgen_cpu_s
    return Sample(result, server_cpu, max(0.0, other_cpu), notes)


def combine(samples: list[Sample]) -> Measurement:
    """The measurement of all rounds of one workload on one server."""
    return Measurement.of(
        LoadResult.merge([s.result for s in samples]),
        sum(s.server_cpu_s for s in samples),
        samples[0].notes,
        sum(s.other_cpu_s for s in samples),
    )


def measure_server(
    server: Server, dataset: Dataset, workload: Workload, duration_s: float, warmup_s: float
) -> Measurement:
    """One workload on one server, in one round."""
    return combine([sample(server, dataset, workload, duration_s, warmup_s)])


def warm_up(server: Server, dataset: Dataset, chosen: list[Workload], seconds: float) -> None:
    """Run every workload unmeasured for a share of `seconds`: the JVM's JIT needs tens of seconds
    of load before the reference server reaches its steady speed (its CPU per loadTable halved over
    the first 40 s in trials), and both servers get the same treatment."""
    if seconds <= 0 or not chosen:
        return
    for workload in chosen:
        measure(server.target, dataset, workload, seconds / len(chosen), 0.0)


@contextlib.contextmanager
def floe_server(workers: int) -> Iterator[tuple[Server, LocalPostgres]]:
    with LocalPostgres() as pg:
        database_url = pg.create_database("floe_bench")
        with CatalogProcess(database_url, workers=workers) as process:
            postmaster = postmaster_pid(pg.data)

            def pids() -> list[int]:
                return [p for p in (process.process.pid if process.process else None, postmaster) if p]

            description = (
                f"`floe serve --workers {workers}` (uvicorn) on a local PostgreSQL "
                "(fsync off, synchronous_commit off), with its default authentication: every request "
                "carries an OAuth2 bearer token (client credentials of the bootstrap admin key) that "
                "floe verifies"
            )
            yield Server(discover(FLOE, process.url, process.token()), description, pids), pg


@contextlib.contextmanager
def reference_server() -> Iterator[Server]:
    with reference.ReferenceServer() as process:
        description = (
            f"`{reference.MAIN_CLASS}` {reference.ICEBERG_VERSION} (Jetty {reference.JETTY_VERSION}, "
            "default JVM settings) with a JdbcCatalog on a SQLite file (WAL, synchronous off) and "
            "HadoopFileIO on local disk; no authentication (it has none)"
        )

        def pids() -> list[int]:
            return [process.process.pid] if process.process else []

        yield Server(discover(REFERENCE, process.url), description, pids)


# Lakekeeper pages listTables by 100 unless asked; 1,000 (its maximum) returns the namespace in one page.
LAKEKEEPER_LIST_PAGE_SIZE = 1000
LAKEKEEPER_BUCKET = "floe-bench-lakekeeper"


@contextlib.contextmanager
def lakekeeper_server(build_if_missing: bool) -> Iterator[Server]:
    """Lakekeeper on its own PostgreSQL, with its warehouse on a moto S3 server in another process."""
    binary = lakekeeper.lakekeeper_binary(build_if_missing=build_if_missing)
    with LocalPostgres() as pg, moto_server.MotoServer() as moto:
        moto.create_bucket(LAKEKEEPER_BUCKET)
        storage = lakekeeper.S3Storage(
            endpoint=moto.endpoint,
            bucket=LAKEKEEPER_BUCKET,
            access_key_id=moto_server.ACCESS_KEY_ID,
            secret_access_key=moto_server.SECRET_ACCESS_KEY,
            region=moto_server.REGION,
        )
        pg.create_database("lakekeeper")
        database_url = lakekeeper.postgres_url(pg.port, "lakekeeper")
        with lakekeeper.LakekeeperServer(database_url, storage, binary=binary) as process:
            postmaster = postmaster_pid(pg.data)

            def pids() -> list[int]:
                candidates = (
                    process.process.pid if process.process else None,
                    postmaster,
                    moto.process.pid if moto.process else None,
                )
                return [p for p in candidates if p]

            description = (
                f"Lakekeeper {lakekeeper.LAKEKEEPER_VERSION} (`{lakekeeper.BINARY} serve`, built from "
                "its source release with cargo, release profile; its defaults: a tokio worker thread "
                "per core, 10 read and 5 write database connections) on its own local PostgreSQL (same "
                "settings as floe's), one warehouse on an S3 bucket of a moto server (another process; "
                "Lakekeeper 0.7 has no local file system storage: every commit writes its metadata file "
                "there), no STS; no authentication (no OpenID provider configured, authorization "
                "`allowall`: Lakekeeper's development mode); listTables sent with "
                f"`pageSize={LAKEKEEPER_LIST_PAGE_SIZE}`"
            )
            target = discover(
                LAKEKEEPER,
                process.catalog_url,
                warehouse=process.warehouse,
                list_page_size=LAKEKEEPER_LIST_PAGE_SIZE,
            )
            # The seeding client writes data files with moto's credentials: asking for remote signing
            # (instead of pyiceberg's default, vended credentials) keeps Lakekeeper from pointing it at
            # an fsspec signer it cannot use without s3fs.
            seeding = (
                ("header.X-Iceberg-Access-Delegation", "remote-signing"),
                ("s3.access-key-id", storage.access_key_id),
                ("s3.secret-access-key", storage.secret_access_key),
                ("s3.region", storage.region),
            )
            yield Server(dataclasses.replace(target, client_properties=seeding), description, pids)


def lakekeeper_versions() -> dict[str, Any]:
    """Lakekeeper's version and how long its cached build took (from build.json)."""
    build = lakekeeper.LakekeeperBuild()
    info = build.info()
    return {
        "lakekeeper": lakekeeper.LAKEKEEPER_VERSION,
        "lakekeeper_rustc": info.get("rustc"),
        "lakekeeper_build_seconds": info.get("total_seconds", info.get("seconds")),
        "lakekeeper_build_attempts": len(info.get("attempts", [])) or None,
        "lakekeeper_build_command": info.get("command"),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog", description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per workload")
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="split each workload's measurement into rounds, alternating which server goes first",
    )
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per workload")
    parser.add_argument(
        "--server-warmup",
        type=float,
        default=60.0,
        help="unmeasured seconds of all workloads on each server before measuring (JIT warm-up)",
    )
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients for read workloads")
    parser.add_argument("--tables", type=int, default=1000, help="tables in the listing namespace")
    parser.add_argument("--appends", type=int, default=8, help="snapshots in the events tables")
    parser.add_argument("--workers", type=int, default=2, help="floe serve worker processes")
    parser.add_argument(
        "--peers",
        type=_peers,
        default=[REFERENCE],
        help=f"comma-separated servers to measure floe against: reference (Iceberg's), {LAKEKEEPER} "
        f"(default reference; {LAKEKEEPER} needs its cached build, see devtools/lakekeeper.py)",
    )
    parser.add_argument(
        "--build-lakekeeper",
        action="store_true",
        help="build Lakekeeper with cargo first when it is not built yet (slow: an hour or more on 2 cores)",
    )
    parser.add_argument(
        "--only",
        choices=[FLOE, REFERENCE, LAKEKEEPER],
        default=None,
        help="measure one server only (for profiling)",
    )
    parser.add_argument(
        "--workload", action="append", default=None, help="run only these workloads (repeatable)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_DIR, help="directory for the results")
    return parser.parse_args(argv)


# `--peers` names: the reference server answers to its short name and to its result key.
PEER_NAMES = {"reference": REFERENCE, REFERENCE: REFERENCE, LAKEKEEPER: LAKEKEEPER}


def _peers(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PEER_NAMES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown peers {unknown}: choose from reference, {LAKEKEEPER}")
    return list(dict.fromkeys(PEER_NAMES[name] for name in names))


def output_name(peers: list[str]) -> str:
    """`catalog` for the default run against the reference server; `catalog-lakekeeper` with Lakekeeper."""
    return "catalog-lakekeeper" if LAKEKEEPER in peers else "catalog"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    peers: list[str] = [args.only] if args.only in (REFERENCE, LAKEKEEPER) else args.peers
    if LAKEKEEPER in peers and not args.build_lakekeeper:
        # Checked before anything starts: building takes long and is never done unasked.
        try:
            lakekeeper.lakekeeper_binary()
        except lakekeeper.LakekeeperNotBuilt as exc:
            print(f"{exc}; or pass --build-lakekeeper", flush=True)
            return 2
    started = time.perf_counter()
    settings = {
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "rounds": args.rounds,
        "server_warmup_s": args.server_warmup,
        "clients": args.clients,
        "floe_workers": args.workers,
        "peers": peers,
        "git_commit": git_commit(),
    }
    machine = machine_info()
    dataset = Dataset(list_tables=args.tables, appends=args.appends)
    chosen = [w for w in workloads(args.clients) if not args.workload or w.key in args.workload]
    with contextlib.ExitStack() as stack:
        servers: list[Server] = []
        postgres_bin: Path | None = None
        if args.only in (None, FLOE):
            floe, pg = stack.enter_context(floe_server(args.workers))
            servers.append(floe)
            postgres_bin = pg.bin
        if REFERENCE in peers and args.only in (None, REFERENCE):
            servers.append(stack.enter_context(reference_server()))
        if LAKEKEEPER in peers and args.only in (None, LAKEKEEPER):
            servers.append(stack.enter_context(lakekeeper_server(args.build_lakekeeper)))
        seeds: dict[str, SeedInfo] = {}
        for server in servers:
            print(f"seeding {server.target.name} at {server.target.url} ...", flush=True)
            seeds[server.target.name] = seed(server.target, dataset)
            print(f"warming up {server.target.name} for {args.server_warmup:g} s ...", flush=True)
            warm_up(server, dataset, chosen, args.server_warmup)
        results: list[WorkloadResult] = []
        for workload in chosen:
            row = WorkloadResult.of(workload)
            samples: dict[str, list[Sample]] = {s.target.name: [] for s in servers}
            # Alternating rounds: a drift in machine conditions hits both servers alike.
            for round_index in range(max(1, args.rounds)):
                for server in servers if round_index % 2 == 0 else servers[::-1]:
                    samples[server.target.name].append(
                        sample(server, dataset, workload, args.duration / max(1, args.rounds), args.warmup)
                    )
            for server in servers:
                m = row.results[server.target.name] = combine(samples[server.target.name])
                print(
                    f"{workload.key:16} {server.target.name:13} {m.throughput_rps:9.1f} req/s  "
                    f"p50 {m.p50_ms} ms  p99 {m.p99_ms} ms  errors {m.errors}  statuses {m.statuses}",
                    flush=True,
                )
            results.append(row)
        doc = results_document(
            settings=settings | {"total_seconds": round(time.perf_counter() - started, 1)},
            machine=machine,
            version_info=versions(
                postgres_bin,
                (reference.artifact_versions() if REFERENCE in peers else {})
                | (lakekeeper_versions() if LAKEKEEPER in peers else {}),
            ),
            servers={s.target.name: s.description for s in servers},
            seeds=seeds,
            workload_results=results,
        )
    json_path, md_path = write_results(doc, args.output, output_name(peers))
    print(render_markdown(doc))
    print(f"wrote {json_path} and {md_path}")
    return 0
