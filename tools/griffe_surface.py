"""A griffe extension for the docs site: what ``alkstore._surface`` does at import, statically.

A core method implementing a Protocol member carries no docstring in its source;
at import ``@implements(api.X)`` gives it the Protocol's, and
``@documented_as(api.X.m, note)`` gives a hand-written async member the
Protocol's with ``note``. mkdocstrings reads the source, so this extension does
the same there.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

_IMPLEMENTS = re.compile(r"^implements\((?P<protocols>.*)\)$")


class ImplementsDocstrings(griffe.Extension):
    """Fill the docstrings ``@implements`` fills at import (package ``alkstore`` only)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "alkstore":
            return
        api = pkg["api"]
        for module in pkg["core"].modules.values():
            for cls in module.classes.values():
                for decorator in cls.decorators:
                    match = _IMPLEMENTS.match(str(decorator.value))
                    if match is None:
                        continue
                    for name in match.group("protocols").split(","):
                        _inherit(cls, api[name.strip().removeprefix("api.")])
        for module in pkg["aio"].modules.values():
            for cls in module.classes.values():
                for function in cls.members.values():
                    if not function.is_alias:
                        _document_as(function, api)


def _inherit(cls: Any, protocol: Any) -> None:
    for name, declared in protocol.all_members.items():
        own = cls.members.get(name)
        if own is None or own.is_alias or own.docstring is not None:
            continue
        source = declared.final_target if declared.is_alias else declared
        if source.docstring is None:
            continue
        own.docstring = griffe.Docstring(
            source.docstring.value,
            parent=own,
            parser=source.docstring.parser,
            parser_options=source.docstring.parser_options,
        )


def _document_as(function: Any, api: Any) -> None:
    for decorator in getattr(function, "decorators", ()):
        call = ast.parse(str(decorator.value), mode="eval").body
        if not (
            isinstance(call, ast.Call)
            and ast.unparse(call.func) == "documented_as"
            and len(call.args) == 2
            and isinstance(call.args[1], ast.Constant)
        ):
            continue
        protocol, member = ast.unparse(call.args[0]).removeprefix("api.").split(".")
        declared = api[protocol].all_members[member]
        source = declared.final_target if declared.is_alias else declared
        if source.docstring is None:
            continue
        summary, sep, rest = source.docstring.value.partition("\n\n")
        note = call.args[1].value
        function.docstring = griffe.Docstring(
            f"{summary}\n\n{note}\n\n{rest}" if sep else f"{summary}\n\n{note}",
            parent=function,
            parser=source.docstring.parser,
            parser_options=source.docstring.parser_options,
        )
