"""Clients that hold connections without finishing a request: a body that stalls gets 408 and its
connection closed within ``body_timeout_s``; a request head that stalls is closed after
``header_timeout_s``; connections over ``max_connections`` get 503 with Retry-After at once."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_servers import Server

LIMITS = {"PIPESCHED_BODY_TIMEOUT_S": "1", "PIPESCHED_HEADER_TIMEOUT_S": "1", "PIPESCHED_MAX_CONNECTIONS": "4"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    path: Path = tmp_path_factory.mktemp("limited")
    server = Server(f"sqlite:///{path / 'cache.db'}", env=LIMITS, log=path / "server.log").start()
    yield server
    server.stop()


def _connect(server: Server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)  # a hang fails the test
    return s


def _read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_a_stalled_body_gets_408_and_its_connection_closed(limited: Server) -> None:
    with _connect(limited) as s:
        s.sendall(b"POST /v1/solve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 1000\r\n\r\n{\"problem\": {")  # 13 of 1000 bytes, then silence
        answer = _read_all(s)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"body_timeout_s" in answer


def test_a_stalled_request_head_is_closed(limited: Server) -> None:
    with _connect(limited) as s:
        s.sendall(b"POST /v1/solve HTTP/1.1\r\nhost: x\r\n")  # the head never ends
        assert _read_all(s) == b""  # closed by the server


def test_connections_over_the_cap_get_503_with_retry_after(limited: Server) -> None:
    held = []
    try:
        for _ in range(4):  # four keep-alive connections, each answered, so the server counts them
            s = _connect(limited)
            s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
            held.append(s)
        with _connect(limited) as extra:  # answered at once, before it sends anything, and closed
            answer = _read_all(extra)
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer.lower(), answer
    finally:
        for s in held:
            s.close()
    assert limited.wait_healthy()  # once they are gone, the service answers again
