"""Which suite modules a run of some properties collects.

A run restricted to a few properties (``--property``) needs only the modules that
declare them: collecting all of the suite's modules for one property cost a kit run
half its CPU (the selftest makes a hundred such runs). A module declares a property
when its text names the id quoted, in its tests' marks or in a constant they are
marked with; the kit's tests check that this finds every module collection declares
each property in. A property no module names (a mark built some other way) makes the
run collect the whole suite, as a certification and a run of profiles always do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from .. import SUITE_PACKAGE

SUITE_DIR = Path(__file__).parents[1] / "suite"


@cache
def _module_texts() -> dict[str, str]:
    return {
        path.stem: path.read_text(encoding="utf-8") for path in sorted(SUITE_DIR.glob("test_*.py"))
    }


def modules_naming(property_id: str) -> list[str]:
    """The suite modules (by name) whose text names ``property_id`` quoted."""
    quoted = re.compile(rf"""["']{re.escape(property_id)}["']""")
    return [name for name, text in _module_texts().items() if quoted.search(text)]


def suite_targets(properties: Iterable[str]) -> list[str]:
    """What ``--pyargs`` collects for a run of ``properties``: the modules naming them,
    or the whole suite when there are none or one is named by no module."""
    modules: dict[str, None] = {}
    for property_id in properties:
        named = modules_naming(property_id)
        if not named:
            return [SUITE_PACKAGE]
        modules.update(dict.fromkeys(named))
    if not modules:
        return [SUITE_PACKAGE]
    return [f"{SUITE_PACKAGE}.{name}" for name in sorted(modules)]
