"""`floe dev`: local development components (`devtools`) in the foreground until Ctrl-C."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from types import FrameType

import click
from rich.console import Console

from devtools.kafka_broker import (
    KAFKA_VERSION,
    SECURED_LISTENERS,
    LocalKafka,
    SecuredListeners,
    default_data_dir,
)
from devtools.schema_registry import APICURIO_VERSION, LocalSchemaRegistry, runner_jar_path


@click.group()
def dev() -> None:
    """Local development components: a Kafka broker, a schema registry."""


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@dev.command("kafka")
@click.option("--port", type=int, default=9092, show_default=True, help="PLAINTEXT port on 127.0.0.1.")
@click.option(
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory, kept between runs [default: $FLOE_HOME/kafka, else ~/.local/share/floe/kafka].",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Partitions of auto-created topics.",
)
@click.option(
    "--secured",
    is_flag=True,
    help="Also open secured listeners on the next four ports: SASL_SSL with PLAIN, SASL_SSL with "
    "SCRAM-SHA-256/512, SSL requiring a client certificate (mTLS), and SSL with a self-signed certificate "
    "for another name; with a throwaway CA and certificates (kept in the data directory) and a user, all "
    "printed at start.",
)
def kafka_command(port: int, data_dir: Path | None, partitions: int, secured: bool) -> None:
    """Run a local single-node Apache Kafka broker (KRaft) in the foreground until Ctrl-C."""
    console = Console()
    directory = data_dir or default_data_dir()
    # Next to the plaintext port, so they stay the same between runs (9093-9096 by default).
    if secured and port + len(SECURED_LISTENERS) > 65535:
        raise click.BadParameter(
            f"--secured needs the {len(SECURED_LISTENERS)} ports after it", param_hint="--port"
        )
    secured_ports = {name: port + 1 + i for i, name in enumerate(SECURED_LISTENERS)}
    broker = LocalKafka(
        port=port,
        data_dir=directory,
        partitions_default=partitions,
        secured=secured,
        secured_ports=secured_ports,
    )
    # SIGTERM (kill, service managers) stops the broker as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        with console.status(f"Starting Apache Kafka {KAFKA_VERSION} (first run downloads it)..."):
            broker.start()
        console.print(
            f"[green]Kafka {KAFKA_VERSION}[/green] (KRaft, single node) listening on "
            f"[bold]{broker.bootstrap_servers}[/bold]  (started in {broker.startup_seconds:.1f} s)\n"
            f"data: {broker.data_dir}\nlog:  {broker.log_path}"
        )
        if broker.secured_listeners is not None:
            console.print(secured_listeners_text(broker.secured_listeners), highlight=False, markup=False)
        console.print("Press Ctrl-C to stop.")
        assert broker.process is not None
        returncode = broker.process.wait()
        raise click.ClickException(f"Kafka broker exited on its own ({returncode}):\n{broker.log_tail()}")
    except KeyboardInterrupt:
        console.print("Stopping Kafka...")
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        broker.stop()
    console.print("Kafka stopped.")


def secured_listeners_text(secured: SecuredListeners) -> str:
    """What a client needs for each secured listener, with floe.yaml's credentials for it."""
    certs = secured.certificates
    return "\n".join(
        [
            "Secured listeners (all present a certificate signed by the CA, for 127.0.0.1 and localhost):",
            f"  SASL_SSL, PLAIN:              {secured.address(secured.sasl_plain_port)}",
            f"  SASL_SSL, SCRAM-SHA-256/512:  {secured.address(secured.sasl_scram_port)}",
            f"  SSL, client certificate:      {secured.address(secured.mtls_port)}",
            f"  SSL, self-signed for another name: {secured.address(secured.self_signed_port)}"
            "  (tls_insecure_skip_verify)",
            f"user: {secured.username}  password: {secured.password}  (PLAIN and both SCRAM mechanisms)",
            f"CA certificate:      {certs.ca.certificate}",
            f"client certificate:  {certs.client.certificate}  key: {certs.client.key}",
            f"also, for testing refusals: {certs.expired_client.certificate} (expired), "
            f"{certs.untrusted_client.certificate} (signed by another CA)",
            "floe.yaml, e.g. SCRAM (export FLOE_KAFKA_USER, FLOE_KAFKA_PASSWORD, FLOE_KAFKA_CA):",
            "  source_clusters:",
            "    - name: secured",
            f"      bootstrap_brokers: [{{hostname: 127.0.0.1, port: {secured.sasl_scram_port}}}]",
            "      credentials:",
            "        use_tls: true",
            "        sasl_mechanism: scram-512",
            "        sasl_username_env: FLOE_KAFKA_USER",
            "        sasl_password_env: FLOE_KAFKA_PASSWORD",
            "        mtls_server_ca_cert_env: FLOE_KAFKA_CA",
        ]
    )


@dev.command("schema-registry")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8081, show_default=True, help="HTTP port on 127.0.0.1."
)
def registry_command(port: int) -> None:
    """Run a local Schema Registry (Apicurio, in memory, Confluent-compatible API) until Ctrl-C."""
    console = Console()
    registry = LocalSchemaRegistry(port=port)
    # SIGTERM (kill, service managers) stops the registry as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        status = f"Starting Apicurio Registry {APICURIO_VERSION}"
        if not runner_jar_path().exists():
            status += " (first run: downloading and building it, a few minutes)"
        with console.status(status + "..."):
            registry.start()
        built = f", built in {registry.build_seconds:.0f} s" if registry.build_seconds is not None else ""
        console.print(
            f"[green]Apicurio Registry {APICURIO_VERSION}[/green] (in memory) started in "
            f"{registry.startup_seconds:.1f} s{built}\n"
            f"Confluent-compatible API: [bold]{registry.url}[/bold]\n"
            f"log: {registry.log_path}\nPress Ctrl-C to stop (the registry keeps nothing)."
        )
        assert registry.process is not None
        returncode = registry.process.wait()
        raise click.ClickException(
            f"The schema registry exited on its own ({returncode}):\n{registry.log_tail()}"
        )
    except KeyboardInterrupt:
        console.print("Stopping the schema registry...")
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        registry.stop()
        if registry.owns_log_dir:
            shutil.rmtree(registry.log_dir, ignore_errors=True)
    console.print("Schema registry stopped.")
