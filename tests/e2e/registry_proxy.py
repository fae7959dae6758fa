"""A schema registry behind HTTP basic authentication, for tests (the `authenticated_registry` fixture of
tests/e2e/conftest.py).

Apicurio 2.x authenticates only through Keycloak (OIDC), so `BasicAuthProxy` puts a small reverse proxy
on 127.0.0.1 in front of it: it answers 401 unless a request carries the right `Authorization: Basic`,
and forwards everything else, as a registry with basic authentication does. Given an `ssl.SSLContext`
with a server certificate, it speaks HTTPS (a registry behind TLS and basic authentication).
"""

from __future__ import annotations

import base64
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from devtools.schema_registry import CCOMPAT_PATH

# The credentials `authenticated_registry` accepts (test_ingest.py hands them to `floe ingest` by name).
REGISTRY_USER = "floe-ingest"
REGISTRY_PASSWORD = "correct horse battery staple"
# Hop-by-hop headers a proxy does not forward (RFC 9110 section 7.6.1), and the ones httpx recomputes.
_NOT_FORWARDED = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}


class BasicAuthProxy:
    """`upstream` behind HTTP basic authentication, on 127.0.0.1; `requests` logs what reached it.

    Each entry of `requests` is (method, path with query, whether the credentials were accepted).
    """

    def __init__(
        self, upstream: str, username: str, password: str, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.requests: list[tuple[str, str, bool]] = []
        self._http = httpx.Client(timeout=60)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.scheme = "http" if tls is None else "https"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="registry-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API through the proxy."""
        return self.base_url + CCOMPAT_PATH

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                authorized = self.headers.get("Authorization") == proxy.expected
                proxy.requests.append((self.command, self.path, authorized))
                if not authorized:
                    self._answer(
                        401,
                        [
                            ("WWW-Authenticate", 'Basic realm="registry"'),
                            ("Content-Type", "application/json"),
                        ],
                        b'{"error_code": 401, "message": "Unauthorized"}',
                    )
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_FORWARDED}
                headers.pop("Authorization", None)
                answer = proxy._http.request(
                    self.command, proxy.upstream + self.path, headers=headers, content=body
                )
                forwarded = [
                    (k, v)
                    for k, v in answer.headers.items()
                    if k.lower() not in _NOT_FORWARDED and k.lower() != "content-encoding"
                ]
                self._answer(answer.status_code, forwarded, answer.content)

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

            def log_message(self, format: str, *args: object) -> None:
                pass  # `requests` is the log

        return Handler

    def start(self) -> BasicAuthProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()
