"""Payload encoding (CONTRACT.md §0): JSON text in storage, decoded values out."""

from __future__ import annotations

import json
from typing import Any

from .errors import PayloadError

_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=True
)


def encode_payload(value: object) -> str:
    """Serialize ``value`` or raise ``PayloadError`` before anything is written."""
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PayloadError(f"payload is not JSON-serializable: {exc}") from exc
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PayloadError(
                "payload contains a lone surrogate and cannot be stored as UTF-8"
            ) from exc
    return text


def decode_payload(text: str) -> Any:
    """Inverse of ``encode_payload``."""
    return json.loads(text)
