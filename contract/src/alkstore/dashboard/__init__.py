"""``alkstore.dashboard``: a web dashboard of a store, as an ASGI (Starlette) app.

Needs the ``dashboard`` extra (``pip install 'alkstore[dashboard]'``: Starlette,
Jinja2, uvicorn); nothing else in ``alkstore`` imports this package. Mount it in
an app of your own under any path::

    from alkstore.dashboard import create_app

    def authorize(request):  # your session, your rules
        user = request.scope.get("user")
        return "write" if user and user.is_admin else None

    app.mount("/jobs", create_app(store, authorize=authorize, url=STORE_URL))

or run it alone with ``alkstore dashboard`` (docs/operations.md). Pages are
rendered on the server and escaped; actions are POSTs with a CSRF token; open
pages refresh their live part when the store changes (server-sent events).
"""

from __future__ import annotations

from .security import Access, Credentials, is_loopback, redact_url

try:
    from .app import Authorize, create_app
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        f"alkstore.dashboard needs the 'dashboard' extra ({exc.name} is missing): "
        "pip install 'alkstore[dashboard]'"
    ) from exc

__all__ = ["Access", "Authorize", "Credentials", "create_app", "is_loopback", "redact_url"]
