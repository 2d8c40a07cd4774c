"""Where the engine author's guide states each requirement the core checks.

An error that refuses an engine names the requirement and the section of
``docs/certify-your-engine.md`` that states it. The section titles live here,
once, so a test can check that every one is a heading of the guide (a renamed
section fails that test, not an engine author reading a stale message).
"""

from __future__ import annotations

from typing import Final

GUIDE: Final = "docs/certify-your-engine.md"

PROVIDER: Final = "Publish a provider"
DRIVER_SEAM: Final = "The driver seam"
DRIVER_METHODS: Final = "The driver's methods"
SQL_CONNECTION: Final = "The sql profile's connection"

SECTIONS: Final = (PROVIDER, DRIVER_SEAM, DRIVER_METHODS, SQL_CONNECTION)
"""Every section the core's messages name."""


def see(section: str) -> str:
    """``see docs/certify-your-engine.md, "<section>"``, for the end of a message."""
    return f'see {GUIDE}, "{section}"'
