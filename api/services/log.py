"""The service's logger and the current request's id (set by the HTTP layer for each request), so a
body that says "see the log under request id X" and the log line agree wherever they are written."""

from __future__ import annotations

import logging
from contextvars import ContextVar

log = logging.getLogger("pipesched.api")

#: The current request's id ("" outside a request).
REQUEST_ID: ContextVar[str] = ContextVar("pipesched_request_id", default="")
