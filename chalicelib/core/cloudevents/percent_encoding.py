"""Binary-mode header values: canonical strings and the HTTP binding's percent-encoding.

Encoding (1.0.2 HTTP binding §3.1.3.2): space, ``"``, ``%`` and everything outside printable ASCII
(U+0021-U+007E) becomes ``%XY`` per UTF-8 byte, upper-case hex. Decoding: first unescape an
RFC 7230 §3.2.6 quoted-string (older senders), then exactly one round of percent-decoding; the
resulting bytes must be valid UTF-8. A ``%`` not followed by two hex digits is kept as is: older
senders did not encode it, and there is nothing else it could mean.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, unquote_to_bytes

from chalicelib.core.cloudevents.event import AttributeValue, MapValue

_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')
NEEDS_ENCODING = re.compile(r"[^\x21\x23\x24\x26-\x7e]")
_QUOTED_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_QUOTED_PAIR = re.compile(r"\\(.)", re.DOTALL)


def canonical_string(value: AttributeValue) -> str:
    """The CloudEvents canonical string encoding: ``true``/``false``, decimal integers, text."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def encode_header_value(value: str) -> str:
    if NEEDS_ENCODING.search(value) is None:
        return value
    return quote(value, safe=_SAFE, errors="surrogatepass")


def decode_header_value(raw: str) -> str:
    """Decode one ``ce-`` header value; ``ValueError`` says what is wrong with it."""
    if "%" not in raw and raw[:1] != '"':
        return raw
    value = raw
    if value[:1] == '"':
        m = _QUOTED_STRING.fullmatch(value)
        if m is None:
            raise ValueError("malformed quoted-string (RFC 7230 §3.2.6)")
        value = _QUOTED_PAIR.sub(r"\1", m.group(1))
        if "%" not in value:
            return value
    try:
        return unquote_to_bytes(value).decode("utf-8")
    except UnicodeError:
        raise ValueError("percent-decoded value is not valid UTF-8") from None


def map_headers(name: str, value: MapValue, prefix: str) -> list[tuple[str, str]]:
    """0.3 binding §3.1.3.1: a Map flattens into ``<prefix><name>-<key>`` headers."""
    out = []
    for key, entry in value.entries().items():
        text = entry if isinstance(entry, str) else _json_text(entry)
        out.append((f"{prefix}{name}-{key}", text))
    return out


def _json_text(entry: object) -> str:
    if isinstance(entry, bool | int):
        return canonical_string(entry)
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
