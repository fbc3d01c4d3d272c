"""Turns CESQL text into tokens (spec §2).

Keywords, boolean literals and function names are case-insensitive; identifiers are lower-cased
too, because the TCK addresses ``EXISTS SOURCE`` (the reference ANTLR lexer runs on an upper-cased
stream). A word directly followed by ``(`` is a function name. Signs are not part of integer
tokens here: the parser folds a prefix ``-``/``+`` into the literal, so ``4 -1`` is ``4 - 1`` and
``-2147483648`` is still a valid 32-bit literal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from chalicelib.core.filtering.cesql.errors import CesqlParseError


class Kind(Enum):
    INT = "integer"
    STRING = "string"
    IDENT = "identifier"
    DATA = "data path"
    FUNC = "function name"
    KEYWORD = "keyword"
    OP = "operator"
    LPAREN = "'('"
    RPAREN = "')'"
    COMMA = "','"
    EOF = "end of expression"


KEYWORDS = frozenset({"AND", "OR", "XOR", "NOT", "LIKE", "IN", "EXISTS", "TRUE", "FALSE"})

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")
_SPACE = frozenset(" \t\r\n")
MAX_PATH_SEGMENTS = 32
_TWO_CHAR_OPS = frozenset({"!=", "<>", "<=", ">="})
_ONE_CHAR_OPS = frozenset("=<>+-*/%")


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str  # the source text, or the normalised keyword / function name / identifier
    value: object  # int for INT, the unescaped text for STRING, else None
    position: int  # 1-based column of the first character

    def describe(self) -> str:
        if self.kind is Kind.EOF:
            return "end of expression"
        return f"{self.kind.value} {self.text!r}"


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in _SPACE:
            i += 1
        elif c in ("'", '"'):
            i = _string(source, i, tokens)
        elif c in _WORD_CHARS:
            i = _word(source, i, tokens)
        elif c == "(":
            tokens.append(Token(Kind.LPAREN, c, None, i + 1))
            i += 1
        elif c == ")":
            tokens.append(Token(Kind.RPAREN, c, None, i + 1))
            i += 1
        elif c == ",":
            tokens.append(Token(Kind.COMMA, c, None, i + 1))
            i += 1
        elif source[i : i + 2] in _TWO_CHAR_OPS:
            tokens.append(Token(Kind.OP, source[i : i + 2], None, i + 1))
            i += 2
        elif c in _ONE_CHAR_OPS:
            tokens.append(Token(Kind.OP, c, None, i + 1))
            i += 1
        else:
            raise CesqlParseError(f"unexpected character {c!r}", i + 1)
    tokens.append(Token(Kind.EOF, "", None, n + 1))
    return tokens


def _string(source: str, start: int, tokens: list[Token]) -> int:
    # Spec grammar: a quote inside is written backslash-quote. Like the reference lexer, a
    # backslash always pairs with the next character, and only backslash + the delimiting quote
    # is unescaped: other pairs stay as written, so LIKE still sees its own \% and \_ escapes.
    quote = source[start]
    parts: list[str] = []
    i, n = start + 1, len(source)
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            nxt = source[i + 1]
            parts.append(nxt if nxt == quote else c + nxt)
            i += 2
        elif c == quote:
            tokens.append(Token(Kind.STRING, source[start : i + 1], "".join(parts), start + 1))
            return i + 1
        else:
            parts.append(c)
            i += 1
    raise CesqlParseError("unterminated string literal", start + 1)


def _word(source: str, start: int, tokens: list[Token]) -> int:
    i, n = start, len(source)
    while i < n and source[i] in _WORD_CHARS:
        i += 1
    word = source[start:i]
    upper = word.upper()
    j = i
    while j < n and source[j] in _SPACE:
        j += 1
    if upper in KEYWORDS:
        tokens.append(Token(Kind.KEYWORD, upper, None, start + 1))
    elif j < n and source[j] == "(":
        if word[0] not in _LETTERS or any(ch in _DIGITS for ch in word):
            raise CesqlParseError(f"invalid function name {word!r}", start + 1)
        tokens.append(Token(Kind.FUNC, upper, None, start + 1))
    elif all(ch in _DIGITS for ch in word):
        if len(word.lstrip("0")) > 10:  # past any 32-bit integer; int() refuses 4,300+ digits
            raise CesqlParseError(
                f"integer literal {word[:20]}... is outside the 32-bit signed range", start + 1
            )
        tokens.append(Token(Kind.INT, word, int(word), start + 1))
    elif upper == "DATA" and i < n and source[i] == ".":
        return _data_path(source, start, i, tokens)
    elif "_" in word:
        raise CesqlParseError(
            f"invalid identifier {word!r} (attribute names are letters and digits)", start + 1
        )
    else:
        tokens.append(Token(Kind.IDENT, word.lower(), None, start + 1))
    return i


def _data_path(source: str, start: int, i: int, tokens: list[Token]) -> int:
    """``data.a.b``: member names keep their case (JSON is case-sensitive); a segment of digits
    also indexes an array. Segments are word characters (letters, digits, ``_``)."""
    segments: list[str] = []
    n = len(source)
    while i < n and source[i] == ".":
        j = i + 1
        while j < n and source[j] in _WORD_CHARS:
            j += 1
        if j == i + 1:
            raise CesqlParseError("expected a member name after '.'", i + 2)
        segments.append(source[i + 1 : j])
        i = j
    if len(segments) > MAX_PATH_SEGMENTS:
        raise CesqlParseError(f"a data path has at most {MAX_PATH_SEGMENTS} members", start + 1)
    tokens.append(Token(Kind.DATA, source[start:i], tuple(segments), start + 1))
    return i
