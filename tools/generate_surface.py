"""Generate the async surface and the kit's via-aio facade from ``alkstore/api.py``.

    python tools/generate_surface.py           write the generated modules
    python tools/generate_surface.py --check   exit 1 if a generated module is stale

The Protocols of ``contract/src/alkstore/api.py`` are the one source of every
public method's signature, defaults and docstring. This script reads them with
``ast`` (so defaults and annotations keep their source text: ``MAX_REDRIVE``,
not ``10000``) and writes two modules, checked in:

* ``contract/src/alkstore/aio/_generated.py``: each member as a coroutine of
  ``alkstore.aio`` (complete classes where nothing needs a hand, else base
  classes that the hand-written ones in ``alkstore/aio/`` extend);
* ``conformance/src/alkstore_conformance/helpers/via_aio_generated.py``: the kit's
  sync-looking facade over those coroutines (``--via aio``).

``SURFACE`` below says, member by member, how each goes async. The output is
emitted already formatted as ``ruff format`` leaves it, so ``--check`` needs no
formatter and is stable.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "contract/src/alkstore/api.py"
AIO_OUT = ROOT / "contract/src/alkstore/aio/_generated.py"
FACADE_OUT = ROOT / "conformance/src/alkstore_conformance/helpers/via_aio_generated.py"
LINE_LENGTH = 100


# -- how each member goes async -------------------------------------------------------
@dataclass(frozen=True)
class How:
    """How one Protocol member appears on the async surface and on the kit's facade.

    ``aio`` is one of: ``call`` (a plain call run off the loop: ``runner.call``),
    ``claim`` (a call whose claimed handles a cancellation gives back:
    ``runner.claim(..., handles=...)``), ``wait`` (a wait a ``StopToken`` ends:
    ``runner.wait``; with ``claim``: ``waiting=True``), ``factory`` (a sync method
    making a handle: no storage), ``property``, or ``hand`` (written by hand in
    ``alkstore/aio``). ``facade`` is ``await`` (one awaited call), ``factory``,
    ``property`` or ``hand`` (written by hand in the kit's ``via_aio.py``).
    """

    aio: str
    facade: str
    handles: str | None = None
    waiting: bool = False


CALL = How("call", "await")
PROPERTY = How("property", "property")
FACTORY = How("factory", "factory")
WAIT = How("wait", "await")
HAND = How("hand", "hand")
HAND_AWAITED = How("hand", "await")
"""Written by hand in alkstore.aio (a coroutine); the facade awaits it like any other."""


def claim(handles: str, *, waiting: bool = False) -> How:
    return How("claim", "await", handles=handles, waiting=waiting)


@dataclass(frozen=True)
class Target:
    """One Protocol and the classes that mirror it."""

    protocol: str
    aio: str
    facade: str
    members: dict[str, How]
    aio_complete: bool = True
    """Whether the generated aio class is the public one (else a base the hand-written
    class of that name extends)."""
    facade_complete: bool = True
    doc: str = ""
    sync_attr: str = "_runner"
    """Where the aio class's calls run: the store's ``Runner`` or a transaction's ``Lane``."""
    base: str | None = None
    """The Protocol this one extends (its mirror classes extend that one's)."""


SURFACE: tuple[Target, ...] = (
    Target(
        "JobHandle",
        "AsyncJobHandle",
        "AioJobHandle",
        {
            "job": PROPERTY,
            "id": PROPERTY,
            "payload": PROPERTY,
            "attempts": PROPERTY,
            "ack": CALL,
            "ack_and_claim": claim("ack_and_claim"),
            "heartbeat": CALL,
            "release": CALL,
            "snooze": CALL,
            "retry": CALL,
            "fail": CALL,
        },
        doc="A claimed job (``alkstore.api.JobHandle``); every operation is a coroutine.",
    ),
    Target(
        "QueueConsumer",
        "AsyncQueueConsumer",
        "AioQueueConsumer",
        {
            "name": PROPERTY,
            "enqueue": CALL,
            "enqueue_many": CALL,
            "claim": claim("one"),
            "claim_batch": claim("many"),
            "claim_wait": claim("one", waiting=True),
            "ack_batch": CALL,
            "cancel": CALL,
            "get_job": CALL,
            "dependencies": CALL,
            "sweep_expired": CALL,
            "stats": CALL,
            "jobs": CALL,
            "redrive": CALL,
            "purge_dead": CALL,
            "pause": CALL,
            "resume": CALL,
            "paused": CALL,
            "set_limits": CALL,
            "clear_limits": CALL,
            "limits": CALL,
        },
        doc="The async face of a queue or an outbox (``alkstore.api.QueueConsumer``).",
    ),
    Target(
        "Queue",
        "AsyncQueue",
        "AioQueue",
        {"opts": PROPERTY},
        doc="``store.queue(name, opts)`` of an ``AsyncStore``.",
        base="QueueConsumer",
    ),
    Target(
        "Outbox",
        "AsyncOutbox",
        "AioOutbox",
        {},
        doc="``store.outbox(name)`` of an ``AsyncStore``.",
        base="QueueConsumer",
    ),
    Target(
        "Lock",
        "AsyncLock",
        "AioLock",
        {"name": PROPERTY, "acquire": CALL, "renew": CALL, "release": CALL, "holder": CALL},
        doc="``store.lock(name)`` of an ``AsyncStore``.",
    ),
    Target(
        "Stream",
        "AsyncStream",
        "AioStream",
        {
            "name": PROPERTY,
            "append": CALL,
            "read": CALL,
            "commit": CALL,
            "offset": CALL,
            "wait": WAIT,
            "trim_to": CALL,
        },
        aio_complete=False,
    ),
    Target(
        "Subscription",
        "AsyncSubscription",
        "AioSubscription",
        {
            "channel": PROPERTY,
            "get": HAND,
            "__iter__": HAND,
            "close": CALL,
            "__enter__": HAND,
            "__exit__": HAND,
        },
        aio_complete=False,
        facade_complete=False,
    ),
    Target(
        "WakeWatcher",
        "AsyncWakeWatcher",
        "AioWakeWatcher",
        {
            "queues": PROPERTY,
            "wait": WAIT,
            "close": CALL,
            "__enter__": HAND,
            "__exit__": HAND,
        },
        aio_complete=False,
        facade_complete=False,
    ),
    Target(
        "Transaction",
        "AsyncTransaction",
        "AioTransaction",
        {
            "connection": How("hand", "property"),
            "execute": HAND,
            "enqueue": HAND,
            "ack": HAND,
            "ack_all": HAND,
            "retry": HAND,
            "fail": HAND,
            "retry_all": HAND,
            "fail_all": HAND,
            "outbox_enqueue": CALL,
            "get_job_tx": CALL,
            "stream_append": CALL,
            "notify": CALL,
        },
        aio_complete=False,
        facade_complete=False,
        sync_attr="_lane",
    ),
    Target(
        "Store",
        "AsyncStore",
        "AioStore",
        {
            "clock": PROPERTY,
            "queue": FACTORY,
            "outbox": FACTORY,
            "lock": FACTORY,
            "claim_wait_any": HAND,
            "transaction": HAND,
            "attach": HAND,
            "schedule": CALL,
            "declare_schedule": CALL,
            "renew_schedules": CALL,
            "register_worker": CALL,
            "heartbeat_worker": CALL,
            "deregister_worker": CALL,
            "workers": CALL,
            "throughput": CALL,
            "unschedule": CALL,
            "get_schedule": CALL,
            "schedules": CALL,
            "tick_schedules": CALL,
            "run_schedules": WAIT,
            # Hand-written in alkstore.aio because it returns a hand-written class
            # (importing it here would be a cycle): a one-liner.
            "stream": How("hand", "factory"),
            "notify": CALL,
            "stats": CALL,
            "subscribe": HAND,
            "wake_watcher": HAND,
            "close": HAND_AWAITED,
            "closed": PROPERTY,
            "__enter__": HAND,
            "__exit__": HAND,
        },
        aio_complete=False,
        facade_complete=False,
    ),
)

AIO_NAMES = {
    "JobHandle": "AsyncJobHandle",
    "AckAndClaim": "AsyncAckAndClaim",
    "Queue": "AsyncQueue",
    "Outbox": "AsyncOutbox",
    "Lock": "AsyncLock",
    "Stream": "AsyncStream",
    "Subscription": "AsyncSubscription",
    "WakeWatcher": "AsyncWakeWatcher",
    "Transaction": "AsyncTransaction",
}
"""How a sync return type reads on the async surface."""

FACADE_NAMES = {
    "Queue": "AioQueue",
    "Outbox": "AioOutbox",
    "Lock": "AioLock",
    "Stream": "AioStream",
    "Subscription": "AioSubscription",
    "WakeWatcher": "AioWakeWatcher",
}
"""How a sync return type reads on the facade. ``JobHandle`` stays as is inside a
list (a ``list[AioJobHandle]`` is no ``list[JobHandle]``); alone it is mapped below."""

NOTES = {
    "call": "Async: awaited; the call runs on the store's threads, never on the event loop.",
    "claim": (
        "Async: awaited, run off the loop; if the awaiting task is cancelled, the jobs the "
        "call claimed are given back (``release``)."
    ),
    "claim_wait": (
        "Async: awaited, on a waiting thread; cancelling the awaiting task ends the wait "
        "(no waiter is left registered) and gives back a job claimed meanwhile."
    ),
    "ack_and_claim": (
        "Async: awaited, run off the loop; if the awaiting task is cancelled, the jobs the "
        "call claimed are given back (``release``) and its ack stands."
    ),
    "wait": (
        "Async: awaited, on a waiting thread; cancelling the awaiting task ends the wait "
        "(its ``StopToken`` is set: no waiter is left registered)."
    ),
    "factory": "Async: a plain method, not a coroutine: making a handle touches no storage.",
}


def note_for(how: How) -> str | None:
    """The line a generated aio member's docstring adds to its Protocol's."""
    if how.aio == "claim":
        if how.handles == "ack_and_claim":
            return NOTES["ack_and_claim"]
        return NOTES["claim_wait" if how.waiting else "claim"]
    return NOTES.get(how.aio)


def facade_note(target: Target, name: str) -> str:
    return f"Via aio: ``{target.aio}.{name}`` through the test's event loop."


# -- reading api.py -------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "positional", "keyword" or "varargs"
    annotation: str | None
    default: str | None

    def render(self) -> str:
        text = ("*" if self.kind == "varargs" else "") + self.name
        if self.annotation is not None:
            text += f": {self.annotation}"
            if self.default is not None:
                text += f" = {self.default}"
        elif self.default is not None:
            text += f"={self.default}"
        return text


@dataclass(frozen=True)
class Member:
    name: str
    params: tuple[Param, ...]  # without self
    returns: str
    docstring: str  # the literal's source text, quotes included
    is_property: bool


@dataclass(frozen=True)
class Protocol:
    name: str
    members: dict[str, Member]


def read_api(source: str) -> dict[str, Protocol]:
    tree = ast.parse(source)
    protocols: dict[str, Protocol] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {
                item.name: _member(source, item)
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            }
            protocols[node.name] = Protocol(node.name, members)
    return protocols


def _segment(source: str, node: ast.AST | None) -> str | None:
    if node is None:
        return None
    text = ast.get_source_segment(source, node)
    assert text is not None
    return " ".join(text.split()) if "\n" in text else text


def _member(source: str, node: ast.FunctionDef) -> Member:
    args = node.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    params = [
        Param(a.arg, "positional", _segment(source, a.annotation), _segment(source, d))
        for a, d in zip(positional, defaults, strict=True)
    ][1:]  # self
    if args.vararg is not None:
        params.append(
            Param(args.vararg.arg, "varargs", _segment(source, args.vararg.annotation), None)
        )
    params += [
        Param(a.arg, "keyword", _segment(source, a.annotation), _segment(source, d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    doc_node = node.body[0]
    assert isinstance(doc_node, ast.Expr), f"{node.name} has no docstring"
    docstring = ast.get_source_segment(source, doc_node, padded=False)
    assert docstring is not None
    returns = _segment(source, node.returns)
    assert returns is not None, f"{node.name} has no return annotation"
    is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
    return Member(node.name, tuple(params), returns, docstring, is_property)


def api_imports(source: str) -> dict[str, str]:
    """Each name api.py imports, mapped to its absolute module."""
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            module = ("alkstore." if node.level else "") + node.module
            for alias in node.names:
                names[alias.asname or alias.name] = module
    return names


# -- emitting code --------------------------------------------------------------------
def map_names(annotation: str, names: dict[str, str]) -> str:
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(0), m.group(0)), annotation)


def with_note(docstring: str, note: str | None) -> str:
    """``docstring`` (a literal at method indentation) with ``note`` as its second paragraph."""
    if note is None:
        return docstring
    indent = " " * 8
    body = docstring[3:-3]
    wrapped = _wrap(note, LINE_LENGTH - len(indent))
    note_text = "\n".join(indent + line for line in wrapped)
    if "\n\n" in body:
        summary, rest = body.split("\n\n", 1)
        return f'"""{summary}\n\n{note_text}\n\n{rest}"""'
    return f'"""{body}\n\n{note_text}\n{indent}"""'


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return lines


def signature(member: Member, returns: str, *, is_async: bool) -> list[str]:
    prefix = "    async def " if is_async else "    def "
    params = ["self", *(p.render() for p in member.params)]
    if any(p.kind == "keyword" for p in member.params) and not any(
        p.kind == "varargs" for p in member.params
    ):
        first_kw = next(i for i, p in enumerate(member.params) if p.kind == "keyword")
        params.insert(first_kw + 1, "*")
    one_line = f"{prefix}{member.name}({', '.join(params)}) -> {returns}:"
    if len(one_line) <= LINE_LENGTH:
        return [one_line]
    return [
        f"{prefix}{member.name}(",
        *(f"        {p}," for p in params),
        f"    ) -> {returns}:",
    ]


def call_args(member: Member) -> list[str]:
    return [p.name if p.kind == "positional" else f"{p.name}={p.name}" for p in member.params]


def statement(head: str, args: list[str], tail: str = ")") -> list[str]:
    """``head`` + ``args`` joined + ``tail`` at 8 spaces, exploded (one argument a line,
    magic trailing comma) when it does not fit."""
    one_line = f"        {head}{', '.join(args)}{tail}"
    if len(one_line) <= LINE_LENGTH:
        return [one_line]
    if tail == "))":  # a call inside a call: ruff splits the outer one first
        outer, inner = head[:-1].rsplit("(", 1)
        inner_line = f"            {inner}({', '.join(args)})"
        if len(inner_line) <= LINE_LENGTH:
            return [f"        {outer}(", inner_line, "        )"]
        return [
            f"        {outer}(",
            f"            {inner}(",
            *(f"                {a}," for a in args),
            "            )",
            "        )",
        ]
    return [f"        {head}", *(f"            {a}," for a in args), f"        {tail}"]


def aio_body(target: Target, member: Member, how: How) -> list[str]:
    runner = f"self.{target.sync_attr}"
    fn = f"self.sync.{member.name}"
    args = call_args(member)
    if how.aio == "property":
        return [f"        return self.sync.{member.name}"]
    if how.aio == "factory":
        cls = AIO_NAMES[member.returns]
        return statement(f"return {cls}({runner}, {fn}(", args, "))")
    lines: list[str] = []
    stop_kwargs: list[str] = []
    if how.aio == "wait" or how.waiting:
        stop = next(p for p in member.params if p.name == "stop")
        if stop.default is None:  # a required token ends the wait itself
            stop_kwargs = ["stop=stop"]
        else:
            lines.append("        token = stop if stop is not None else StopToken()")
            args = ["token" if a == "stop" else a for a in args]
            stop_kwargs = ["stop=token"]
    if how.aio == "claim":
        kwargs = [f"handles={how.handles}", *stop_kwargs]
        if how.waiting:
            kwargs.append("waiting=True")
        call = ("await " + runner + ".claim(", [fn, *args, *kwargs])
    elif how.aio == "wait":
        call = ("await " + runner + ".wait(", [fn, *args, *stop_kwargs])
    elif any(p.kind == "keyword" for p in member.params):
        call = ("await " + runner + ".call(", [f"lambda: {fn}({', '.join(args)})"])
    else:
        call = ("await " + runner + ".call(", [fn, *args])
    head, call_list = call
    returns = member.returns
    if returns == "None":
        return lines + statement(head, call_list)
    if returns == "JobHandle | None":
        return [
            *lines,
            *statement("handle = " + head, call_list),
            f"        return None if handle is None else AsyncJobHandle({runner}, handle)",
        ]
    if returns == "list[JobHandle]":
        return [
            *lines,
            *statement("handles = " + head, call_list),
            f"        return [AsyncJobHandle({runner}, handle) for handle in handles]",
        ]
    if returns == "AckAndClaim":
        return [
            *lines,
            *statement("done = " + head, call_list),
            f"        claimed = [AsyncJobHandle({runner}, handle) for handle in done.claimed]",
            "        return AsyncAckAndClaim(done.acked, claimed)",
        ]
    return lines + statement("return " + head, call_list)


def facade_body(target: Target, member: Member, how: How) -> list[str]:
    args = call_args(member)
    if how.facade == "property":
        return [f"        return self.aio.{member.name}"]
    if how.facade == "factory":
        cls = FACADE_NAMES[member.returns]
        return statement(f"return {cls}(self._loop, self.aio.{member.name}(", args, "))")
    head = f"self._loop.run(self.aio.{member.name}("
    returns = member.returns
    if returns == "None":
        return statement(head, args, "))")
    if returns == "JobHandle | None":
        return [
            *statement("handle = " + head, args, "))"),
            "        return None if handle is None else AioJobHandle(self._loop, handle)",
        ]
    if returns == "list[JobHandle]":
        return [
            *statement("handles = " + head, args, "))"),
            "        return [AioJobHandle(self._loop, handle) for handle in handles]",
        ]
    if returns == "AckAndClaim":
        return [
            *statement("done = " + head, args, "))"),
            "        claimed: list[JobHandle] = "
            "[AioJobHandle(self._loop, h) for h in done.claimed]",
            "        return AckAndClaim(done.acked, claimed)",
        ]
    return statement("return " + head, args, "))")


def facade_returns(member: Member) -> str:
    if member.returns == "JobHandle | None":
        return "AioJobHandle | None"
    return map_names(member.returns, FACADE_NAMES)


def _class_name(target: Target, side: str) -> str:
    if side == "aio":
        return target.aio if target.aio_complete else f"{target.aio}Base"
    return target.facade if target.facade_complete else f"{target.facade}Base"


def render_class(target: Target, protocol: Protocol, side: str, by_name: dict[str, Target]) -> str:
    name = _class_name(target, side)
    complete = target.aio_complete if side == "aio" else target.facade_complete
    base = by_name[target.base] if target.base else None
    bases = f"({_class_name(base, side)})" if base else ""
    lines = [f"class {name}{bases}:"]
    wrapped = "sync" if side == "aio" else "aio"
    holder, holder_type = (
        (target.sync_attr, "Runner" if target.sync_attr == "_runner" else "Lane")
        if side == "aio"
        else ("_loop", "LoopThread")
    )
    wrapped_type = target.protocol if side == "aio" else target.aio
    if complete:
        doc = (
            target.doc
            if side == "aio"
            else f"``alkstore.{target.protocol}`` over an ``{target.aio}``."
        )
        lines.append(f'    """{doc}"""')
        lines.append("")
        if base:
            lines += [f"    {wrapped}: {wrapped_type}", ""]
        lines.append(
            f"    def __init__(self, {holder.lstrip('_')}: {holder_type}, "
            f"{wrapped}: {wrapped_type}) -> None:"
        )
        if base:
            lines.append(f"        super().__init__({holder.lstrip('_')}, {wrapped})")
        else:
            lines.append(f"        self.{holder} = {holder.lstrip('_')}")
        lines.append(f"        self.{wrapped} = {wrapped}")
        if not base:
            what = "sync" if side == "aio" else "async"
            lines.append(f'        """The {what} object every call goes to."""')
    else:
        lines.append(
            f'    """The generated members of ``{target.aio if side == "aio" else target.facade}``'
            ' (it sets the attributes below)."""'
        )
        lines += ["", f"    {holder}: {holder_type}", f"    {wrapped}: {wrapped_type}"]
    for member_name, how in target.members.items():
        member = protocol.members[member_name]
        kind = how.aio if side == "aio" else how.facade
        if kind == "hand":
            continue
        lines.append("")
        if kind == "property":
            lines.append("    @property")
        if side == "aio":
            returns = map_names(member.returns, AIO_NAMES)
            is_async = kind not in ("property", "factory")
            note = note_for(how)
            body = aio_body(target, member, how)
        else:
            returns = facade_returns(member)
            is_async = False
            note = None if kind == "property" else facade_note(target, member_name)
            body = facade_body(target, member, how)
        lines += signature(member, returns, is_async=is_async)
        lines.append("        " + with_note(member.docstring, note))
        lines += body
    if complete and not base:
        lines += [
            "",
            "    def __repr__(self) -> str:",
            f'        return f"<{{type(self).__name__}} {{self.{wrapped}!r}}>"',
        ]
    return "\n".join(lines)


AIO_HEADER = '''"""GENERATED by ``tools/generate_surface.py`` from ``alkstore/api.py``; do not edit.

Each member of the Protocols as ``alkstore.aio`` presents it: the Protocol's
signature, defaults and docstring, and one call of the sync member run off the
event loop (``alkstore.aio.runner``). Classes that need a hand (a few members
with logic of their own) are generated as bases the classes of ``alkstore.aio``
extend. Edit ``api.py`` or the generator's table, then run
``python tools/generate_surface.py``.
"""

from __future__ import annotations
'''

FACADE_HEADER = '''"""GENERATED by ``tools/generate_surface.py`` from ``api.py``; do not edit.

The kit's sync-looking facade over ``alkstore.aio`` (``--via aio``): each
member of the Protocols, with the Protocol's signature, defaults and docstring,
as one awaited call of its ``alkstore.aio`` twin on the test's event loop.
``via_aio.py`` holds the few members written by hand. Edit ``api.py`` or the
generator's table, then run ``python tools/generate_surface.py``.
"""

from __future__ import annotations
'''


def _used(text: str, candidates: dict[str, str]) -> dict[str, list[str]]:
    """The imports ``text`` needs, by module, among ``candidates`` (name -> module)."""
    used: dict[str, list[str]] = {}
    words = set(re.findall(r"\b[A-Za-z_]\w*\b", text))
    for name, module in candidates.items():
        if name in words:
            used.setdefault(module, []).append(name)
    return used


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's isort order within one ``from`` import: CONSTANTS, Classes, functions.
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _module_key(module: str) -> tuple[int, str]:
    # Sections apart, ruff sorts by module; relative ones furthest first (``..`` before ``.``).
    dots = len(module) - len(module.lstrip("."))
    return (-dots, module.lstrip("."))


def import_block(used: dict[str, list[str]], indent: str = "") -> list[str]:
    """``from`` imports grouped as ruff's isort does: stdlib, first party, relative."""
    stdlib = [m for m in used if m.split(".")[0] in sys.stdlib_module_names]
    relative = [m for m in used if m.startswith(".")]
    first = [m for m in used if m not in stdlib and m not in relative]
    lines: list[str] = []
    for group in (stdlib, first, relative):
        if not group:
            continue
        if lines:
            lines.append("")
        for module in sorted(group, key=_module_key):
            names = sorted(set(used[module]), key=_isort_key)
            one_line = f"{indent}from {module} import {', '.join(names)}"
            if len(one_line) <= LINE_LENGTH:
                lines.append(one_line)
            else:
                lines += [
                    f"{indent}from {module} import (",
                    *(f"{indent}    {n}," for n in names),
                    f"{indent})",
                ]
    return lines


ACK_AND_CLAIM = '''class AsyncAckAndClaim(NamedTuple):
    """What ``AsyncJobHandle.ack_and_claim`` did (``alkstore.AckAndClaim``)."""

    acked: bool
    claimed: list[AsyncJobHandle]'''


def generate(source: str) -> tuple[str, str]:
    """The two generated modules' text for ``source`` (the text of api.py)."""
    protocols = read_api(source)
    imported = api_imports(source)
    by_name = {t.protocol: t for t in SURFACE}

    classes = [render_class(t, protocols[t.protocol], "aio", by_name) for t in SURFACE]
    body = "\n\n\n".join([classes[0], ACK_AND_CLAIM, *classes[1:]])
    candidates = {
        name: (".." + module.removeprefix("alkstore.")) if module.startswith("alkstore") else module
        for name, module in imported.items()
    }
    candidates.update(dict.fromkeys(by_name, "..api"))
    candidates.update(dict.fromkeys(("Runner", "Lane"), ".runner"))
    candidates.update(dict.fromkeys(re.findall(r"handles=(\w+)", body), ".runner"))
    candidates["NamedTuple"] = "typing"
    aio_text = "\n".join([AIO_HEADER, *import_block(_used(body, candidates)), "", "", body, ""])

    classes = [render_class(t, protocols[t.protocol], "facade", by_name) for t in SURFACE]
    body = "\n\n\n".join(classes)
    candidates = dict(imported)
    candidates.update(dict.fromkeys(("AckAndClaim", "JobHandle"), "alkstore"))
    candidates.update({t.aio: "alkstore.aio" for t in SURFACE})
    used = _used(body, candidates)
    used.setdefault("typing", []).append("TYPE_CHECKING")  # for LoopThread, below
    facade_text = "\n".join(
        [
            FACADE_HEADER,
            *import_block(used),
            "",
            "if TYPE_CHECKING:",
            "    from .via_aio import LoopThread",
            "",
            "",
            body,
            "",
        ]
    )
    return aio_text, facade_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = parser.parse_args(argv)
    aio_text, facade_text = generate(API.read_text())
    stale = [
        path
        for path, text in ((AIO_OUT, aio_text), (FACADE_OUT, facade_text))
        if not path.exists() or path.read_text() != text
    ]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run python tools/generate_surface.py)")
        return 1 if stale else 0
    for path, text in ((AIO_OUT, aio_text), (FACADE_OUT, facade_text)):
        if path in stale:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
