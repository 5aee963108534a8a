"""What the two POST routes (``/v1/solve``, ``/v1/plan``) document alike: the hand-parsed body and the
answers besides 200."""

from __future__ import annotations

from typing import Any

from ...models import ErrorBody, JobAccepted, ValidationErrorBody

POST_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": JobAccepted, "description": "Not done within wait_s: poll GET /v1/jobs/{job}."},
    401: {"model": ErrorBody, "description": "The service has a token and the request lacks it."},
    413: {"model": ErrorBody, "description": "Request body over the size cap."},
    422: {"model": ValidationErrorBody, "description": "Bad input, unknown or inapplicable method, or over a cap."},
    429: {"model": ErrorBody, "description": "Too many distinct solves and plans running or queued."},
    504: {"model": ErrorBody, "description": "The solver overran its hard wall-clock limit and was killed."},
}


def request_body(model: str) -> dict[str, Any]:
    """The route parses ``model`` from the bytes itself; its schema is added by the app
    (``components.schemas[model]``), so clients and fuzzers still see it."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}}}}
