"""The documentation's engine blocks, as the tests use them: copied verbatim, only the placeholders filled in.

Each block of docs/engines.md ("Connecting engines") follows a `<!-- engine: NAME -->` line. The
placeholders are the ones the page tells the reader to fill: floe's URL (`http://127.0.0.1:8181`), an API
key (`CLIENT_ID`, `CLIENT_SECRET`) and, for S3, `REGION` and `S3_ENDPOINT`.
"""

from __future__ import annotations

import re
from pathlib import Path

ENGINES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "engines.md"
README_URL = "http://127.0.0.1:8181"


def engine_block(name: str) -> str:
    """The fenced block right after `<!-- engine: name -->` in docs/engines.md."""
    text = ENGINES_PAGE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- engine: {re.escape(name)} -->\n```[a-z]*\n(.*?)\n```\n", text, re.DOTALL)
    if match is None:
        raise AssertionError(f"docs/engines.md has no block marked <!-- engine: {name} -->")
    return match.group(1) + "\n"


def filled(block: str, *, url: str, client_id: str, client_secret: str, **s3: str) -> str:
    """`block` with floe's URL, the key and (keyword `region`, `s3_endpoint`) S3's placeholders filled.

    The key's placeholders are replaced where they stand for values (`CLIENT_ID:CLIENT_SECRET`, or quoted
    in SQL), never DuckDB's `CLIENT_ID` keyword."""
    text = block.replace(README_URL, url)
    text = text.replace("CLIENT_ID:CLIENT_SECRET", f"{client_id}:{client_secret}")
    text = text.replace("'CLIENT_ID'", f"'{client_id}'").replace("'CLIENT_SECRET'", f"'{client_secret}'")
    if "region" in s3:
        text = re.sub(r"\bREGION\b", s3["region"], text)
    if "s3_endpoint" in s3:
        text = text.replace("S3_ENDPOINT", s3["s3_endpoint"])
    left = [p for p in ("S3_ENDPOINT", "REGION", "127.0.0.1:8181", "CLIENT_SECRET'") if p in text]
    assert not left, f"placeholders left in the block: {left}"
    return text


def properties(text: str) -> dict[str, str]:
    """A Java properties block (`key=value` lines; `#` comments) as a dict."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}
