"""The JSON event format (1.0 §3, 0.3 §3): a JSON object <-> CloudEvent.

Data rules (1.0 json-format §3.1): ``data_base64`` is decoded exactly into bytes; a ``data`` member
whose content type is JSON (``*/json``, ``*/*+json``) or absent is kept as the parsed JSON value
(``json_data``), never re-parsed; a string ``data`` with another content type becomes its UTF-8
bytes. 0.3 has no ``data_base64``: there ``datacontentencoding: base64`` marks a base64 ``data``
string (0.3 spec; its JSON format's "decode unless known text" rule contradicts the core text and
is not followed). ``data_base64`` is also accepted for 0.3 and the seed versions because
``to_json`` uses it as the lossless form for their binary data.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from chalicelib.core.cloudevents.context_attributes import (
    V0_3,
    V1_0,
    VERSIONS,
    check_attributes,
    check_required,
    resolve_version,
)
from chalicelib.core.cloudevents.event import ABSENT, CloudEvent, MapValue
from chalicelib.core.errors import Problem
from chalicelib.core.limits import MAX_CACHED_KEY_CHARS, MAX_JSON_DEPTH

# msgspec (C) parses and writes when installed (requirements.txt): over 2x the stdlib on 64 KiB
# documents, integers of any size exact. Anything it refuses or writes differently goes to the
# stdlib, which has the last word (tests compare the two). orjson was measured and is not used: it
# silently turns integers beyond 64 bits into floats (docs/cost.md).
_msgspec_decode: Callable[[bytes], Any] | None
_msgspec_encode: Callable[[Any], bytes] | None
try:
    import msgspec

    _msgspec_decode = msgspec.json.Decoder().decode
    _msgspec_encode = msgspec.json.Encoder().encode
    # ValueError: 1e999 (the stdlib reads it as infinity; ingress then refuses to re-encode it).
    _MSGSPEC_REFUSALS: tuple[type[BaseException], ...] = (
        msgspec.DecodeError,
        ValueError,
        RecursionError,
    )
except ImportError:  # pragma: no cover - where msgspec is not installed
    _msgspec_decode = _msgspec_encode = None
    _MSGSPEC_REFUSALS = (ValueError,)
# msgspec's compact UTF-8 JSON writer, one for every module that writes with it (None without it).
MSGSPEC_ENCODE = _msgspec_encode

JSON_ACCELERATOR = "msgspec" if _msgspec_decode is not None else "stdlib"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)
_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, check_circular=False, allow_nan=False
)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)


def parse_json(body: bytes) -> Any:
    """Strict RFC 8259 parse of UTF-8 bytes; ``ValueError`` with a short reason otherwise."""
    if _msgspec_decode is not None:
        try:
            return _msgspec_decode(body)
        except _MSGSPEC_REFUSALS:
            pass
    return parse_json_stdlib(body)


def parse_json_stdlib(body: bytes) -> Any:
    try:
        return _DECODER.decode(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("body is not valid UTF-8") from None
    except RecursionError:
        raise ValueError(
            f"JSON nested too deeply (data: at most {MAX_JSON_DEPTH} levels)"
        ) from None
    except ValueError as exc:
        raise ValueError(f"malformed JSON: {exc}") from None


def dumps_compact(value: Any) -> str:
    return dumps_utf8(value).decode("utf-8", "surrogatepass")


def dumps_ascii(value: Any) -> str | None:
    """Compact JSON of ``value`` when that text is all ASCII (so its ``len`` is its UTF-8 size),
    written by msgspec (about twice as fast as ``dumps_compact``: a replay writes every event it
    packs); None when it is not ASCII, or holds ``null`` (msgspec writes an infinite float as
    null: the caller takes ``dumps_compact``, which refuses it), or msgspec refuses the value
    (a lone surrogate) or is not installed."""
    if _msgspec_encode is None:
        return None
    try:
        out = _msgspec_encode(value)
    except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
        return None
    if not out.isascii() or b"null" in out:
        return None
    return out.decode("ascii")


def dumps_utf8(value: Any) -> bytes:
    """Compact JSON as UTF-8; escapes everything when a string holds a lone surrogate."""
    if _msgspec_encode is not None:
        try:
            out = _msgspec_encode(value)
        except (TypeError, ValueError, OverflowError):  # a lone surrogate: the stdlib decides
            pass
        else:
            # msgspec writes an infinite float (only an out-of-range literal makes one) as null:
            # a text with null goes to the stdlib, which writes null and refuses infinity.
            if b"null" not in out:
                return out
    return dumps_utf8_stdlib(value)


def dumps_utf8_stdlib(value: Any) -> bytes:
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")


def is_json_content_type(content_type: str) -> bool:
    """``*/json`` or ``*/*+json`` once parameters are stripped (case-insensitive)."""
    if len(content_type) <= MAX_CACHED_KEY_CHARS:  # a cache keyed by client input: short keys only
        return _is_json_content_type(content_type)
    return _json_media(content_type)


@lru_cache(maxsize=512)
def _is_json_content_type(content_type: str) -> bool:
    return _json_media(content_type)


def _json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    _, slash, subtype = media.partition("/")
    return bool(slash) and (subtype == "json" or subtype.endswith("+json"))


_MISSING: Any = object()


def event_from_object(
    obj: object,
    legacy: bool,
    prefix: str,
    problems: list[Problem],
    *,
    owned: bool = False,
    checked: bool = True,
) -> CloudEvent | None:
    """Decode one JSON-format event; on any problem append them all and return None.

    ``owned``: ``obj`` was parsed here and nobody else holds it, so it can become the attributes.
    ``checked=False``: the event was validated by this broker before it was stored, so only the
    required attributes are checked again, not every attribute's syntax (data is still decoded
    with every rule, as it must be to rebuild the event).
    """
    start = len(problems)
    if type(obj) is not dict:
        problems.append(Problem(prefix.rstrip(".") or "body", "must be a JSON object"))
        return None

    def field(name: str) -> str:
        return prefix + name

    version, why = resolve_version(obj.get("specversion"), legacy)
    if why is not None:
        problems.append(Problem(field("specversion"), why))
    rules = version or V1_0
    attrs: dict[str, Any] = obj if owned else dict(obj)
    raw_data = attrs.pop("data", _MISSING)
    has_data = raw_data is not _MISSING
    b64 = attrs.pop("data_base64", None)
    if None in attrs.values():  # JSON null means unset (json-format §2.2)
        attrs = {name: value for name, value in attrs.items() if value is not None}
    if rules.allows_maps:
        for name, value in attrs.items():
            if type(value) is dict:
                attrs[name] = MapValue.of(value)  # one canonical text, whoever parsed it
    if checked:
        check_attributes(attrs, rules, field, problems)
    else:
        check_required(attrs, field, problems)

    data: bytes | None = None
    json_data: Any = ABSENT
    if b64 is not None:
        if has_data:
            problems.append(
                Problem(field("data_base64"), "data and data_base64 are mutually exclusive")
            )
        else:
            data = decode_base64(b64, field("data_base64"), problems)
    elif has_data:
        content_type = attrs.get(rules.content_type_attr)
        encoding = attrs.get("datacontentencoding") if rules is V0_3 else None
        if encoding is not None and type(raw_data) is str:
            if type(encoding) is str and encoding.lower() == "base64":
                data = decode_base64(raw_data, field("data"), problems)
            else:
                problems.append(Problem(field("datacontentencoding"), "only base64 is supported"))
        elif (
            type(raw_data) is not str
            or type(content_type) is not str
            or is_json_content_type(content_type)
        ):
            json_data = raw_data
            if checked and nested_deeper(raw_data, MAX_JSON_DEPTH):
                problems.append(
                    Problem(field("data"), f"nests deeper than {MAX_JSON_DEPTH} levels of JSON")
                )
        else:
            try:
                data = raw_data.encode("utf-8")
            except UnicodeEncodeError:
                problems.append(Problem(field("data"), "text data holds a lone surrogate"))
    if len(problems) > start:
        return None
    return CloudEvent(attrs, data, json_data)


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests arrays and objects more than ``limit`` levels deep
    (a scalar: 0 levels), found iteratively, visiting only arrays and objects."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is not list and kind is not dict:
            continue
        if depth > limit:
            return True
        members = item if kind is list else item.values()
        kinds = set(map(type, members))  # at C speed: most arrays hold no array or object
        if list in kinds or dict in kinds:
            stack.extend((member, depth + 1) for member in members)
    return False


def decode_base64(text: object, field: str, problems: list[Problem]) -> bytes | None:
    """RFC 4648 §4 exactly: standard alphabet, padding required, no stray or non-zero bits."""
    if type(text) is not str:
        problems.append(Problem(field, "must be a base64 string"))
        return None
    try:
        raw = base64.b64decode(text, validate=True)
        if text.endswith("="):
            tail = text[-4:]
            if base64.b64encode(base64.b64decode(tail)).decode("ascii") != tail:
                raise ValueError("non-canonical")
    except (binascii.Error, ValueError):
        problems.append(Problem(field, "invalid base64 (RFC 4648 §4, padded, canonical)"))
        return None
    return raw


def to_json(event: CloudEvent) -> dict[str, Any]:
    """The lossless JSON-format object (archive, SQS): ``from_json(to_json(e)) == e``."""
    out: dict[str, Any] = {
        name: (json.loads(value) if type(value) is MapValue else value)
        for name, value in event.attributes.items()
    }
    if event.json_data is not ABSENT:
        out["data"] = event.json_data
    elif event.data is not None:
        member, value = _bytes_member(event)
        out[member] = value
    return out


def _bytes_member(event: CloudEvent) -> tuple[str, str]:
    data = event.data
    assert data is not None
    attrs = event.attributes
    rules = VERSIONS.get(event.specversion, V1_0)
    if rules is V0_3 and "datacontentencoding" in attrs:
        encoding = attrs["datacontentencoding"]
        if isinstance(encoding, str) and encoding.lower() == "base64":
            return "data", base64.b64encode(data).decode("ascii")
        return "data_base64", base64.b64encode(data).decode("ascii")
    content_type = attrs.get(rules.content_type_attr)
    if isinstance(content_type, str) and not is_json_content_type(content_type):
        try:
            return "data", data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return "data_base64", base64.b64encode(data).decode("ascii")


def to_wire_json(event: CloudEvent) -> dict[str, Any]:
    """The structured-mode object sent to others: like ``to_json``, but JSON bytes travel as a
    JSON value, and 0.3 binary data uses ``datacontentencoding: base64`` (0.3 has no
    ``data_base64``)."""
    out = to_json(event)
    if "data_base64" not in out:
        return out
    rules = VERSIONS.get(event.specversion, V1_0)
    content_type = event.attributes.get(rules.content_type_attr)
    if isinstance(content_type, str) and is_json_content_type(content_type):
        assert event.data is not None
        try:
            out["data"] = parse_json(event.data)
            del out["data_base64"]
            return out
        except ValueError:
            pass
    if rules is V0_3:
        out["data"] = out.pop("data_base64")
        out["datacontentencoding"] = "base64"
    return out
