"""How delivery authenticates with a Connection (docs/targets.md, Connections): an API key header,
basic auth, an OAuth 2.0 client-credentials bearer token, or AWS SigV4.

Secret values are read from Secrets Manager and kept in this container's memory only, briefly
(``secret_ttl``); tokens until shortly before they expire. Neither is ever logged, stored, put in
an error, a metric or a dead letter: every message here names a secret by its ARN and says what
went wrong, never what it holds."""

from __future__ import annotations

import base64
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar
from urllib.parse import quote, urlencode

from chalicelib.core.errors import UnavailableError, ValidationError
from chalicelib.core.limits import read_json
from chalicelib.core.resources.connection import (
    ApiKey,
    AwsSigV4,
    Basic,
    Connection,
    OAuthClientCredentials,
)
from chalicelib.ports import HttpSender, RequestSigner, Secrets

SECRET_TTL_SECONDS = 60.0
DEFAULT_TOKEN_SECONDS = 300.0  # a token answer without expires_in
MAX_TOKEN_SECONDS = 3600.0  # a token is fetched again at least this often
TOKEN_MARGIN_SECONDS = 30.0  # fetched again this long before it expires
MAX_TOKEN_ANSWER_BYTES = 64 * 1024
MAX_TOKEN_CHARS = 8192
MAX_SECRET_CHARS = 8192  # an API key, a password, a client secret (Secrets Manager allows 64 KiB)
MAX_ENTRIES = 256  # per cache: with the limits above, a few MB per container at worst
TOKEN_TIMEOUT_SECONDS = 10.0

K = TypeVar("K")
V = TypeVar("V")


class ConnectionAuthError(UnavailableError):
    """A connection's credentials could not be had now (secret unreadable, token endpoint
    refusing): the delivery attempt is a transport error, retried."""


class ExpiringCache(Generic[K, V]):
    """Values with their own expiry, the oldest dropped beyond ``max_entries``."""

    def __init__(self, clock: Callable[[], float], max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._max = max_entries
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] <= self._clock():
                return None
            return found[1]

    def put(self, key: K, value: V, seconds: float) -> None:
        with self._lock:
            self._items[key] = (self._clock() + seconds, value)
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def drop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)


class ConnectionAuth:
    def __init__(
        self,
        connections: Callable[[str, str], Connection | None],
        secrets: Secrets,
        sender: HttpSender,
        signer: RequestSigner | None,
        *,
        secret_ttl: float = SECRET_TTL_SECONDS,
        lookup_ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``connections``: reads a Connection from the store; ``lookup_ttl``: how long one
        read serves (the routes' cache TTL)."""
        self._read = connections
        self._secrets = secrets
        self._sender = sender
        self._signer = signer
        self._secret_ttl = secret_ttl
        self._lookup_ttl = lookup_ttl
        self._found: ExpiringCache[tuple[str, str], Connection | None] = ExpiringCache(clock)
        self._values: ExpiringCache[str, str] = ExpiringCache(clock)
        self._tokens: ExpiringCache[tuple[str, str, str, int], str] = ExpiringCache(clock)
        self._fetching = threading.Lock()  # one token fetch at a time: they are rare

    # ---- delivery -------------------------------------------------------------------------------

    def connection(self, namespace: str, name: str) -> Connection:
        """The Connection a destination names; ConnectionAuthError when it does not exist."""
        key = (namespace, name)
        found = self._found.get(key)
        if found is None:
            found = self._read(namespace, name)
            if found is not None:
                self._found.put(key, found, self._lookup_ttl)
        if found is None:
            raise ConnectionAuthError(f'Connection "{namespace}/{name}" does not exist')
        return found

    def authorize(
        self, connection: Connection, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        """``headers`` with the connection's credentials; raises ConnectionAuthError."""
        auth = connection.auth
        if isinstance(auth, ApiKey):
            return {**headers, auth.header: self._secret(auth.secret_arn)}
        if isinstance(auth, Basic):
            username, password = self._basic(auth.secret_arn)
            pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
            return {**headers, "Authorization": f"Basic {pair}"}
        if isinstance(auth, OAuthClientCredentials):
            return {**headers, "Authorization": f"Bearer {self._token(connection, auth)}"}
        if self._signer is None:
            raise ConnectionAuthError("this function has no request signer")
        return self._signer.sign(url, headers, body, auth.service, auth.region)

    def refreshes(self, connection: Connection) -> bool:
        """Whether a 401 from the API may be a stale token: then ``forget`` it and try once
        more with a fresh one."""
        return isinstance(connection.auth, OAuthClientCredentials)

    def forget(self, connection: Connection) -> None:
        self._tokens.drop(_token_key(connection))

    # ---- readiness ------------------------------------------------------------------------------

    def problem(self, connection: Connection) -> tuple[str, str] | None:
        """Why the connection cannot authenticate now (reason, message), or None: its secrets
        are readable and, for OAuth, a token was fetched."""
        auth = connection.auth
        try:
            if isinstance(auth, ApiKey):
                self._secret(auth.secret_arn)
            elif isinstance(auth, Basic):
                self._basic(auth.secret_arn)
            elif isinstance(auth, OAuthClientCredentials):
                self._secret(auth.client_secret_arn)
                try:
                    self._token(connection, auth)
                except ConnectionAuthError as exc:
                    return "TokenNotFetched", exc.detail
            elif isinstance(auth, AwsSigV4) and self._signer is None:
                return "NoSigner", "This function cannot sign requests."
        except ConnectionAuthError as exc:
            return "SecretNotReadable", exc.detail
        return None

    # ---- secrets and tokens ---------------------------------------------------------------------

    def _secret(self, arn: str) -> str:
        value = self._values.get(arn)
        if value is None:
            try:
                value = self._secrets.get_string(arn)
            except UnavailableError as exc:
                raise ConnectionAuthError(f"secret {exc.detail}") from None
            if len(value) > MAX_SECRET_CHARS:
                raise ConnectionAuthError(
                    f"secret {arn} is longer than {MAX_SECRET_CHARS} characters"
                )
            self._values.put(arn, value, self._secret_ttl)
        return value

    def _basic(self, arn: str) -> tuple[str, str]:
        doc = _json(self._secret(arn).encode())
        if not (
            isinstance(doc, dict)
            and isinstance(doc.get("username"), str)
            and isinstance(doc.get("password"), str)
        ):
            raise ConnectionAuthError(
                f'secret {arn} is not JSON {{"username": ..., "password": ...}} of strings'
            )
        return doc["username"], doc["password"]

    def _token(self, connection: Connection, auth: OAuthClientCredentials) -> str:
        key = _token_key(connection)
        token = self._tokens.get(key)
        if token is not None:
            return token
        with self._fetching:
            token = self._tokens.get(key)  # another thread may have fetched it meanwhile
            if token is None:
                token, seconds = self._fetch(auth)
                self._tokens.put(key, token, seconds)
        return token

    def _fetch(self, auth: OAuthClientCredentials) -> tuple[str, float]:
        """RFC 6749 §4.4: a client-credentials grant, the client authenticating with HTTP basic
        (§2.3.1, the method every server supports). Returns the token and how long to keep it."""
        secret = self._secret(auth.client_secret_arn)
        form = {"grant_type": "client_credentials"}
        if auth.scope is not None:
            form["scope"] = auth.scope
        client = f"{quote(auth.client_id, safe='')}:{quote(secret, safe='')}"
        headers = {
            "Authorization": "Basic " + base64.b64encode(client.encode()).decode("ascii"),
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        sent = self._sender.post(
            auth.token_url, headers, urlencode(form).encode(), TOKEN_TIMEOUT_SECONDS
        )
        where = f"token endpoint {auth.token_url}"
        if sent.status is None:
            raise ConnectionAuthError(f"{where} could not be reached: {sent.error}")
        answer = _json(sent.body)
        if sent.status != 200:
            code = answer.get("error") if isinstance(answer, dict) else None
            said = f" ({code})" if isinstance(code, str) and _is_code(code) else ""
            raise ConnectionAuthError(f"{where} answered {sent.status}{said}")
        token = answer.get("access_token") if isinstance(answer, dict) else None
        kind = answer.get("token_type") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            raise ConnectionAuthError(f"{where} answered without an access_token")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise ConnectionAuthError(f"{where} answered a token that is not a bearer token")
        if any(ord(c) < 0x21 or ord(c) > 0x7E for c in token):
            raise ConnectionAuthError(f"{where} answered a token that cannot be sent in a header")
        expires = answer.get("expires_in") if isinstance(answer, dict) else None
        seconds = DEFAULT_TOKEN_SECONDS
        if isinstance(expires, int | float) and not isinstance(expires, bool) and expires > 0:
            seconds = min(float(expires), MAX_TOKEN_SECONDS)
        return token, max(1.0, seconds - min(TOKEN_MARGIN_SECONDS, seconds / 10))


def _token_key(connection: Connection) -> tuple[str, str, str, int]:
    # The generation: a changed connection (another client, scope) gets a token of its own.
    return (connection.namespace, connection.name, connection.uid, connection.generation)


def _json(body: bytes) -> object:
    """A small JSON document, or None (what it held is never repeated)."""
    try:
        return read_json(body, max_bytes=MAX_TOKEN_ANSWER_BYTES, max_depth=8)
    except ValidationError:
        return None


def _is_code(text: str) -> bool:
    """An RFC 6749 error code (``invalid_client``): safe to repeat, unlike a description."""
    return 0 < len(text) <= 64 and all(c.islower() or c == "_" for c in text)
