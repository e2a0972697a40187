"""Credentials and terminal control characters out of everything iobench shows or writes.

One module, applied where text leaves the process, not at the places text is made:

- ``cli.out`` / ``cli.err`` (every line on stdout and stderr, the one error printer included)
  pass their text through :func:`for_terminal`: credentials masked, control characters escaped;
- ``results.dumps`` (result.json, ``--json``, the result stored in the history's Parquet
  metadata) and the history's metric rows pass through :func:`redact_obj`;
- the HTML report escapes every text through :func:`redact_text`; progress bars show their
  names through :func:`for_terminal`.

What counts as a credential:

- the user-information part of any ``scheme://user:secret@host/...`` URL, whatever the secret
  holds (``/``, ``@``, ``:``, ``%``): everything from ``://`` to the *last* ``@`` of the URL is
  masked when what precedes the first ``@`` looks like user information (no ``/``, or a ``:``
  before the first ``/``). A path holding ``@`` after real credentials is masked too: showing
  too little beats showing a secret;
- the values of query parameters that name a key, secret, token, signature or credential
  (``?access_key=…``, ``X-Amz-Signature=…``, ``X-Amz-Credential=…``, Azure's ``sig=…``) and
  ``name=value`` pairs in free text whose name says secret, token, password or credential;
- the values of the credential environment variables (:data:`SECRET_ENV`), and the
  credentials in the URLs of the endpoint variables (:data:`ENDPOINT_ENV`);
- every secret seen in the command line (:func:`remember_argv`), in its typed and its
  percent-decoded form, wherever it shows up later (a backend that quotes a bucket name
  ``"KEY:SECRET@bkt"`` without its scheme).
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote

MASK = "***"
MIN_SECRET_LEN = 4  # shorter remembered values would mask ordinary words
SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_API_KEY",
)
ENDPOINT_ENV = ("IOBENCH_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")

# scheme:// then the rest of the token (a URL ends at whitespace, a quote or an angle bracket)
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s'\"<>`]*)")
_SECRET_WORDS = "key|secret|token|signature|sig|password|passwd|pwd|credential|auth"
_QUERY_NAME = rf"[^=&;#?\s]*(?:{_SECRET_WORDS})[^=&;#?\s]*"
_QUERY = re.compile(rf"(?i)(?P<sep>&amp;|[?&;])(?P<name>{_QUERY_NAME})=(?P<value>[^&;#\s'\"<>]*)")
_PAIR = re.compile(
    r"(?i)\b(?P<name>[\w.-]*(?:secret|token|signature|password|passwd|credential|access_?key"
    r"|api_?key)(?:_?(?:id|value|key))?)=(?P<value>[^\s&;,'\")\]}]+)"
)

_remembered: set[str] = set()


def userinfo(url: str) -> str | None:
    """The user-information part of ``scheme://USERINFO@host/...`` as typed, or None.

    It runs to the last ``@`` of the URL, so a secret holding ``/``, ``@`` or ``:`` is taken
    whole; what precedes the first ``@`` must look like user information (no ``/``, or a
    ``:`` before its first ``/``), so ``s3://bucket/name@v1`` has none.
    """
    _scheme, sep, rest = url.partition("://")
    rest = rest.lstrip("/")  # fsspec writes memory:///KEY:SECRET@bucket for memory://KEY:…
    if not sep or "@" not in rest:
        return None
    head = rest[: rest.index("@")]
    if "/" in head and ":" not in head.split("/", 1)[0]:
        return None
    return rest[: rest.rindex("@")]


def redact_url(url: str) -> str:
    """``url`` with its user information and secret query values replaced by ``***``."""
    info = userinfo(url)
    if info is not None:
        scheme, _sep, rest = url.partition("://")
        slashes = rest[: len(rest) - len(rest.lstrip("/"))]
        url = f"{scheme}://{slashes}{MASK}{rest[len(slashes) + len(info) :]}"
    return _QUERY.sub(lambda m: f"{m['sep']}{m['name']}={MASK}" if m["value"] else m[0], url)


def _secrets() -> list[str]:
    """Known secret values, longest first (a secret containing another is masked whole)."""
    values = set(_remembered)
    for name in SECRET_ENV:
        values.add(os.environ.get(name, ""))
    for name in ENDPOINT_ENV:
        values.update(_url_secrets(os.environ.get(name, "")))
    return sorted((v for v in values if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


def _url_secrets(text: str) -> set[str]:
    found: set[str] = set()
    for m in _URL.finditer(text or ""):
        info = userinfo(m[0])
        if info:
            password = info.split(":", 1)[1] if ":" in info else ""
            for v in (info, password):
                found.update({v, unquote(v)})
        for q in _QUERY.finditer(m[0]):
            found.update({q["value"], unquote(q["value"])})
    return found


def remember_argv(argv: list[str]) -> None:
    """Remember the credentials in the command line's URLs, to mask them wherever they show
    up later (also where a backend quotes them without the URL around them)."""
    for arg in argv:
        _remembered.update(_url_secrets(str(arg)))


def forget() -> None:
    """Drop what :func:`remember_argv` remembered (tests; a long-lived library caller)."""
    _remembered.clear()


def redact_text(text: Any) -> str:
    """``text`` with every credential iobench can recognise replaced by ``***``."""
    return _redact(str(text), _secrets())


def _redact(text: str, secrets: list[str]) -> str:
    for value in secrets:
        text = text.replace(value, MASK)
    text = _URL.sub(lambda m: redact_url(m[0]), text)
    return _PAIR.sub(lambda m: f"{m['name']}={MASK}", text)


def redact_obj(obj: Any, _secrets_: list[str] | None = None) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with every string redacted."""
    secrets = _secrets() if _secrets_ is None else _secrets_
    if isinstance(obj, str):
        return _redact(obj, secrets)
    if isinstance(obj, dict):
        return {k: redact_obj(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v, secrets) for v in obj]
    return obj


# -- the terminal -----------------------------------------------------------------------------

_BIDI = {0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _escape_char(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def escape_controls(text: str) -> str:
    """Control characters (escape sequences, carriage returns, C1 codes, bidi overrides) and
    undecodable bytes of ``text`` written as Python writes them (``\\x1b``); newlines and tabs
    kept. What a terminal shows is then what the name holds, and can always be encoded."""
    return _CONTROL.sub(lambda m: _escape_char(m[0]), text)


def for_terminal(text: Any) -> str:
    """What stdout and stderr get: :func:`redact_text`, then :func:`escape_controls`."""
    return escape_controls(redact_text(text))


_SGR = re.compile("(\x1b\\[[0-9;]*m)")


def for_terminal_styled(text: str) -> str:
    """:func:`for_terminal` of everything but ANSI SGR colour codes (``ESC [ ... m``), which
    are kept: for text whose own parts were passed through :func:`for_terminal` before the
    colour codes were added (the coloured report). Every other control character is escaped."""
    return "".join(part if i % 2 else for_terminal(part) for i, part in enumerate(_SGR.split(text)))


def for_markdown(text: str) -> str:
    """A text from a run (a phase, target or workload name: anything) as inert markdown, for
    ``report --markdown`` and ``compare --format markdown`` alike: HTML (``<script>``) as
    entities, as the HTML page has it, and a table's ``|``, backslashes and newlines escaped."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def storable(text: str) -> str:
    """``text`` encodable as UTF-8 (Parquet strings, HTML): an undecodable byte of a path
    (``\\udcff``) becomes ``\\xff``; everything else is kept."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return re.sub("[\ud800-\udfff]", lambda m: _escape_char(m[0]), text)
