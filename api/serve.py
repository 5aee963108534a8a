"""``pipesched serve`` start-up: check everything, bind, open the store, and only then say "serving".

Order matters to a person reading the terminal: a bad flag must not leave a cache database behind,
a port in use must not be preceded by "serving on ...", and ``--port 0`` must report the port the
kernel chose. So the arguments are checked first, the socket is bound here (uvicorn is handed the
bound socket), the store is opened (created) next, and the line is printed once uvicorn's start-up
(the lifespan) has finished.
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

from pydantic import ValidationError

from pipesched.solver.core.io import InputError, describe_validation_error

from .http.limits import limited_protocol
from .settings import Settings, mask_url, scrub

MAX_PORT = 65535


def port_number(text: str) -> int:
    """argparse type for ``--port``: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {MAX_PORT} (got {text!r})") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_PORT} (got {port})")
    return port


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {k: v for k, v in {"host": args.host, "port": args.port, "db": args.db, "token": args.token,
                                  "workers": args.workers}.items() if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as e:
        raise InputError(f"settings (flags or PIPESCHED_* variables): {describe_validation_error(e)}") from None
    if not 0 <= settings.port <= MAX_PORT:
        raise InputError(f"--port must be from 0 to {MAX_PORT} (got {settings.port})")
    return settings


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on (host, port), or one line saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise InputError(f"--host {host}: cannot resolve it ({e})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def check_store(db: str, table_prefix: str) -> None:
    """Open (and create) the store now: one line, not a traceback from inside uvicorn's start-up."""
    from .store import Store

    try:
        Store(db, table_prefix).close()
    except ModuleNotFoundError as e:
        hint = " pip install 'pipesched[postgres]'" if db.startswith("postgres") else ""
        raise InputError(f"--db {mask_url(db)}: the database driver {e.name!r} is not installed;{hint}") from None
    except Exception as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"--db {mask_url(db)}: cannot open the store: {scrub(reason, db)}") from None


def serve(args: argparse.Namespace, check_external: Any) -> int:
    import uvicorn

    settings = settings_from(args)
    if settings.workers == "external":
        check_external(settings.db)
    sock = bind(settings.host, settings.port)
    try:
        check_store(settings.db, settings.table_prefix)
        from .app import create_app

        config = uvicorn.Config(create_app(settings), log_level=args.log_level, access_log=False)
        config.load()
        config.http_protocol_class = limited_protocol(config.http_protocol_class, settings.header_timeout_s,
                                                      settings.max_connections)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        _AnnouncingServer(config, f"pipesched: serving on http://{shown}:{port} (store {mask_url(settings.db)})").run(
            sockets=[sock])
    finally:
        sock.close()
    return 0


class _AnnouncingServer:
    """uvicorn's server, printing one line once it is really up (lifespan done, socket listening)."""

    def __new__(cls, config: Any, line: str) -> Any:
        import uvicorn

        class Announcing(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:
                    print(line, flush=True)

        return Announcing(config)
