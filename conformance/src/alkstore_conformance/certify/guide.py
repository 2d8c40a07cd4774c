"""Where the engine author's guide states each requirement the kit checks.

The kit's messages about an engine that does not meet a requirement name it and
the section of ``docs/certify-your-engine.md`` that states it; the section
titles live here, once, so the kit's tests check each is a heading of the guide.
"""

from __future__ import annotations

from typing import Final

GUIDE: Final = "docs/certify-your-engine.md"

PROVIDER: Final = "Publish a provider"
CAPABILITIES: Final = "Capabilities are data"
PROVISION: Final = "Provisioning and servers"
SQL_CONNECTION: Final = "The sql profile's connection"
ATTACH: Final = "Attach"

SECTIONS: Final = (PROVIDER, CAPABILITIES, PROVISION, SQL_CONNECTION, ATTACH)
"""Every section the kit's messages name."""


def see(section: str) -> str:
    """``see docs/certify-your-engine.md, "<section>"``, for the end of a message."""
    return f'see {GUIDE}, "{section}"'
