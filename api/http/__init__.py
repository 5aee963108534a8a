"""The HTTP layer: routes per resource (``routes/``), FastAPI dependencies (``deps``: the service
state, the body, the bearer token), the pure ASGI layers in front (``middleware``: size cap,
counts, cache-hit fast path; ``errors``: request ids and JSON 500s), and the page and offline docs.

Handlers are short: they turn the request into a service call (:mod:`pipesched.api.services`)
and the service's :class:`~pipesched.api.services.replies.Reply` into a response.
"""
