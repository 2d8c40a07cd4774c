"""Who may look and who may act (stdlib only): access levels, the standalone
credentials, CSRF tokens, and a store URL with its secrets taken out."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Callable, Mapping
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

Access = Literal["read", "write"]
"""What a request may do: ``"read"`` (look) or ``"write"`` (look and act)."""

HIDDEN = "***"
"""What a secret of the store URL is shown as."""

SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pass", "pwd", "token", "secret", "key"})
"""Query parameters of a store URL that hold secrets (libpq's ``password`` among them)."""

CSRF_COOKIE = "alkstore_csrf"
CSRF_FIELD = "csrf"


def redact_url(url: str) -> str:
    """``url`` with its password and any secret query parameter shown as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return HIDDEN  # a URL that does not parse may hold anything
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{HIDDEN}@{host}" if colon else f"{user}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, HIDDEN if k.lower() in SECRET_QUERY_KEYS else v) for k, v in pairs], safe="*/"
        )
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing hidden: as given (urlunsplit would drop an empty "//")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets ``redact_url`` hides, so an error message quoting them can hide them too."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found = [parts.password] if parts.password else []
    found += [
        v
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() in SECRET_QUERY_KEYS
    ]
    return tuple(secret for secret in found if secret)


def scrub(text: str, hidden: tuple[str, ...]) -> str:
    """``text`` with every one of ``hidden`` replaced by ``***``."""
    for secret in sorted(hidden, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (``localhost`` counts)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Credentials:
    """The standalone dashboard's authoriser: HTTP Basic ``user``/``password``, or an
    ``Authorization: Bearer <token>`` header; each grants ``access``.

    Compared in constant time. Its ``challenge`` is the ``WWW-Authenticate`` header
    a refused request gets, so a browser asks for the user and password.
    """

    challenge = 'Basic realm="alkstore dashboard", charset="UTF-8"'

    def __init__(
        self,
        *,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        access: Access = "write",
    ) -> None:
        if (user is None) != (password is None):
            raise ValueError("a user needs a password and a password a user")
        if password == "" or token == "":
            raise ValueError("an empty password or token would let anyone in")
        if user is None and token is None:
            raise ValueError("credentials need a user and password, or a token")
        self._basic = None if user is None else f"{user}:{password}".encode()
        self._token = None if token is None else token.encode()
        self.access: Access = access

    def __call__(self, headers: Mapping[str, str]) -> Access | None:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        value = value.strip()
        if scheme.lower() == "basic" and self._basic is not None:
            try:
                given = base64.b64decode(value, validate=True)
            except ValueError:
                return None
            return self.access if hmac.compare_digest(given, self._basic) else None
        if scheme.lower() == "bearer" and self._token is not None:
            return self.access if hmac.compare_digest(value.encode(), self._token) else None
        return None


HeaderAuthorizer = Callable[[Mapping[str, str]], "Access | None"]


class Csrf:
    """Double-submit CSRF tokens: a random cookie per browser, and in every form the
    cookie's HMAC under this app's secret; a POST must carry both, matching."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    @staticmethod
    def new_cookie() -> str:
        return secrets.token_urlsafe(32)

    def token(self, cookie: str) -> str:
        return hmac.new(self._secret, cookie.encode(), hashlib.sha256).hexdigest()

    def valid(self, cookie: str | None, token: str | None) -> bool:
        if not cookie or not token:
            return False
        return hmac.compare_digest(self.token(cookie), token)
