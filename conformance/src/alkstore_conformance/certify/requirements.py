"""What the kit can tell about an engine before any test runs.

``notes`` names what an engine declares but the kit cannot check (a profile
without the hook its properties need), and a contract version the kit does not
certify; the plugin prints them in the run's header, each with the guide section
that states the requirement. ``provision_note`` is added to an error raised by
``provider.provision()``: the kit's only way to a store.
"""

from __future__ import annotations

import re

from alkstore import CONTRACT_VERSION, EngineProvider
from alkstore.engine import AsyncNativeProvider

from ..hooks import (
    DRIVER_WRAPPER_HOOK,
    NATIVE_CONNECTION_HOOK,
    SERVER_ENV,
    NativeConnectionFactoryProvider,
    conformance_server,
    has_driver_wrapper,
)
from .guide import ATTACH, CAPABILITIES, PROVIDER, PROVISION, see
from .manifest import Manifest

_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_DSN_PASSWORD = re.compile(r"(password\s*=\s*)\S+", re.IGNORECASE)


def masked(server: str) -> str:
    """``server`` with any password in it replaced by ``***`` (it is printed)."""
    return _DSN_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", server))


def notes(provider: EngineProvider, manifest: Manifest) -> list[str]:
    """What ``provider`` declares that the kit cannot check, and why."""
    found: list[str] = []
    if provider.contract_version != CONTRACT_VERSION:
        found.append(
            f"the engine implements contract {provider.contract_version!r}; this kit "
            f"checks contract {CONTRACT_VERSION!r} (alkstore.CONTRACT_VERSION), so "
            f"ENGINE-PROVIDER-SURFACE fails; {see(PROVIDER)}"
        )
    capabilities = provider.capabilities
    if capabilities.attach and not isinstance(provider, NativeConnectionFactoryProvider):
        attach_ids = ", ".join(p.id for p in manifest.values() if p.profile == "attach")
        found.append(
            f"the engine declares attach but has no {NATIVE_CONNECTION_HOOK}(spec) hook, "
            f"so the kit cannot open a connection to attach: {attach_ids} "
            f"not_applicable, attach unchecked; {see(ATTACH)}"
        )
    if capabilities.async_native and not isinstance(provider, AsyncNativeProvider):
        found.append(
            "the engine declares async_native but has no open_on_loop(url, loop, ...): "
            f"alkstore.aio runs its I/O on threads instead; {see(CAPABILITIES)}"
        )
    if not has_driver_wrapper(provider):
        found.append(
            f"the engine has no {DRIVER_WRAPPER_HOOK}(url, wrap, ...) hook: the properties "
            "that crash a process after each statement of an operation are "
            f"not_applicable; {see(PROVIDER)}"
        )
    return found


def provision_note() -> str:
    """Added to whatever ``provider.provision()`` raised."""
    server = conformance_server()
    this_run = f"is {masked(server)}" if server is not None else "is not set"
    return (
        "the kit gets every store from provider.provision(), which raised: it yields the "
        "EngineSpec(url, opts) of a fresh, empty, isolated store and removes the store "
        f"afterwards; a server engine finds its server through ${SERVER_ENV} "
        f"(alkstore-conformance run --server URL), which in this run {this_run}; "
        f"{see(PROVISION)}"
    )
