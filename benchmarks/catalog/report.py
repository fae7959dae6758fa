"""Result records, the machine and version facts, and the JSON and Markdown outputs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.catalog.loadgen import LoadResult
from benchmarks.catalog.workloads import SeedInfo, Workload

FLOE = "floe"
REFERENCE = "iceberg-rest"
LAKEKEEPER = "lakekeeper"
LABELS = {FLOE: "floe", REFERENCE: "Iceberg reference server", LAKEKEEPER: "Lakekeeper"}
# Column headings of the peers floe is measured against.
SHORT_LABELS = {REFERENCE: "reference", LAKEKEEPER: "Lakekeeper"}
# Whose CPU counts as the server's, per peer.
PEER_CPU = {REFERENCE: "the JVM", LAKEKEEPER: "its process plus its PostgreSQL and the moto S3 server"}

# Targets from the issue: reported, never asserted.
THROUGHPUT_RATIO_TARGET = 1.5
P99_TARGET_MS = 20.0


@dataclass
class Measurement:
    """One workload on one server."""

    requests: int
    throughput_rps: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    statuses: dict[str, int]
    server_cpu_cores: float
    loadgen_cpu_share: float
    # Cores busy with anything else on the machine meanwhile: high values mean a disturbed run.
    other_cpu_cores: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls, result: LoadResult, server_cpu_s: float, notes: dict[str, Any], other_cpu_s: float = 0.0
    ) -> Measurement:
        return cls(
            requests=result.requests,
            throughput_rps=round(result.throughput, 1),
            p50_ms=_round(result.percentile_ms(50)),
            p99_ms=_round(result.percentile_ms(99)),
            errors=result.errors,
            statuses={str(k): v for k, v in sorted(result.statuses.items())}
            | ({"connection-errors": result.connection_errors} if result.connection_errors else {}),
            server_cpu_cores=round(server_cpu_s / result.wall_s, 2) if result.wall_s else 0.0,
            loadgen_cpu_share=round(result.loadgen_cpu_share, 3),
            other_cpu_cores=round(other_cpu_s / result.wall_s, 2) if result.wall_s else 0.0,
            notes=notes,
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@dataclass
class WorkloadResult:
    key: str
    title: str
    concurrency: int
    results: dict[str, Measurement] = field(default_factory=dict)

    @classmethod
    def of(cls, workload: Workload) -> WorkloadResult:
        return cls(workload.key, workload.title, workload.concurrency)

    @property
    def throughput_ratio(self) -> float | None:
        """floe ÷ the reference server."""
        return self.ratio_to(REFERENCE)

    def ratio_to(self, peer: str) -> float | None:
        """floe's throughput ÷ a peer's, where both were measured and the peer's is comparable (a
        peer without ETags answers the If-None-Match workload with full 200s: not a 304 rate)."""
        floe, other = self.results.get(FLOE), self.results.get(peer)
        if floe is None or other is None or not other.throughput_rps or not comparable(other):
            return None
        return round(floe.throughput_rps / other.throughput_rps, 2)


def comparable(m: Measurement | dict[str, Any]) -> bool:
    """False for a measurement of the If-None-Match workload on a server that sends no ETag."""
    notes = m.notes if isinstance(m, Measurement) else m.get("notes", {})
    return notes.get("etag_supported") is not False


def machine_info() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _first_line(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def versions(postgres_bin: Path | None, reference_artifacts: dict[str, str]) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "floe": _package_version("floe"),
        **{
            name: _package_version(name)
            for name in ("litestar", "uvicorn", "uvloop", "sqlalchemy", "asyncpg", "pyiceberg", "httpx")
        },
        "postgresql": _first_line([str(postgres_bin / "postgres"), "--version"]) if postgres_bin else None,
        "java": _first_line(["java", "-version"]),
        **reference_artifacts,
    }


def results_document(
    *,
    settings: dict[str, Any],
    machine: dict[str, Any],
    version_info: dict[str, Any],
    servers: dict[str, str],
    seeds: dict[str, SeedInfo],
    workload_results: list[WorkloadResult],
) -> dict[str, Any]:
    load = next((w for w in workload_results if w.key == "load_table"), None)
    floe_p99 = {w.key: w.results[FLOE].p99_ms for w in workload_results if FLOE in w.results}
    ratio = load.throughput_ratio if load else None
    peers = [name for name in servers if name != FLOE]
    return {
        "benchmark": "catalog",
        "settings": settings,
        "machine": machine | {"load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "versions": version_info,
        "servers": servers,
        "setup": {name: asdict(info) for name, info in seeds.items()},
        "workloads": [
            asdict(w)
            | {"floe_vs_reference_throughput": w.throughput_ratio}
            | {"floe_vs_peer_throughput": {peer: w.ratio_to(peer) for peer in peers}}
            for w in workload_results
        ],
        "targets": {
            "load_table_throughput_ratio": ratio,
            "load_table_throughput_ratio_target": THROUGHPUT_RATIO_TARGET,
            "load_table_throughput_met": None if ratio is None else ratio >= THROUGHPUT_RATIO_TARGET,
            "floe_p99_ms": floe_p99,
            "floe_p99_target_ms": P99_TARGET_MS,
            "floe_p99_met": {
                key: None if value is None else value <= P99_TARGET_MS for key, value in floe_p99.items()
            },
        },
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def peers_of(doc: dict[str, Any]) -> list[str]:
    """The servers floe was measured against, in the run's order (the reference server's columns
    when floe ran alone)."""
    return [name for name in doc["servers"] if name != FLOE] or [REFERENCE]


def _ratio(w: dict[str, Any], peer: str) -> float | None:
    if peer == REFERENCE:
        ratio: float | None = w.get("floe_vs_reference_throughput")
        return ratio
    return (w.get("floe_vs_peer_throughput") or {}).get(peer)


def _rate(m: dict[str, Any] | None) -> str:
    if m is None:
        return "n/a"
    if not comparable(m):
        return "n/a (no ETag)"
    return _fmt(m["throughput_rps"], 0)


def render_markdown(doc: dict[str, Any]) -> str:
    settings, machine, version_info = doc["settings"], doc["machine"], doc["versions"]
    peers = peers_of(doc)
    short = [SHORT_LABELS.get(peer, peer) for peer in peers]
    title = " and ".join(
        "the Apache Iceberg reference REST server" if peer == REFERENCE else LABELS.get(peer, peer)
        for peer in peers
    )
    lines = [
        f"# Catalog benchmark: floe vs {title}",
        "",
        f"Generated by `python -m benchmarks.catalog` on {settings['started_at']}"
        + (f" at git commit `{settings['git_commit']}`" if settings.get("git_commit") else "")
        + ". "
        f"Each server ran all workloads unmeasured for {settings.get('server_warmup_s', 0):g} s first "
        "(JIT warm-up), "
        f"then {settings['duration_s']:g} s measured per workload and server, in "
        f"{settings.get('rounds', 1)} round(s) alternating which server goes first, each after "
        f"{settings['warmup_s']:g} s of warm-up; closed loop (each client sends its next request when "
        "the previous answer is complete), keep-alive HTTP/1.1, no compression. "
        "Latency in milliseconds, measured by the client.",
        "",
        "| Workload | Clients | floe req/s | "
        + " | ".join(f"{label} req/s" for label in short)
        + " | "
        + " | ".join(f"floe ÷ {label}" for label in short)
        + " | floe p50 | floe p99 | "
        + " | ".join(f"{label} p50 | {label} p99" for label in short)
        + " | floe errors | "
        + " | ".join(f"{label} errors" for label in short)
        + " |",
        "|---|" + "---:|" * (2 + 2 * len(peers) + 2 + 2 * len(peers) + 1 + len(peers)),
    ]
    for w in doc["workloads"]:
        floe = w["results"].get(FLOE)
        others = [w["results"].get(peer) for peer in peers]
        ratios = [_ratio(w, peer) for peer in peers]
        lines.append(
            f"| {w['title']} | {w['concurrency']} | {_rate(floe)} | "
            + " | ".join(_rate(m) for m in others)
            + " | "
            + " | ".join("n/a" if r is None else f"{r:.2f}x" for r in ratios)
            + f" | {_fmt(floe and floe['p50_ms'], 2)} | {_fmt(floe and floe['p99_ms'], 2)} | "
            + " | ".join(f"{_fmt(m and m['p50_ms'], 2)} | {_fmt(m and m['p99_ms'], 2)}" for m in others)
            + f" | {floe['errors'] if floe else 'n/a'} | "
            + " | ".join(str(m["errors"]) if m else "n/a" for m in others)
            + " |"
        )
    server_cpu = "; ".join(
        f"{SHORT_LABELS.get(peer, peer)}: {PEER_CPU.get(peer, 'its processes')}" for peer in peers
    )
    lines += [
        "",
        "Responses by HTTP status; CPU in cores busy on average: the server (floe: workers plus "
        f"PostgreSQL; {server_cpu}), and everything else on the machine except the load generator "
        "(other work there disturbs the numbers):",
        "",
        "| Workload | floe statuses | floe CPU | other CPU | "
        + " | ".join(f"{label} statuses | {label} CPU | other CPU" for label in short)
        + " |",
        "|---|---|---:|---:|" + "---|---:|---:|" * len(peers),
    ]
    for w in doc["workloads"]:
        cells = [
            f"{_statuses(m)} | {_fmt(m and m['server_cpu_cores'], 2)} "
            f"| {_fmt(m and m.get('other_cpu_cores'), 2)}"
            for m in (w["results"].get(name) for name in [FLOE, *peers])
        ]
        lines.append(f"| {w['title']} | " + " | ".join(cells) + " |")
    etag = next((w for w in doc["workloads"] if w["key"] == "load_table_etag"), None)
    if etag:
        lines += ["", "ETags (`If-None-Match` on loadTable):", ""]
        for name, m in etag["results"].items():
            notes = m["notes"]
            shown = f"`{notes['etag']}`" if notes.get("etag") else "none"
            line = (
                f"- {LABELS.get(name, name)}: ETag {shown}; "
                f"a conditional request is answered {notes.get('conditional_status')}."
            )
            if not comparable(m):
                line += (
                    f" It sends no ETag, so the workload measured full answers to a made-up one "
                    f"({_fmt(m['throughput_rps'], 0)} req/s, statuses {_statuses(m)}): "
                    "no 304 rate to compare."
                )
            lines.append(line)
    targets = doc["targets"]
    ratio = targets["load_table_throughput_ratio"]
    lines += [
        "",
        "Targets (reported, not asserted):",
        "",
        f"- loadTable throughput floe ÷ reference ≥ {targets['load_table_throughput_ratio_target']:g}x: "
        f"{'n/a' if ratio is None else f'{ratio:.2f}x'} "
        f"({_verdict(targets['load_table_throughput_met'])})",
        f"- floe p99 ≤ {targets['floe_p99_target_ms']:g} ms: "
        + ", ".join(
            f"{key} {_fmt(value, 2)} ms ({_verdict(targets['floe_p99_met'][key])})"
            for key, value in targets["floe_p99_ms"].items()
        ),
        "",
        "Setup (identical on every server):",
        "",
    ]
    for name, info in doc["setup"].items():
        lines.append(
            f"- {LABELS.get(name, name)}: read table with {info['snapshots']} snapshots, "
            f"metadata {info['metadata_json_bytes']:,} bytes, loadTable response "
            f"{info['load_table_response_bytes']:,} bytes, listTables response "
            f"{info['list_tables_response_bytes']:,} bytes; seeded in {info['seconds']:.1f} s."
        )
    lines += ["", "Servers:", ""]
    lines += [f"- {LABELS.get(name, name)}: {description}" for name, description in doc["servers"].items()]
    loadgen = max(
        (m["loadgen_cpu_share"] for w in doc["workloads"] for m in w["results"].values()), default=0.0
    )
    lines += [
        "",
        f"Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, "
        f"{machine['os']}; load average before {machine['load_average_before']}, "
        f"after {machine['load_average_after']}. Servers, PostgreSQL and the load generator share the "
        f"machine; the generator used at most {loadgen:.0%} of one core.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in version_info.items() if v),
        "",
    ]
    if version_info.get("lakekeeper_build_seconds") is not None:
        lines += [
            f"Lakekeeper {version_info.get('lakekeeper')} was built from source for this run's binary in "
            f"{version_info['lakekeeper_build_seconds'] / 60:.0f} min of wall time "
            f"over {version_info.get('lakekeeper_build_attempts') or 1} cargo run(s), each resuming the last "
            f"(`{version_info.get('lakekeeper_build_command')}`, {version_info.get('lakekeeper_rustc')}) on "
            "this machine while other work ran on it; the benchmark only reuses the cached binary.",
            "",
        ]
    return "\n".join(lines)


def _statuses(m: dict[str, Any] | None) -> str:
    return "n/a" if not m else ", ".join(f"{k}: {v:,}" for k, v in m["statuses"].items())


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "missed")


def write_results(doc: dict[str, Any], directory: Path, name: str = "catalog") -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    md_path.write_text(render_markdown(doc))
    return json_path, md_path
