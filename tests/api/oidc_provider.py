"""A real OpenID Connect issuer for the tests: navikt's mock-oauth2-server, standalone, on 127.0.0.1.

Maven Central publishes only its thin jar, so the runtime classpath (what Maven resolves for
`no.nav.security:mock-oauth2-server:6.0.2`, runtime scope, without junit) is pinned here with each jar's
SHA-1 and cached in `~/.cache/floe/jars/`. The server issues client-credentials tokens at
`{issuer}/token`; its request mappings (see `_mappings`) copy form parameters into claims, so a test asks
for exactly the claims it needs: `cluster`, `role`, `group` and `token_audience` become `floe_cluster`
(also `kafka.cluster_id`), `floe_role`, `realm_access.roles` and `aud`; `expired=1` and `not_before=1`
give a token whose `exp` is in the past or whose `nbf` is far in the future. The key id is always the
issuer id (`floe-idp`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import urllib.request
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
MAIN_CLASS = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
ISSUER_ID = "floe-idp"
OTHER_ISSUER_ID = "other-idp"

# (group, artifact, version, sha1)
ARTIFACTS: tuple[tuple[str, str, str, str], ...] = (
    ("no.nav.security", "mock-oauth2-server", "6.0.2", "b304cf0f6f63eba30b87ce3007d71f152a6e0405"),
    ("com.fasterxml.jackson.core", "jackson-annotations", "2.22", "15c67f9498d6934cff9510fc70c5a12e52290457"),
    ("com.github.stephenc.jcip", "jcip-annotations", "1.0-1", "ef31541dd28ae2cefdd17c7ebf352d93e9058c63"),
    ("com.nimbusds", "content-type", "2.3", "e3aa0be212d7a42839a8f3f506f5b990bcce0222"),
    ("com.nimbusds", "lang-tag", "1.7", "97c73ecd70bc7e8eefb26c5eea84f251a63f1031"),
    ("com.nimbusds", "nimbus-jose-jwt", "10.9.1", "82ab15c57686545d989dd2c82cbec5b6b6f1c860"),
    ("com.nimbusds", "oauth2-oidc-sdk", "11.38.2", "633504f3430c148cc583d9d481f5f4e48e29cccf"),
    ("com.squareup.okhttp3", "mockwebserver3", "5.4.0", "a12e1d58d550f8ecc8edd6709ffb810589acffed"),
    ("com.squareup.okhttp3", "mockwebserver", "5.4.0", "a54f047a793c0d613ab89f6463d6c4642a641770"),
    ("com.squareup.okhttp3", "okhttp-jvm", "5.4.0", "e1fae6fccaae70e60b31153c6a7680306a86ed31"),
    ("com.squareup.okio", "okio-jvm", "3.17.0", "a12d684ec0df9541b3869ae60a4a5257fd3613df"),
    ("io.github.microutils", "kotlin-logging-jvm", "3.0.5", "82f2256aeedccfd9c27ea585274a50bf06517383"),
    ("io.netty", "netty-buffer", "4.2.17.Final", "daba397ff4ce7b22f6ac1e1f419e6e7754c135be"),
    ("io.netty", "netty-codec-base", "4.2.17.Final", "7034de26b574322f365c790b9d6eb0634edab854"),
    ("io.netty", "netty-codec-compression", "4.2.17.Final", "ac6829387c962174e2efbcc94e833c9524ca1459"),
    ("io.netty", "netty-codec-http", "4.2.17.Final", "67610763a8f351161a9bad705a83e9a96a49e92f"),
    ("io.netty", "netty-common", "4.2.17.Final", "57fa9e9af0bf70530e2fe1c8c8d6138f9167cf7a"),
    ("io.netty", "netty-handler", "4.2.17.Final", "ed53dae90d09306b42bc886fa292510abdf5c5dc"),
    ("io.netty", "netty-resolver", "4.2.17.Final", "6cba9d93bb06297cef0b7ac34e3873b6a25b4e3b"),
    ("io.netty", "netty-transport-native-unix-common", "4.2.17.Final",
     "c404f2366b51136d4a2fde678eec95be6d10ca16"),
    ("io.netty", "netty-transport", "4.2.17.Final", "34335dc106caa0aefc242900d38ade65c8de64f4"),
    ("net.minidev", "accessors-smart", "2.6.0", "2d96f1d9b6ab7f13261aa81b15703574185747a0"),
    ("net.minidev", "json-smart", "2.6.0", "5f858a43a325a8673da6869ab2bc787a1bcb2244"),
    ("org.bouncycastle", "bcpkix-jdk18on", "1.85", "b33d047adc6801a1cfc8ffe1634b23b306a670c1"),
    ("org.bouncycastle", "bcprov-jdk18on", "1.85", "2320b854dffe134687f7266bb22021b779e576d3"),
    ("org.bouncycastle", "bcutil-jdk18on", "1.85", "c41082d6f61628919b675970563f5615e4427c9f"),
    ("org.freemarker", "freemarker", "2.3.34", "c2fa47a1c3b6dcdfca90e952e51211967a4baa54"),
    ("org.jetbrains.kotlin", "kotlin-reflect", "2.2.21", "17bc47f5dfe27c2351538e711f0afe377b0de6b2"),
    ("org.jetbrains.kotlin", "kotlin-stdlib", "2.2.21", "fa374a986e128314c3db00a20aae55f72a258511"),
    ("org.jetbrains", "annotations", "13.0", "919f0dfe192fb4e063e7dacadee7f8bb9a2672a9"),
    ("org.ow2.asm", "asm", "9.7.1", "f0ed132a49244b042cd0e15702ab9f2ce3cc8436"),
    ("org.slf4j", "slf4j-api", "2.0.3", "deef7fc81f00bd5e6205bb097be1040b4094f007"),
    ("tools.jackson.core", "jackson-core", "3.2.1", "5bff2a525073cff8a8206751f6f6bc4650b81b94"),
    ("tools.jackson.core", "jackson-databind", "3.2.1", "363dc46ceb44a97cba68cb0e9da4a3cb5bf723d4"),
    ("tools.jackson.module", "jackson-module-kotlin", "3.2.1", "05736cce26dbd34c33ac0b1af4fd66928336d87d"),
)  # fmt: skip


def jar_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "floe" / "jars"


def fetch_jar(group: str, name: str, version: str, sha1: str, cache: Path) -> Path:
    """The jar from the cache, downloaded from Maven Central and checked against its pinned SHA-1 first."""
    target = cache / f"{name}-{version}.jar"
    if target.exists() and hashlib.sha1(target.read_bytes()).hexdigest() == sha1:
        return target
    url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{name}/{version}/{name}-{version}.jar"
    with urllib.request.urlopen(url, timeout=120) as response:
        data: bytes = response.read()
    actual = hashlib.sha1(data).hexdigest()
    if actual != sha1:
        raise RuntimeError(f"SHA-1 mismatch for {url}: expected {sha1}, got {actual}")
    cache.mkdir(parents=True, exist_ok=True)
    # Write then rename: an interrupted download (or a parallel one) never leaves a truncated jar.
    partial = cache / f".{name}-{version}.{uuid.uuid4().hex}.part"
    partial.write_bytes(data)
    partial.replace(target)
    return target


def classpath() -> list[Path]:
    cache = jar_cache_dir()
    return [fetch_jar(*artifact, cache) for artifact in ARTIFACTS]


def _claims(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "sub": "${client_id}",
        "aud": "${token_audience}",
        "floe_cluster": "${cluster}",
        "floe_role": "${role}",
        "realm_access": {"roles": ["${group}"]},
        "kafka": {"cluster_id": "${cluster}"},
        **extra,
    }


def _mappings() -> list[dict[str, Any]]:
    """First match wins; a template whose form parameter is absent stays literal (`${cluster}`)."""
    without_cluster = _claims({})
    del without_cluster["floe_cluster"], without_cluster["kafka"]
    return [
        {"requestParam": "expired", "match": "*", "claims": _claims({"exp": 1_700_000_000})},
        {"requestParam": "not_before", "match": "*", "claims": _claims({"nbf": 4_000_000_000})},
        {"requestParam": "cluster", "match": "*", "claims": _claims({})},
        {"requestParam": "client_id", "match": "*", "claims": without_cluster},
    ]


class MockOAuth2Server:
    """mock-oauth2-server in a JVM on 127.0.0.1; restartable on the same port (same issuer URLs).

    `signing_key` (a private JWK) fixes the issuer's key; without it each start generates a new
    `algorithm` key — a restart is then a key rotation."""

    def __init__(
        self,
        port: int | None = None,
        *,
        algorithm: str = "RS256",
        signing_key: dict[str, Any] | None = None,
        token_lifetime_seconds: int = 600,
    ) -> None:
        self.port = port or free_port()
        self.algorithm = algorithm
        self.signing_key = signing_key
        self.token_lifetime_seconds = token_lifetime_seconds
        self.root = Path(tempfile.mkdtemp(prefix="floe-oidc-"))
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/{ISSUER_ID}"

    @property
    def other_issuer(self) -> str:
        """Another issuer of the same server (own key, own `iss`): never configured in floe."""
        return f"{self.url}/{OTHER_ISSUER_ID}"

    def config(self) -> dict[str, Any]:
        key_provider: dict[str, Any] = {"algorithm": self.algorithm}
        if self.signing_key is not None:
            key_provider["initialKeys"] = json.dumps(self.signing_key)
        return {
            "interactiveLogin": False,
            "httpServer": "NettyWrapper",
            "tokenProvider": {"keyProvider": key_provider},
            "tokenCallbacks": [
                {
                    "issuerId": issuer,
                    "tokenExpiry": self.token_lifetime_seconds,
                    "requestMappings": _mappings(),
                }
                for issuer in (ISSUER_ID, OTHER_ISSUER_ID)
            ],
        }

    def start(self, timeout: float = 120) -> MockOAuth2Server:
        jars = classpath()
        env = {
            **os.environ,
            "SERVER_HOSTNAME": "127.0.0.1",
            "SERVER_PORT": str(self.port),
            "JSON_CONFIG": json.dumps(self.config()),
        }
        command = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts faster; the tests need a handful of tokens
            "-cp",
            os.pathsep.join(str(jar) for jar in jars),
            MAIN_CLASS,
        ]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until_answering(
            self.process,
            f"{self.issuer}/.well-known/openid-configuration",
            name="mock-oauth2-server",
            timeout=timeout,
            log_text=self.log_text,
        )
        # The issuers' keys are made on their first key-set request, which a JVM on a loaded machine
        # answered after floe's 5 s fetch timeout (floe then answers 503 until it retries): asked here.
        for issuer in (self.issuer, self.other_issuer):
            discovery = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=60).json()
            httpx.get(discovery["jwks_uri"], timeout=60).raise_for_status()
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def token(self, client_id: str = "floe-test-client", *, issuer: str | None = None, **params: str) -> str:
        """A client-credentials access token; `params` are form parameters the mappings turn into claims."""
        response = httpx.post(
            f"{issuer or self.issuer}/token",
            data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": "x", **params},
            timeout=30,
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    def jwks(self) -> dict[str, Any]:
        keys: dict[str, Any] = httpx.get(f"{self.issuer}/jwks", timeout=10).json()
        return keys

    def __enter__(self) -> MockOAuth2Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
