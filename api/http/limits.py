"""Connection limits under uvicorn: a bounded number of connections, and request heads that must
arrive in time. (Bodies that must arrive in time: :class:`~.middleware.Guard`.)

uvicorn keeps a connection whose request head never completes for as long as the client likes, and
accepts connections without bound (1,000 half-sent requests held 1,000 file descriptors). The
protocol class here wraps uvicorn's: a connection over ``max_connections`` is answered ``503`` with
``Retry-After`` and closed at once; one whose request head is not complete ``header_timeout_s``
after its first byte (or after connecting) is closed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: What an over-the-cap connection is told before it is closed.
_FULL = json.dumps({"detail": "too many connections to this service (max_connections); retry shortly",
                    "cap": "max_connections"}).encode()
_FULL_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
                  b"connection: close\r\ncontent-length: " + str(len(_FULL)).encode() + b"\r\n\r\n" + _FULL)


def limited_protocol(base: type[asyncio.Protocol], header_timeout_s: float, max_connections: int) -> type:
    """uvicorn's HTTP protocol class ``base`` with the two limits above."""

    class Limited(base):  # type: ignore[valid-type, misc]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(_FULL_RESPONSE)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self._between_requests():
                self._arm()
            super().data_received(data)
            if self._head_timer is not None and not self._between_requests():  # the head is complete
                self._head_timer.cancel()
                self._head_timer = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_overdue)

        def _head_overdue(self) -> None:
            self._head_timer = None
            if self._between_requests():  # no complete request head in time: let the descriptor go
                self.transport.close()

    Limited.__name__ = f"Limited{base.__name__}"
    return Limited
