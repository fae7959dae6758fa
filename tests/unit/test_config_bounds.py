"""Bounds on floe.yaml and its JSON form, checked before anything walks the document: a YAML bomb (aliases
of aliases), deep nesting, recursive aliases and oversized documents are refused at once with the YAML
path and line of the offending value; ordinary anchors and aliases keep working; `floe apply` refuses a
bomb file before contacting the server."""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner

import catalog.pipelines.config as config_module
from catalog.pipelines import InvalidConfig, load_yaml, parse_config
from catalog.pipelines.bounds import LIMITS, DocumentLimits, check_document, compose
from catalog.pipelines.yaml_values import read_yaml
from tests.unit.test_pipeline_config import SEED_YAML

apply_cli = importlib.import_module("floe.cli.apply")  # the package's `apply` is the command


def yaml_bomb(levels: int = 9, width: int = 9) -> str:
    """The classic "billion laughs": each level's list holds `width` aliases of the level before."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for previous, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * width)}]")
    return "\n".join(lines) + "\n"


def refusal(text: str, limits: DocumentLimits = LIMITS) -> tuple[str, str, int | None]:
    with pytest.raises(InvalidConfig) as caught:
        compose(text, limits)
    (error,) = caught.value.errors
    return error.path, error.message, error.line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("levels", [9, 12])
def test_a_yaml_bomb_is_refused_at_the_value_that_expands_too_far(levels: int) -> None:
    text = yaml_bomb(levels)
    assert len(text) < 40 * levels + 60  # a few hundred bytes
    path, message, line = refusal(text)
    # 9**6 values in `f` (line 6) pass the 200 000 limit; nothing later is composed.
    assert (path, line) == ("f", 6)
    assert message.startswith("more than 200000 values once its aliases are expanded")
    with pytest.raises(InvalidConfig) as caught:  # what `floe apply` and the console call
        load_yaml(text)
    assert "more than 200000 values" in str(caught.value)


@pytest.mark.timeout(60)
def test_long_text_repeated_by_aliases_is_refused() -> None:
    text = f"a: &a {'x' * 100_000}\nb: [{', '.join(['*a'] * 100)}]\n"
    path, message, line = refusal(text)
    assert (path, line) == ("b", 2)
    assert "more than 4194304 characters of text once its aliases are expanded" in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_deep_nesting_is_refused_without_recursion(opening: str) -> None:
    text = "tables: " + opening * 200_000
    path, message, line = refusal(text)
    assert message == "nested deeper than 64 levels"
    assert path.startswith("tables")
    assert line == 1


def test_nesting_made_deep_by_aliases_is_refused() -> None:
    text = "a: &a " + "[" * 40 + "]" * 40 + "\nb: &b " + "[" * 30 + "*a" + "]" * 30 + "\n"
    path, message, line = refusal(text)
    assert message == "nested deeper than 64 levels once its aliases are expanded"
    assert path.startswith("b[0]")
    assert line == 2


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n"])
def test_a_recursive_alias_is_refused(text: str) -> None:
    path, message, line = refusal(text)
    assert message == "an alias inside the value its anchor names (a recursive alias)"
    assert line == 1
    assert path.startswith("a")


def test_aliases_are_counted() -> None:
    limits = DocumentLimits(max_aliases=3)
    compose("a: &a 1\nb: [*a, *a, *a]\n", limits)
    path, message, _ = refusal("a: &a 1\nb: [*a, *a, *a, *a]\n", limits)
    assert (path, message) == ("b[3]", "more than 3 aliases")


def test_the_byte_size_is_checked_before_parsing() -> None:
    limits = DocumentLimits(max_bytes=100)
    compose("a: " + "é" * 48, limits)  # 99 bytes
    assert refusal("a: " + "é" * 49, limits) == ("", "the document is larger than 100 bytes", None)
    # Not even valid YAML: the size is the first check.
    assert refusal("[" * 101, limits)[1] == "the document is larger than 100 bytes"


def test_ordinary_anchors_and_aliases_still_work() -> None:
    text = SEED_YAML.replace(
        "      schema:\n        fields:\n          - { name: environment",
        "      schema: &shared\n        fields:\n          - { name: environment",
        1,
    )
    assert text != SEED_YAML
    _data, marks, duplicates = read_yaml(text)
    assert duplicates == []
    assert marks["tables[0].schema"][0] > 1
    assert load_yaml(text).tables[0].schema is not None


def test_syntax_errors_keep_their_line() -> None:
    with pytest.raises(InvalidConfig) as caught:
        read_yaml("tables:\n  - a: [1, 2\n  - b: 3\n")
    assert "YAML syntax error at line" in caught.value.errors[0].message


# -- parsed documents (the management API's JSON) -------------------------------------------------------


def test_deep_json_is_refused_before_it_is_walked() -> None:
    deep: object = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(InvalidConfig) as caught:
        parse_config({"tables": deep})
    (error,) = caught.value.errors
    assert error.message == "nested deeper than 64 levels"
    assert error.path.startswith("tables[0][0]")


def test_shared_objects_count_at_every_place() -> None:
    shared: object = ["x"] * 9
    for _ in range(7):
        shared = [shared] * 9
    with pytest.raises(InvalidConfig) as caught:
        check_document({"tables": shared})
    assert "more than 200000 values" in caught.value.errors[0].message
    check_document({"tables": [["x"] * 9] * 9})


# -- floe apply ----------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_floe_apply_refuses_a_bomb_file_without_contacting_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "floe.yaml"
    path.write_text(yaml_bomb(12))
    monkeypatch.setattr(apply_cli, "call", lambda _: pytest.fail("the server was contacted"))
    result = CliRunner().invoke(apply_cli.apply, ["-f", str(path)])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "1 error(s), nothing applied" in output
    assert "f (line 6): more than 200000 values once its aliases are expanded" in output


def test_floe_apply_refuses_a_file_over_the_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "floe.yaml"
    path.write_text("a: " + "x" * LIMITS.max_bytes)
    monkeypatch.setattr(apply_cli, "call", lambda _: pytest.fail("the server was contacted"))
    result = CliRunner().invoke(apply_cli.apply, ["-f", str(path)])
    assert result.exit_code == 1, result.output
    assert f"the document is larger than {LIMITS.max_bytes} bytes" in " ".join(result.output.split())


def test_floe_apply_parses_once_and_sends_the_schema_files_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is read and parsed once: what is validated (with its `.proto` inlined) is what is sent."""
    from tests.protobuf_schemas import COMMON, ORDER

    (tmp_path / "protos").mkdir()
    (tmp_path / "protos" / "order.proto").write_text(ORDER)
    (tmp_path / "protos" / "common.proto").write_text(COMMON)
    path = tmp_path / "floe.yaml"
    path.write_text(
        """
source_clusters:
  - name: c
    bootstrap_brokers: [{hostname: localhost, port: 9092}]
tables:
  - source_cluster_name: c
    source_topic: orders
    source_format: protobuf
    protobuf_framing: raw
    protobuf:
      message: shop.Order
      schema_file: protos/order.proto
    schema:
      fields: [{name: id, id: 1, type: long}]
"""
    )
    sent: list[dict[str, object]] = []

    class Floe:
        def apply_pipeline(self, data: dict[str, object], dry_run: bool) -> None:
            sent.append(data)
            raise SystemExit(0)

    reads: list[str] = []
    real_read = config_module.read_yaml  # the command imports it from there when it runs

    def counted(text: str) -> object:
        reads.append(text)
        return real_read(text)

    monkeypatch.setattr(config_module, "read_yaml", counted)
    monkeypatch.setattr(apply_cli, "call", lambda action: action(Floe()))
    result = CliRunner().invoke(apply_cli.apply, ["-f", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    (data,) = sent
    block = data["tables"][0]["protobuf"]  # type: ignore[index]
    assert block == {"message": "shop.Order", "schema": ORDER, "imports": {"common.proto": COMMON}}
    assert len(reads) == 1
