"""Context-attribute rules per spec version: names, types, required attributes and value syntax.

Every check appends to one list so a caller can report all problems at once. The same function
judges events decoded from the wire and events built in memory (``codec.validate``), so the
decoder never accepts an event that ``validate`` would refuse.

Versions: 1.0 (1.0.2 text), 0.3, and the legacy seed spec (``specversion`` 0.1 / 0.2: lower-case
names, ``contenttype``, ``schemaurl`` of type URI, ``Map``-typed extensions).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chalicelib.core.cloudevents.event import MapValue
from chalicelib.core.errors import Problem
from chalicelib.core.limits import MAX_CACHE_ENTRIES, MAX_CACHED_KEY_CHARS

Field = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class SpecVersion:
    name: str
    content_type_attr: str  # the attribute that maps to Content-Type in binary mode
    schema_attr: str
    schema_is_absolute: bool  # URI (absolute) or URI-reference
    name_pattern: re.Pattern[str]
    allows_maps: bool
    legacy: bool


_NAME_ANY_START = re.compile(r"[a-z0-9]+")  # 1.0: letters or digits
_NAME_LETTER_START = re.compile(r"[a-z][a-z0-9]*")  # 0.3 and seed: MUST begin with a letter

V1_0 = SpecVersion("1.0", "datacontenttype", "dataschema", True, _NAME_ANY_START, False, False)
V0_3 = SpecVersion("0.3", "datacontenttype", "schemaurl", False, _NAME_LETTER_START, True, False)
V0_2 = SpecVersion("0.2", "contenttype", "schemaurl", True, _NAME_LETTER_START, True, True)
V0_1 = SpecVersion("0.1", "contenttype", "schemaurl", True, _NAME_LETTER_START, True, True)
VERSIONS: dict[str, SpecVersion] = {v.name: v for v in (V1_0, V0_3, V0_2, V0_1)}
REQUIRED = ("id", "source", "type", "specversion")
_REQUIRED_BUT_SPECVERSION = REQUIRED[:3]  # resolve_version judges specversion
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

# String type: no control characters, no lone surrogates, no Unicode noncharacters.
_NONCHARACTERS = "".join(
    f"\\U{p * 0x10000 + 0xFFFE:08x}\\U{p * 0x10000 + 0xFFFF:08x}" for p in range(17)
)
_BAD_STRING_CHAR = re.compile(
    f"[\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff\\ufdd0-\\ufdef{_NONCHARACTERS}]"
)

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)
_MONTH_DAYS = frozenset(
    f"{month:02d}-{day:02d}"
    for month, days in enumerate((31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), start=1)
    for day in range(1, days + 1)
)

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*[ \t]*"
)
_TOKEN_ONLY = re.compile(_TOKEN)

# RFC 3986 appendix A, assembled from its productions.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_SEGMENT_NZ_NC = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_IP_LITERAL = rf"\[(?:[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\]"
_HOST = rf"(?:{_IP_LITERAL}|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)"
_AUTHORITY = rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?{_HOST}(?::[0-9]*)?"
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_URI = (
    rf"{_SCHEME}:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ}(?:/{_SEGMENT})*|)"
    rf"{_TAIL}"
)
_RELATIVE_REF = (
    rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*|){_TAIL}"
)
_URI_RE = re.compile(_URI)
_URI_REFERENCE_RE = re.compile(rf"{_URI}|{_RELATIVE_REF}")
_IPV6_IN_AUTHORITY = re.compile(
    r"^[A-Za-z][A-Za-z0-9+\-.]*://[^/?#]*\[([0-9A-Fa-f:.]+)\]|^//[^/?#]*\[([0-9A-Fa-f:.]+)\]"
)


def is_rfc3339(value: str) -> bool:
    m = _RFC3339.fullmatch(value)
    if m is None:
        return False
    month_day = value[5:10]
    if month_day not in _MONTH_DAYS or value[11:13] > "23" or value[14:16] > "59":
        return False
    if value[17:19] > "60" or (m.group(1) is not None and (m[1] > "23" or m[2] > "59")):
        return False
    if month_day == "02-29":
        year = int(value[:4])
        return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return True


def is_media_type(value: str) -> bool:
    return _MEDIA_TYPE.fullmatch(value) is not None


def is_uri_reference(value: str) -> bool:
    known = _KNOWN_URI_REFERENCES.get(value)
    if known is not None:
        return known
    ok = _URI_REFERENCE_RE.fullmatch(value) is not None and _ipv6_ok(value)
    # Sources repeat per producer; bounded in entries and in bytes (only short ones are kept).
    if len(value) <= MAX_CACHED_KEY_CHARS and len(_KNOWN_URI_REFERENCES) < MAX_CACHE_ENTRIES:
        _KNOWN_URI_REFERENCES[value] = ok
    return ok


_KNOWN_URI_REFERENCES: dict[str, bool] = {}


def is_absolute_uri(value: str) -> bool:
    # RFC 3986 §3 "URI": a scheme is required; a fragment is tolerated (see design.md notes).
    return _URI_RE.fullmatch(value) is not None and _ipv6_ok(value)


def _ipv6_ok(value: str) -> bool:
    if "[" not in value:
        return True
    m = _IPV6_IN_AUTHORITY.match(value)
    if m is None:  # an IPvFuture literal, already checked by the grammar
        return True
    try:
        ipaddress.IPv6Address(m.group(1) or m.group(2))
    except ValueError:
        return False
    return True


def is_valid_string(value: str) -> bool:
    # isprintable() is a fast, stricter test (it also refuses e.g. U+00A0): only its failures
    # need the exact one.
    return value.isprintable() or _BAD_STRING_CHAR.search(value) is None


def resolve_version(value: object, legacy: bool) -> tuple[SpecVersion | None, str | None]:
    """The rules for a ``specversion`` value, and a message when it is refused. A refused legacy
    version still comes with its rules, so the rest of the event is judged by them."""
    if value is None:
        return None, "required attribute is missing"
    if type(value) is not str:
        return None, "must be a string"
    version = VERSIONS.get(value)
    if version is None:
        return None, f"unsupported specversion {value!r}; this broker accepts 1.0 and 0.3"
    if version.legacy and not legacy:
        return version, (
            f"specversion {value} is a legacy version; the broker accepts it only with the "
            'annotation serverless-broker/legacy-spec-versions: "true"'
        )
    return version, None


def check_required(attrs: Mapping[str, object], field: Field, problems: list[Problem]) -> None:
    """Only the required attributes' presence and type: for events this broker validated
    itself before it queued them (``message.decode_message``)."""
    id_, source, type_ = attrs.get("id"), attrs.get("source"), attrs.get("type")
    if type(id_) is str and id_ and type(source) is str and source and type(type_) is str and type_:
        return
    for name in _REQUIRED_BUT_SPECVERSION:
        value = attrs.get(name)
        if type(value) is not str or not value:
            problems.append(Problem(field(name), "required attribute is missing or not a string"))


def check_attributes(
    attrs: Mapping[str, object],
    version: SpecVersion,
    field: Field,
    problems: list[Problem],
) -> None:
    """Append a Problem for everything wrong with ``attrs`` under ``version``'s rules.

    ``specversion`` itself is judged by ``resolve_version``, which chose ``version``.
    """
    good_names = _GOOD_NAMES[version.name_pattern.pattern]
    allows_maps = version.allows_maps
    for name, value in attrs.items():
        if name not in good_names and not _good_name(name, version, good_names):
            problems.append(Problem(field(name), _bad_name_message(name, version)))
            continue
        if type(value) is str:
            if not value.isprintable() and _BAD_STRING_CHAR.search(value) is not None:
                problems.append(Problem(field(name), _STRING_MESSAGE))
        elif type(value) is bool:
            pass
        elif type(value) is int:
            if not INT_MIN <= value <= INT_MAX:
                problems.append(Problem(field(name), "integer out of the 32-bit signed range"))
        elif type(value) is MapValue and allows_maps:
            _check_map(value, name, field, problems)
        elif name != "specversion":  # resolve_version already said what is wrong with it
            problems.append(Problem(field(name), _type_message(value, version)))
    for name in _REQUIRED_BUT_SPECVERSION:
        value = attrs.get(name)
        if value is None:
            problems.append(Problem(field(name), "required attribute is missing"))
        elif type(value) is not str:
            problems.append(Problem(field(name), "must be a string"))
        elif not value:
            problems.append(Problem(field(name), "must be a non-empty string"))
        elif name == "source" and not is_uri_reference(value):
            problems.append(Problem(field(name), "must be a URI-reference (RFC 3986 §4.1)"))
    _check_optional(attrs, version, field, problems)


_GOOD_NAMES: dict[str, set[str]] = {
    _NAME_ANY_START.pattern: set(),
    _NAME_LETTER_START.pattern: set(),
}


def _good_name(name: str, version: SpecVersion, cache: set[str]) -> bool:
    if name == "data" or version.name_pattern.fullmatch(name) is None:
        return False
    # Names seen before skip the regex; bounded in entries and bytes against hostile input.
    if len(name) <= MAX_CACHED_KEY_CHARS and len(cache) < MAX_CACHE_ENTRIES:
        cache.add(name)
    return True


def _check_optional(
    attrs: Mapping[str, object], version: SpecVersion, field: Field, problems: list[Problem]
) -> None:
    value = attrs.get("time")
    if value is not None and (type(value) is not str or not is_rfc3339(value)):
        problems.append(Problem(field("time"), "must be an RFC 3339 timestamp"))
    value = attrs.get("subject")
    if value is not None and (type(value) is not str or not value):
        problems.append(Problem(field("subject"), "must be a non-empty string"))
    value = attrs.get(version.content_type_attr)
    if value is not None and (type(value) is not str or not is_media_type(value)):
        problems.append(Problem(field(version.content_type_attr), "must be an RFC 2046 media type"))
    value = attrs.get(version.schema_attr)
    if value is not None:
        if version.schema_is_absolute:
            if type(value) is not str or not is_absolute_uri(value):
                problems.append(Problem(field(version.schema_attr), "must be an absolute URI"))
        elif type(value) is not str or not is_uri_reference(value):
            problems.append(
                Problem(field(version.schema_attr), "must be a URI-reference (RFC 3986 §4.1)")
            )
    if version is V0_3:
        value = attrs.get("datacontentencoding")
        if value is not None and (type(value) is not str or not _TOKEN_ONLY.fullmatch(value)):
            problems.append(
                Problem(field("datacontentencoding"), "must be an RFC 2045 encoding token")
            )


def _check_map(value: MapValue, name: str, field: Field, problems: list[Problem]) -> None:
    try:
        entries = json.loads(value)
    except ValueError:
        entries = None
    if not isinstance(entries, dict):
        problems.append(Problem(field(name), "a Map value must be a JSON object"))
        return
    # What ingress accepts, delivery must encode: in binary mode each key becomes part of a
    # header name (``ce-<name>-<key>``), so a key is an HTTP token (RFC 9110 §5.6.2; no CR, LF,
    # space or separator). The spec's own examples use mixed case, which binary mode folds.
    for key in entries:
        if not _MAP_KEY.fullmatch(key):
            problems.append(
                Problem(
                    field(name),
                    f"Map key {key[:40]!r} must be 1 to 64 HTTP token characters "
                    "(it becomes part of an HTTP header name)",
                )
            )


_MAP_KEY = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")


_STRING_MESSAGE = "must not contain control characters, lone surrogates or Unicode noncharacters"


def _bad_name_message(name: str, version: SpecVersion) -> str:
    if name == "data":
        return "'data' is reserved and cannot be an attribute name"
    if version.name_pattern is _NAME_LETTER_START:
        return (
            f"invalid attribute name {name!r}: specversion {version.name} names are lower-case "
            "letters and digits starting with a letter"
        )
    return f"invalid attribute name {name!r}: names are lower-case ASCII letters and digits"


def _type_message(value: object, version: SpecVersion) -> str:
    if isinstance(value, MapValue):
        return f"Map values are not allowed in specversion {version.name}"
    allowed = "a string, integer or boolean"
    if version.allows_maps:
        allowed = "a string, integer, boolean or JSON object (Map)"
    return f"unsupported value type {type(value).__name__}: must be {allowed}"
