"""Free-port checks of the local launchers: a port whose last server stopped is free again at once."""

from __future__ import annotations

import socket

from devtools.ports import free_port, port_is_free


def test_a_listening_port_is_taken_and_its_time_wait_connections_do_not_count() -> None:
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    assert not port_is_free(port)
    # The server side closes first, so its end of the connection waits in TIME-WAIT (as after Ctrl-C).
    accepted.close()
    server.close()
    client.close()
    assert port_is_free(port)
