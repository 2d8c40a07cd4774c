"""Payload encoding (contract §0): JSON text in storage, decoded values out.

Three rules beyond "a round trip through json": a payload nests at most
``MAX_PAYLOAD_DEPTH`` lists/objects deep and its JSON text is at most the store's
``max_payload_bytes`` (at most ``MAX_PAYLOAD_BYTES``) in UTF-8 (larger or deeper
ones are refused with ``PayloadError`` before anything is written; the core's
front ends encode through ``StoreContext.encode``, which passes the store's
bound), and reading a stored payload never raises: text that cannot be decoded
(written by something other than alkstore, or deeper than the limit) comes back
as an ``UndecodablePayload`` value, which the claim path dead-letters instead of
handing out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from .constants import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, MAX_RESULT_BYTES
from .errors import InvalidOptions, PayloadError, ResultError

_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=True
)

# The hot path: the C encoder behind ``_encoder``, built once instead of per call
# (JSONEncoder.encode rebuilds it every time) and without the circular-reference
# markers, which would be shared state across threads. It writes the same text for
# every value it accepts; whatever it refuses (a cycle included: it ends in a
# RecursionError) is encoded again by ``_encoder``, so errors stay exactly as before.
_fast_encode: Callable[[object, int], Any] | None = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _encoder.default, encode_basestring, None, ":", ",", False, False, False
    )
)

# The scanner behind json.loads, called directly: loads wraps it in two regex
# whitespace skips, and stored payloads are written without surrounding whitespace.
_decoder = json.JSONDecoder()
_scan_once: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
scan_stored = _scan_once
"""``json``'s scanner: ``(value, end)`` of the JSON value at an index of a text. Only
for a decoder that repeats ``decode_payload``'s fast path in line (``alkstore.rows``)
and hands every other text to ``decode_payload``."""

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


@dataclass(frozen=True, slots=True)
class UndecodablePayload:
    """What a stored payload reads as when its text cannot be decoded.

    Only text written around alkstore (raw SQL, an older release, corruption) can be
    undecodable. A claim never hands such a job out: it moves it to dead with
    ``last_error`` naming the reason; ``get_job`` shows it with this payload.

    Attributes:
        text: the stored text (for bytes that are not UTF-8, their ``repr``).
        reason: why it cannot be decoded.
    """

    text: str
    reason: str


def nesting_depth(text: str) -> int:
    """How deep lists and objects nest in the JSON ``text`` (``"1"``: 0, ``"[[]]"``: 2)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _may_be_too_deep(text: str) -> bool:
    # Nesting deeper than the limit needs more opening brackets than the limit: two
    # C-level counts clear nearly every payload without looking further.
    return text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH


def check_max_payload_bytes(value: object) -> int:
    """The engine option ``max_payload_bytes``: an int in [1, ``MAX_PAYLOAD_BYTES``].

    Engines call it while parsing their options, before anything opens.

    Raises:
        InvalidOptions: ``value`` is not an int, or is out of that range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAYLOAD_BYTES:
        raise InvalidOptions(
            f"max_payload_bytes must be an int in [1, {MAX_PAYLOAD_BYTES}] "
            f"(the contract's MAX_PAYLOAD_BYTES: a store may lower it, not raise it), "
            f"got {value!r}"
        )
    return value


def encode_payload(value: object, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """Serialize ``value`` or raise ``PayloadError`` before anything is written.

    ``max_bytes`` bounds the UTF-8 size of the JSON text (a store's own bound:
    ``StoreContext.encode``)."""
    text = _encode(value)
    if _may_be_too_deep(text) and nesting_depth(text) > MAX_PAYLOAD_DEPTH:
        raise _too_deep()
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise PayloadError(
                "payload contains a lone surrogate and cannot be stored as UTF-8"
            ) from exc
    if size > max_bytes:
        raise PayloadError(
            f"payload is {size} bytes of JSON text (UTF-8), over the bound of {max_bytes} bytes"
        )
    return text


def encode_result(value: object) -> str:
    """A job's result (contract 1.2 §17) as its stored text, under the payload's rules
    (JSON, at most ``MAX_PAYLOAD_DEPTH`` deep) and at most ``MAX_RESULT_BYTES`` in
    UTF-8; or ``ResultError`` (a ``PayloadError``) naming the rule, before anything
    is written."""
    try:
        return encode_payload(value, MAX_RESULT_BYTES)
    except PayloadError as exc:
        message = str(exc).replace("payload", "result", 1)
        raise ResultError(
            message.replace("the bound of", "the bound MAX_RESULT_BYTES =", 1)
        ) from None


def _too_deep() -> PayloadError:
    return PayloadError(
        f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels of lists and objects"
    )


def _encode(value: object) -> str:
    if _fast_encode is not None:
        try:
            return "".join(_fast_encode(value, 0))
        except Exception:
            pass  # encode again below: the checking encoder raises the expected error
    try:
        return _encoder.encode(value)
    except RecursionError as exc:
        # The encoders recurse once per level: a value deep enough to exhaust the
        # stack is refused as too deep, like one that merely exceeds the limit.
        if nests_deeper_than(value, MAX_PAYLOAD_DEPTH):
            raise _too_deep() from None
        raise PayloadError(f"payload is not JSON-serializable: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"payload is not JSON-serializable: {exc}") from exc


def nests_deeper_than(value: object, limit: int) -> bool:
    """Whether the lists/tuples and dicts of ``value`` nest more than ``limit`` deep,
    found level by level without recursion (so at any depth, from any stack)."""
    level = _containers([value])
    for _ in range(limit):
        children: list[object] = []
        for item in level:
            children.extend(item.values() if isinstance(item, dict) else item)
        level = _containers(children)
    return bool(level)


def _containers(items: list[object]) -> list[dict[Any, Any] | list[Any] | tuple[Any, ...]]:
    # One entry per object: a value that shares a child many times (``[x, x]``
    # nested again and again) costs its distinct containers per level, not its paths.
    return list({id(i): i for i in items if isinstance(i, (dict, list, tuple))}.values())


def decode_payload(text: str | bytes) -> Any:
    """Inverse of ``encode_payload``; never raises: text that is not a payload
    alkstore could have written comes back as ``UndecodablePayload``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return UndecodablePayload(repr(text), f"not UTF-8 text: {exc}")
    if _may_be_too_deep(text) and nesting_depth(text) > MAX_PAYLOAD_DEPTH:
        return UndecodablePayload(
            text, f"nested deeper than {MAX_PAYLOAD_DEPTH} levels of lists and objects"
        )
    try:
        value, end = _scan_once(text, 0)
        if end == len(text):
            return value
    except StopIteration:
        pass  # no value at index 0 (leading whitespace, or not JSON): json.loads decides
    except (ValueError, RecursionError) as exc:
        return UndecodablePayload(text, f"not valid JSON: {exc}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        return UndecodablePayload(text, f"not valid JSON: {exc}")


def is_undecodable(payload: object) -> bool:
    """Whether ``payload`` is an ``UndecodablePayload``."""
    return type(payload) is UndecodablePayload
