"""Protobuf schemas as floe reads them: `.proto` text compiled to descriptors (protoc, from grpcio-tools),
a registry's schema string (`.proto` text or a base64 serialized `FileDescriptorProto`) with its
references, and floe.yaml's `protobuf` block of an inline-schema table.

Every schema ends up as a `FileDescriptorSet` holding the main file and everything it imports, in
dependency order, so descriptors can be built from it anywhere (floe's JVM decoder gets the serialized
set). Well-known types (`google/protobuf/*.proto`) come from the protobuf runtime when a
registry leaves them out, as Confluent's serializers do.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError
from pydantic import BeforeValidator, Field, field_validator, model_validator

from catalog.pipelines.validation import ConfigModel, Text, problem, problems

# The well-known types' modules: importing one puts its file into the runtime's default pool.
_WELL_KNOWN = (
    "any",
    "api",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
    "descriptor",
)
_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)
PROTOC_TIMEOUT_SECONDS = 60
# What the main file of a registry schema given as `.proto` text is called (the registry names only
# referenced files).
MAIN_FILE = "floe_main.proto"


class ProtoSchemaError(ValueError):
    """A protobuf schema that cannot be used: it does not compile, or names an unknown message."""


# -- compiling and loading ----------------------------------------------------------------------------


def compile_proto(
    files: Mapping[str, str],
    main: str | Iterable[str],
    known: Iterable[descriptor_pb2.FileDescriptorProto] = (),
) -> descriptor_pb2.FileDescriptorSet:
    """`files` (import path → `.proto` text) compiled with protoc: `main` (one file or several) and
    everything it imports.

    `known` are already-compiled files the sources may import (a registry's base64 references).
    ProtoSchemaError carries protoc's message, with the temporary folder's path taken out.
    """
    return descriptor_pb2.FileDescriptorSet.FromString(
        _compile(
            tuple(sorted(files.items())),
            (main,) if isinstance(main, str) else tuple(main),
            tuple(f.SerializeToString() for f in known),
        )
    )


@lru_cache(maxsize=64)
def _compile(files: tuple[tuple[str, str], ...], mains: tuple[str, ...], known: tuple[bytes, ...]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="floe-proto-") as tmp:
        root = Path(tmp) / "src"
        for name, text in files:
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or not name.endswith(".proto"):
                raise ProtoSchemaError(f"invalid .proto file name {name!r}")
            target = root.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        out = Path(tmp) / "set.pb"
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{root}",
            f"--descriptor_set_out={out}",
            "--include_imports",
        ]
        if known:
            given = Path(tmp) / "known.pb"
            known_set = descriptor_pb2.FileDescriptorSet(
                file=[descriptor_pb2.FileDescriptorProto.FromString(k) for k in known]
            )
            given.write_bytes(known_set.SerializeToString())
            command.append(f"--descriptor_set_in={given}")
        command += mains
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_SECONDS, check=False
        )
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().replace(f"{root}/", "")
            raise ProtoSchemaError(f"the .proto does not compile: {message}")
        return out.read_bytes()


def parse_file_descriptor(name: str, schema_str: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A registry schema string that is a base64 serialized FileDescriptorProto, named `name`; None
    when it is `.proto` text."""
    try:
        data = base64.b64decode(schema_str.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        parsed = descriptor_pb2.FileDescriptorProto.FromString(data)
    except DecodeError:
        return None
    if not (parsed.message_type or parsed.enum_type or parsed.dependency or parsed.package):
        return None
    if name:
        parsed.name = name
    return parsed


def well_known_file(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A well-known type's file (`google/protobuf/timestamp.proto`) from the protobuf runtime."""
    for module in _WELL_KNOWN:
        importlib.import_module(f"google.protobuf.{module}_pb2")
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def descriptor_set(
    main_str: str, references: Mapping[str, str], main_name: str = MAIN_FILE
) -> tuple[descriptor_pb2.FileDescriptorSet, str]:
    """A schema and its references (import path → schema string, text or base64) as one set, with the
    main file's name. Imports neither given nor well-known fail with ProtoSchemaError."""
    compiled: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    sources: dict[str, str] = {}
    for name, text in references.items():
        parsed = parse_file_descriptor(name, text)
        if parsed is not None:
            compiled[name] = parsed
        else:
            sources[name] = text
    main = parse_file_descriptor("", main_str)
    if main is not None:
        main_name = main.name or main_name
        main.name = main_name
        compiled[main_name] = main
    else:
        sources[main_name] = main_str
    if sources:
        # protoc compiles the text files; the base64 ones (and well-known files) are handed to it.
        known = [*compiled.values(), *_missing_well_known(compiled.values(), sources)]
        built = compile_proto(sources, sorted(sources), known)
        for file in built.file:
            compiled.setdefault(file.name, file)
    return _ordered(compiled, main_name), main_name


def _missing_well_known(
    files: Iterable[descriptor_pb2.FileDescriptorProto], sources: Mapping[str, str]
) -> list[descriptor_pb2.FileDescriptorProto]:
    given = {f.name for f in files} | set(sources)
    wanted = {d for f in files for d in f.dependency} | {
        d for text in sources.values() for d in _IMPORT.findall(text)
    }
    found = []
    for name in sorted(wanted - given):
        file = well_known_file(name)
        if file is not None:
            found.append(file)
    return found


def _ordered(
    files: Mapping[str, descriptor_pb2.FileDescriptorProto], main: str
) -> descriptor_pb2.FileDescriptorSet:
    """The files `main` needs, dependencies first (what DescriptorPool.Add requires)."""
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in seen:
            return
        if name in chain:
            raise ProtoSchemaError(f"import cycle: {' → '.join((*chain, name))}")
        file = files.get(name) or well_known_file(name)
        if file is None:
            raise ProtoSchemaError(
                f"{chain[-1] if chain else 'the schema'} imports {name!r}, which is not given"
            )
        for dependency in file.dependency:
            visit(dependency, (*chain, name))
        seen.add(name)
        ordered.append(file)

    visit(main, ())
    return descriptor_pb2.FileDescriptorSet(file=ordered)


def build_pool(files: descriptor_pb2.FileDescriptorSet) -> descriptor_pool.DescriptorPool:
    """A descriptor pool of the set's files (in order, dependencies first)."""
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        try:
            pool.Add(file)
        except (TypeError, ValueError) as exc:
            raise ProtoSchemaError(f"{file.name}: {exc}") from exc
    return pool


def message_names(files: descriptor_pb2.FileDescriptorSet, file_name: str) -> list[str]:
    """The full names of the messages a file defines (nested ones too), in definition order."""
    names: list[str] = []

    def visit(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            full = f"{prefix}.{message.name}" if prefix else message.name
            if not message.options.map_entry:
                names.append(full)
            visit(full, message.nested_type)

    for file in files.file:
        if file.name == file_name:
            visit(file.package, file.message_type)
    return names


def message_name_at(files: descriptor_pb2.FileDescriptorSet, file_name: str, indexes: Iterable[int]) -> str:
    """The full name of the message Confluent's message indexes point at (`[0]`: the file's first
    message; `[1, 0]`: the first nested message of the second). ProtoSchemaError when there is none."""
    file = next((f for f in files.file if f.name == file_name), None)
    path = list(indexes)
    if file is None or not path:
        raise ProtoSchemaError(f"message index {path} is not in the schema")
    name: str = file.package
    messages = file.message_type
    for index in path:
        if not 0 <= index < len(messages):
            raise ProtoSchemaError(f"message index {path} is not in the schema")
        message = messages[index]
        name = f"{name}.{message.name}" if name else str(message.name)
        messages = message.nested_type
    return name


# -- floe.yaml: the `protobuf` block of an inline-schema table ------------------------------------------


def _proto_imports(value: Any) -> Any:
    return {} if value is None else value


class ProtobufConfig(ConfigModel):
    """An inline protobuf schema: the message type records are, and its `.proto` text (or, in the file
    given to `floe apply`, `schema_file`: a path next to floe.yaml that floe apply reads into `schema`,
    with the local files it imports into `imports`)."""

    message: Text
    schema_text: Text | None = Field(default=None, alias="schema")
    schema_file: Text | None = None
    imports: Annotated[dict[str, str], BeforeValidator(_proto_imports)] = Field(
        default_factory=dict, exclude_if=lambda imports: not imports
    )

    @field_validator("message")
    @classmethod
    def _full_name(cls, name: str) -> str:
        name = name.strip().lstrip(".")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
            raise problem(f"expected a message's full name such as shop.v1.Order; got {name!r}")
        return name

    @model_validator(mode="after")
    def _compiles(self) -> ProtobufConfig:
        if self.schema_file is not None:
            raise problems(
                [
                    (
                        ("schema_file",),
                        "schema_file is read by `floe apply -f floe.yaml` (relative to floe.yaml); "
                        "send the .proto text as schema",
                    )
                ]
            )
        if self.schema_text is None:
            raise problems([(("schema",), "schema is required: the .proto text (or schema_file)")])
        try:
            files, main = self.descriptor_set()
        except ProtoSchemaError as exc:
            raise problems([(("schema",), str(exc))]) from None
        known = message_names(files, main)
        if self.message not in known:
            raise problems(
                [
                    (
                        ("message",),
                        f"the schema defines no message {self.message!r} "
                        f"(it defines: {', '.join(known) or 'none'})",
                    )
                ]
            )
        return self

    def __hash__(self) -> int:
        return hash((self.message, self.schema_text, tuple(sorted(self.imports.items()))))

    def descriptor_set(self) -> tuple[descriptor_pb2.FileDescriptorSet, str]:
        """The compiled schema and the name of its main file."""
        assert self.schema_text is not None
        return descriptor_set(self.schema_text, self.imports)


def inline_schema_files(data: Any, base: Path) -> list[tuple[str, str]]:
    """Replace every table's `protobuf.schema_file` of a parsed floe.yaml by the file's text (`schema`)
    and the local files it imports (`imports`), read relative to `base` (floe.yaml's folder); the
    problems as (YAML path, message). Only `floe apply` on the machine holding the files does this."""
    found: list[tuple[str, str]] = []
    tables = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(tables, list):
        return found
    for index, table in enumerate(tables):
        block = table.get("protobuf") if isinstance(table, dict) else None
        if not isinstance(block, dict) or not isinstance(block.get("schema_file"), str):
            continue
        where = f"tables[{index}].protobuf.schema_file"
        path = base / block["schema_file"]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            found.append((where, f"cannot read {block['schema_file']!r}: {exc.strerror or exc}"))
            continue
        except UnicodeDecodeError:
            found.append((where, f"cannot read {block['schema_file']!r}: not UTF-8 text"))
            continue
        imports: dict[str, str] = dict(block.get("imports") or {})
        pending = list(_IMPORT.findall(text))
        while pending:
            name = pending.pop()
            local = path.parent / name
            if name in imports or name.startswith("google/protobuf/") or not local.is_file():
                continue
            imports[name] = local.read_text(encoding="utf-8")
            pending += _IMPORT.findall(imports[name])
        del block["schema_file"]
        block["schema"] = text
        if imports:
            block["imports"] = imports
    return found


__all__ = [
    "MAIN_FILE",
    "ProtoSchemaError",
    "ProtobufConfig",
    "build_pool",
    "compile_proto",
    "descriptor_set",
    "inline_schema_files",
    "message_name_at",
    "message_names",
    "parse_file_descriptor",
    "well_known_file",
]
