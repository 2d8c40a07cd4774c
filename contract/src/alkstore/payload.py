"""Payload encoding (CONTRACT.md §0): JSON text in storage, decoded values out."""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from .errors import PayloadError

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


def encode_payload(value: object) -> str:
    """Serialize ``value`` or raise ``PayloadError`` before anything is written."""
    text = _encode(value)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PayloadError(
                "payload contains a lone surrogate and cannot be stored as UTF-8"
            ) from exc
    return text


def _encode(value: object) -> str:
    if _fast_encode is not None:
        try:
            return "".join(_fast_encode(value, 0))
        except Exception:
            pass  # encode again below: the checking encoder raises the expected error
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PayloadError(f"payload is not JSON-serializable: {exc}") from exc


def decode_payload(text: str) -> Any:
    """Inverse of ``encode_payload``."""
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, TypeError):
        return json.loads(text)  # no value at index 0, or bytes: json.loads handles it
    if end != len(text):
        return json.loads(text)  # trailing text: whitespace, or an error loads reports
    return value
