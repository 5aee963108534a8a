"""``/docs`` and ``/redoc`` render on a machine without the internet (issue 13, item 7).

The pages must name no external host, every asset they reference must come from the service
itself, and Swagger UI must actually draw the operations in a browser that cannot resolve any
host but loopback.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest
from api_servers import Server
from browser import dump_dom

_URL_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")
_ANY_URL = re.compile(r"""(?:https?:)?//[a-z0-9.-]+""", re.IGNORECASE)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_page_names_no_external_host(server: Server, page: str) -> None:
    html = server.get(page).text
    assert _ANY_URL.findall(html) == [], f"{page} still points outside the service"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_of_the_docs_page_is_served_by_the_service(server: Server, page: str) -> None:
    html = server.get(page).text
    assets = _URL_ATTR.findall(html)
    assert any(a.endswith(".js") for a in assets), f"{page} loads no script: {assets}"
    for asset in assets:
        response = server.get(urljoin(page, asset))
        assert response.status_code == 200, asset
        assert len(response.content) > 1000, f"{asset} is only {len(response.content)} bytes"


def test_swagger_ui_renders_the_operations_offline(server: Server) -> None:
    dom = dump_dom(f"{server.url}/docs")
    for path in ("/v1/solve", "/v1/jobs/{job}", "/v1/schedules/{key}/gantt.svg"):
        assert f'data-path="{path}"' in dom, f"Swagger UI did not draw {path}"
    assert "opblock-summary-method" in dom


def test_redoc_renders_the_operations_offline(server: Server) -> None:
    dom = dump_dom(f"{server.url}/redoc")
    assert "/v1/solve" in dom and "api-content" in dom
