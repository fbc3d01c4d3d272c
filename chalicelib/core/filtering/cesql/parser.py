"""Recursive-descent parser for CESQL v1 (spec §2), with the precedence of §3.6.

Loosest to tightest: AND / OR / XOR (one level, left to right), comparisons, ``+ -``, ``* / %``,
then the postfix ``[NOT] LIKE`` and ``[NOT] IN``, then the prefix ``NOT``, ``-`` and ``EXISTS``,
then function calls, parentheses, attributes and literals. So ``NOT a = b`` is ``(NOT a) = b``,
exactly as the spec (and the reference ANTLR grammar) rank unary operators above binary ones.

Deviation note: the reference grammar marks AND/OR/XOR right-associative (``<assoc=right>``,
used by sdk-go, hence Knative); spec §3.6 says operators of equal precedence evaluate left to
right, and this parser follows the spec text: ``a OR b AND c`` is ``(a OR b) AND c``.
"""

from __future__ import annotations

from chalicelib.core.filtering.cesql.errors import CesqlParseError
from chalicelib.core.filtering.cesql.lexer import Kind, Token, tokenize
from chalicelib.core.filtering.cesql.nodes import (
    Attribute,
    Binary,
    Call,
    Constant,
    DataPath,
    Exists,
    In,
    Like,
    LikeMatcher,
    Node,
    Unary,
)

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1

# Deeper input is refused (a parse error, not a RecursionError in the parser or the evaluator).
MAX_NESTING = 64
# What a trigger author may write (refused at PUT with 400): together they bound the work one
# expression does per event, whatever the event (issue 16).
MAX_EXPRESSION_CHARS = 4096
MAX_IN_ITEMS = 256
MAX_ARGUMENTS = 64
MAX_LIKE_PATTERN_CHARS = 1024
# LIKE's cost per event grows with the text: one scan per term, and per ``_`` at most one step
# per character (a ``_`` run cannot be skipped by a substring search).
MAX_LIKE_TERMS = 32
MAX_LIKE_WILDCARDS = 32
MAX_DEPTH = 256

_LOGIC = frozenset({"AND", "OR", "XOR"})
_COMPARISON = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
_ADDITIVE = frozenset({"+", "-"})
_MULTIPLICATIVE = frozenset({"*", "/", "%"})


def _wildcards(pattern: str) -> int:
    """The ``_`` wildcards of a LIKE pattern (``\\_`` is a literal underscore)."""
    return pattern.count("_") - pattern.count("\\_")


def parse_tree(source: str) -> Node:
    if len(source) > MAX_EXPRESSION_CHARS:
        raise CesqlParseError(
            f"an expression has at most {MAX_EXPRESSION_CHARS} characters, this one {len(source)}",
            1,
        )
    tree = _Parser(tokenize(source)).parse()
    if _depth(tree) > MAX_DEPTH:
        raise CesqlParseError(f"expression is nested deeper than {MAX_DEPTH} operations", 1)
    return tree


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, (Unary, Like)):
        return (node.operand,)
    if isinstance(node, In):
        return (node.operand, *node.items)
    if isinstance(node, Call):
        return node.args
    return ()


def _depth(tree: Node) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in _children(node))
    return deepest


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._i = 0
        self._nesting = 0
        self._like_terms = 0
        self._like_wildcards = 0

    @property
    def _peek(self) -> Token:
        return self._tokens[self._i]

    def _next(self) -> Token:
        tok = self._tokens[self._i]
        if tok.kind is not Kind.EOF:
            self._i += 1
        return tok

    def _is(self, kind: Kind, texts: frozenset[str] | str | None = None) -> bool:
        tok = self._peek
        if tok.kind is not kind:
            return False
        if texts is None:
            return True
        return tok.text == texts if isinstance(texts, str) else tok.text in texts

    def _expect(self, kind: Kind, what: str) -> Token:
        if not self._is(kind):
            raise self._error(f"expected {what}")
        return self._next()

    def _error(self, message: str, tok: Token | None = None) -> CesqlParseError:
        tok = tok or self._peek
        return CesqlParseError(f"{message}, found {tok.describe()}", tok.position)

    def parse(self) -> Node:
        if self._is(Kind.EOF):
            raise CesqlParseError("empty expression", 1)
        node = self._logic()
        if not self._is(Kind.EOF):
            raise self._error("expected an operator or the end of the expression")
        return node

    def _enter(self) -> None:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise CesqlParseError(
                f"expression is nested deeper than {MAX_NESTING} levels", self._peek.position
            )

    def _logic(self) -> Node:
        self._enter()
        node = self._logic_chain()
        self._nesting -= 1
        return node

    def _logic_chain(self) -> Node:
        node = self._comparison()
        while self._is(Kind.KEYWORD, _LOGIC):
            op = self._next().text
            node = Binary(node.position, op, node, self._comparison())
        return node

    def _comparison(self) -> Node:
        node = self._additive()
        while self._is(Kind.OP, _COMPARISON):
            op = self._next().text
            node = Binary(node.position, op, node, self._additive())
        return node

    def _additive(self) -> Node:
        node = self._multiplicative()
        while self._is(Kind.OP, _ADDITIVE):
            op = self._next().text
            node = Binary(node.position, op, node, self._multiplicative())
        return node

    def _multiplicative(self) -> Node:
        node = self._postfix()
        while self._is(Kind.OP, _MULTIPLICATIVE):
            op = self._next().text
            node = Binary(node.position, op, node, self._postfix())
        return node

    def _postfix(self) -> Node:
        node = self._unary()
        while True:
            negated = False
            if self._is(Kind.KEYWORD, "NOT"):
                after = self._tokens[self._i + 1]
                if not (after.kind is Kind.KEYWORD and after.text in ("LIKE", "IN")):
                    raise self._error("expected LIKE or IN after NOT", after)
                self._next()
                negated = True
            if self._is(Kind.KEYWORD, "LIKE"):
                self._next()
                if not self._is(Kind.STRING):
                    raise self._error("the LIKE pattern must be a string literal")
                pattern = str(self._next().value)
                if len(pattern) > MAX_LIKE_PATTERN_CHARS:
                    raise CesqlParseError(
                        f"a LIKE pattern has at most {MAX_LIKE_PATTERN_CHARS} characters",
                        node.position,
                    )
                self._like_terms += 1
                self._like_wildcards += _wildcards(pattern)
                if self._like_terms > MAX_LIKE_TERMS:
                    raise CesqlParseError(
                        f"an expression has at most {MAX_LIKE_TERMS} LIKE terms", node.position
                    )
                if self._like_wildcards > MAX_LIKE_WILDCARDS:
                    raise CesqlParseError(
                        f"an expression's LIKE patterns have at most {MAX_LIKE_WILDCARDS} '_'"
                        " wildcards in all",
                        node.position,
                    )
                node = Like(node.position, node, pattern, LikeMatcher(pattern), negated)
            elif self._is(Kind.KEYWORD, "IN"):
                self._next()
                node = In(node.position, node, self._set(), negated)
            else:
                return node

    def _set(self) -> tuple[Node, ...]:
        self._expect(Kind.LPAREN, "'(' to open the IN set")
        items = [self._logic()]
        while self._is(Kind.COMMA):
            self._next()
            items.append(self._logic())
            if len(items) > MAX_IN_ITEMS:
                raise self._error(f"an IN set has at most {MAX_IN_ITEMS} items")
        self._expect(Kind.RPAREN, "',' or ')' in the IN set")
        return tuple(items)

    def _unary(self) -> Node:
        self._enter()
        node = self._prefixed()
        self._nesting -= 1
        return node

    def _prefixed(self) -> Node:
        tok = self._peek
        if tok.kind is Kind.KEYWORD and tok.text == "NOT":
            self._next()
            return Unary(tok.position, "NOT", self._unary())
        if tok.kind is Kind.KEYWORD and tok.text == "EXISTS":
            self._next()
            if self._is(Kind.DATA):
                path = self._next().value
                assert isinstance(path, tuple)
                return Exists(tok.position, "data", path)
            name = self._expect(Kind.IDENT, "an attribute name after EXISTS")
            return Exists(tok.position, name.text)
        if tok.kind is Kind.OP and tok.text in ("-", "+"):
            self._next()
            if self._is(Kind.INT):
                digits = self._next()
                return self._integer(
                    -int(str(digits.value)) if tok.text == "-" else digits.value, tok
                )
            if tok.text == "+":
                raise self._error("expected an integer after '+'")
            return Unary(tok.position, "-", self._unary())
        return self._primary()

    def _integer(self, value: object, tok: Token) -> Constant:
        assert isinstance(value, int)
        if not INT_MIN <= value <= INT_MAX:
            raise CesqlParseError(
                f"integer literal {value} is outside the 32-bit signed range", tok.position
            )
        return Constant(tok.position, value)

    def _primary(self) -> Node:
        tok = self._next()
        if tok.kind is Kind.INT:
            return self._integer(tok.value, tok)
        if tok.kind is Kind.STRING:
            return Constant(tok.position, str(tok.value))
        if tok.kind is Kind.KEYWORD and tok.text in ("TRUE", "FALSE"):
            return Constant(tok.position, tok.text == "TRUE")
        if tok.kind is Kind.IDENT:
            return Attribute(tok.position, tok.text)
        if tok.kind is Kind.DATA:
            assert isinstance(tok.value, tuple)
            return DataPath(tok.position, tok.value)
        if tok.kind is Kind.FUNC:
            return Call(tok.position, tok.text, self._arguments())
        if tok.kind is Kind.LPAREN:
            node = self._logic()
            self._expect(Kind.RPAREN, "')'")
            return node
        raise self._error("expected a value, an attribute, a function call or '('", tok)

    def _arguments(self) -> tuple[Node, ...]:
        self._expect(Kind.LPAREN, "'('")
        args: list[Node] = []
        if self._is(Kind.RPAREN):
            self._next()
            return ()
        args.append(self._logic())
        while self._is(Kind.COMMA):
            self._next()
            args.append(self._logic())
            if len(args) > MAX_ARGUMENTS:
                raise self._error(f"a function takes at most {MAX_ARGUMENTS} arguments")
        self._expect(Kind.RPAREN, "',' or ')' after a function argument")
        return tuple(args)
