"""Database URLs: parsing, and keeping their credentials out of every text we emit.

The runner gets its target as one URL that may carry a password. Ptah never
prints it: every message built from an exception goes through :func:`scrub`,
which removes the URL's userinfo wherever it appears (whole URL, password,
percent-encoded or not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote, urlsplit

EngineName = Literal["postgres", "mysql", "sqlite"]

_SCHEMES: dict[str, EngineName] = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}


class UrlError(ValueError):
    """The URL cannot name a database Ptah knows how to open."""


@dataclass(frozen=True)
class DbUrl:
    """A parsed database URL. ``secrets`` are the strings no output may contain."""

    engine: EngineName
    scheme: str
    host: str = ""
    port: int | None = None
    user: str = ""
    password: str = field(default="", repr=False)
    database: str = ""
    path: str = ""
    query: str = ""

    @property
    def secrets(self) -> tuple[str, ...]:
        if not self.password:
            return ()
        return (self.password,)

    def redacted(self) -> str:
        """The URL without userinfo: safe to show."""
        if self.engine == "sqlite":
            return f"sqlite:///{self.path}"
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{self.host}{port}/{self.database}"

    def with_database(self, database: str) -> DbUrl:
        return DbUrl(
            engine=self.engine,
            scheme=self.scheme,
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            path=self.path,
            query=self.query,
        )


def parse_url(url: str) -> DbUrl:
    """Parse ``url``; errors never repeat the URL itself (it may hold a password)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise UrlError("database URL has no scheme (expected postgresql://, mysql://, sqlite://)")
    if "\0" in unquote(url):
        # No driver takes one (sqlite3 raised ValueError, an internal error), and the C
        # libraries would end the string there: a name that is not the one written.
        raise UrlError("database URL holds a NUL character (%00)")
    base = scheme.split("+", 1)[0].lower()
    engine = _SCHEMES.get(base)
    if engine is None:
        raise UrlError(f"unsupported database URL scheme {base[:20]!r}")
    if engine == "sqlite":
        # sqlite:////abs/path.db -> /abs/path.db ; sqlite:///rel.db -> rel.db ; sqlite:///:memory:
        rest = url.split("://", 1)[1]
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise UrlError("sqlite URL names no file")
        if "?" in path or "#" in path:
            # Taken as part of the name, "app.db?mode=ro" was a new, empty file beside
            # app.db: the URL's author meant options, which Ptah does not take.
            raise UrlError(
                "sqlite URL has a query or fragment (?... or #...); Ptah takes none:"
                " write the file's path alone (a '?' or '#' in a file name is %3F or %23)"
            )
        return DbUrl(engine="sqlite", scheme=base, path=unquote(path))
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed "[" of an IPv6 host, say; its text may hold the URL
        raise UrlError("database URL is malformed (its host part cannot be read)") from None
    try:
        port = parts.port
    except ValueError as exc:
        raise UrlError("database URL has an invalid port") from exc
    database = unquote(parts.path.lstrip("/"))
    return DbUrl(
        engine=engine,
        scheme=base,
        host=parts.hostname or "",
        port=port,
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        database=database,
        query=parts.query,
    )


# Any userinfo in any URL-looking text: scheme://user:pass@
_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")


def strip_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced: ``scheme://***@host``."""
    return _USERINFO.sub(r"\1***@", text)


def scrub(text: str, *secrets: str) -> str:
    """``text`` without URL userinfo and without any of ``secrets``."""
    text = strip_userinfo(text)
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return text
