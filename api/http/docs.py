"""``/docs`` and ``/redoc`` that render without the internet (issue 13, item 7).

FastAPI's own docs pages load Swagger UI and ReDoc from a CDN, so on an air-gapped cluster they
stay blank. Here the pages are FastAPI's (``get_swagger_ui_html``, ``get_redoc_html``) pointed at
copies of the assets served by this app, as FastAPI's "self-hosting JavaScript and CSS for
docs" recipe describes. The assets come from the ``fastapi-offline`` package (a maintained wheel
that ships Swagger UI's bundle and CSS, ReDoc's standalone bundle and a favicon), so an upgrade is
a version bump in ``constraints.txt`` rather than files copied into this repository.

Nothing else on these pages may leave the host: Swagger UI's online validator badge is off
(``validatorUrl: null``) and ReDoc does not load Google Fonts.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the asset files are served; every URL on the docs pages starts here or at the app's own routes.
ASSETS_URL = "/docs-assets"
#: The asset files: ``swagger-ui-bundle.js``, ``swagger-ui.css``, ``redoc.standalone.js``, ``favicon.png``.
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))


def add_offline_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Mount the assets and add the two docs pages (create the app with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API docs",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(redoc_url, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
