"""``SourcePathGuard``: the one place that decides "may a tool read this project file".

Fail closed, no bypass parameter.  Every access goes through ``os.path.realpath`` and must
stay inside the project root: one containment check defeats ``../`` and symlink escapes
alike.  Whatever the root, these are refused (a stable ``reason`` each):

=====================  ==========================================================================
``invalid_path``       not text, empty, longer than 1,024 characters, NUL / control / format
                       characters, backslashes, or not stable under Unicode NFKC (look-alikes
                       such as fullwidth letters that some file systems fold onto ASCII names)
``absolute_path``      an absolute path or ``~`` (paths are relative to the project root)
``outside_root``       the real path leaves the project root (``../``, symlinks, bind mounts)
``dot_segment``        a component starting with ``.`` (``.env``, ``.git``, ``.venv``, ``..``)
``media_root``         inside ``MEDIA_ROOT`` or a static root (user uploads, collected files)
``settings_file``      ``settings*.py``, ``*settings.py``, a ``settings`` package
``credential_name``    any component mentioning ``secret`` or ``credential`` (``secrets.py``)
``database_file``      ``*.sqlite3``, ``*.sqlite``, ``*.db`` and their journals, dumps
``key_material``       ``.key .pem .crt .cer .der .p12 .pfx .jks .keystore``, ``id_rsa``...
``env_file``           ``*.env`` (``production.env``)
``not_found``          no such file
``not_a_file``         a directory, FIFO, device or socket
``other_filesystem``   on another device than the root (a bind mount inside the root)
``hard_link``          a file with more than one name (a hard link can point anywhere)
=====================  ==========================================================================

The rules run on the requested path *and* on the real path relative to the root, and once
more on the path of the file descriptor actually opened (``/proc/self/fd``), so a component
swapped for a symlink between the check and the ``open`` is caught (``changed``).

``redact_line`` blanks the values of credential-looking assignments on every line a tool
returns: ``SECRET_KEY = …``, ``PASSWORD``, ``TOKEN``, ``API_KEY``, DSNs with passwords,
private-key blocks.  Pure Python: no Django import.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO

from django_webfetch.net.errors import WebFetchError

__all__ = [
    "MAX_PATH_CHARS",
    "REDACTED",
    "PathDenied",
    "SourcePathGuard",
    "redact_line",
    "redact_text",
]

MAX_PATH_CHARS = 1024

_KEY_SUFFIXES = frozenset(
    {".key", ".pem", ".crt", ".cer", ".der", ".p12", ".pfx", ".jks", ".keystore", ".p8", ".ppk"}
)
_KEY_NAMES = re.compile(r"^id_(rsa|dsa|ecdsa|ed25519)(\.pub)?$|^.*\.(gpg|asc|kdbx)$")
_DB_NAME = re.compile(r"\.(sqlite3?|db3?|s3db|sl3|dump)(-(wal|shm|journal))?$")


class PathDenied(WebFetchError):
    """The source path guard refused a path.  ``reason`` names the rule; ``str(exc)`` is
    built from the reason only, never from the path."""

    code = "path_denied"

    def __init__(self, reason: str, *, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"path refused by rule {reason!r}", detail=detail)


def _bad_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    # Cc control, Cf format (bidi overrides, zero-width), Co/Cs/Cn private/surrogate/unassigned,
    # Zl/Zp line/paragraph separators, Zs spaces other than the ASCII space.
    return category in {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"} or (
        category == "Zs" and ch != " "
    )


def _component_reason(part: str) -> str | None:
    if part.startswith("."):
        return "dot_segment"
    # Trailing spaces and dots are dropped by some file systems (``settings.py.``).
    name = part.casefold().rstrip(" .")
    if "secret" in name or "credential" in name:
        return "credential_name"
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    suffix = f".{suffix}" if suffix else ""
    if name == "settings" or (
        suffix in {".py", ".pyc", ".pyi"}
        and (stem.startswith("settings") or stem.endswith("settings"))
    ):
        return "settings_file"
    if _DB_NAME.search(name):
        return "database_file"
    if suffix in _KEY_SUFFIXES or _KEY_NAMES.match(name):
        return "key_material"
    if suffix == ".env":
        return "env_file"
    return None


def _parts_reason(parts: Iterable[str]) -> str | None:
    for part in parts:
        reason = _component_reason(part)
        if reason is not None:
            return reason
    return None


def _within(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it; both are absolute, normalised real paths."""
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path == root or path.startswith(prefix)


@dataclass(frozen=True)
class SourcePathGuard:
    """Decide and open project files.  ``root`` is the project root; ``denied_roots`` are
    directories refused wholesale (media and static roots).  Both are resolved with
    ``realpath`` when the guard is built."""

    root: str
    denied_roots: tuple[str, ...] = ()
    _device: int = field(default=-1, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        root = os.path.realpath(os.fspath(self.root))
        object.__setattr__(self, "root", root)
        try:
            device = os.stat(root).st_dev
        except OSError:
            device = -1
        object.__setattr__(self, "_device", device)
        object.__setattr__(
            self,
            "denied_roots",
            tuple(os.path.realpath(os.fspath(d)) for d in self.denied_roots if d),
        )

    # -- deciding -----------------------------------------------------------------------------

    def check_text(self, path: object) -> str:
        """The syntactic rules on a requested relative path; returns it normalised."""
        if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
            raise PathDenied("invalid_path")
        if any(_bad_char(ch) for ch in path) or "\\" in path:
            raise PathDenied("invalid_path")
        if unicodedata.normalize("NFKC", path) != path:
            raise PathDenied("invalid_path", detail="not NFKC-stable (look-alike characters)")
        if path.startswith(("/", "~")) or os.path.isabs(path):
            raise PathDenied("absolute_path")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not parts:
            raise PathDenied("not_a_file")
        reason = _parts_reason(parts)
        if reason is not None:
            raise PathDenied(reason)
        return "/".join(parts)

    def check_real(self, real: str) -> str:
        """The containment and name rules on a real (symlink-free) absolute path; returns
        the path relative to the root."""
        if not _within(real, self.root) or real == self.root:
            raise PathDenied("outside_root")
        for denied in self.denied_roots:
            if _within(real, denied):
                raise PathDenied("media_root")
        if not os.path.isabs(real) or os.path.normpath(real) != real:
            raise PathDenied("outside_root")
        prefix = len(self.root) if self.root.endswith(os.sep) else len(self.root) + 1
        relative = real[prefix:]
        reason = _parts_reason(relative.split(os.sep))
        if reason is not None:
            raise PathDenied(reason)
        return relative

    def resolve(self, path: object) -> tuple[str, str]:
        """``(real absolute path, path relative to the root)`` of a requested relative path,
        or ``PathDenied``.  The file must exist and be a regular file."""
        relative = self.check_text(path)
        real = os.path.realpath(os.path.join(self.root, relative))
        shown = self.check_real(real)
        try:
            info = os.stat(real)
        except OSError as exc:
            raise PathDenied("not_found") from exc
        self._check_file(info)
        return real, shown

    def _check_file(self, info: os.stat_result) -> None:
        """A regular file, on the root's file system, with one name.

        ``realpath`` sees symlinks but neither bind mounts nor hard links: a bind mount of
        ``/etc`` inside the root is another device, and a hard link to a file elsewhere has
        more than one name.  Both are refused.
        """
        if not stat.S_ISREG(info.st_mode):
            raise PathDenied("not_a_file")
        if info.st_dev != self._device:
            raise PathDenied("other_filesystem")
        if info.st_nlink > 1:
            raise PathDenied("hard_link")

    def resolve_absolute(self, path: object) -> tuple[str, str] | None:
        """For paths that came from elsewhere (traceback frames): the real path and its
        relative form when it is a readable project file, else ``None`` (never raises)."""
        if not isinstance(path, str) or not path or "\x00" in path or len(path) > 4096:
            return None
        try:
            real = os.path.realpath(path)
            shown = self.check_real(real)
            self._check_file(os.stat(real))
        except (PathDenied, OSError, ValueError):
            return None
        return real, shown

    def allows_dir(self, real_dir: str) -> bool:
        """Whether a search may descend into a (real) directory."""
        if real_dir == self.root:
            return True
        try:
            self.check_real(real_dir)
            return os.lstat(real_dir).st_dev == self._device
        except (PathDenied, OSError):
            return False

    # -- opening --------------------------------------------------------------------------------

    def open(self, real: str) -> IO[bytes]:
        """Open a path ``resolve`` returned, and re-check what was actually opened.

        ``O_NOFOLLOW`` refuses a final component swapped for a symlink, ``O_NONBLOCK`` keeps a
        FIFO from blocking the worker, and the opened descriptor's own path
        (``/proc/self/fd``) goes through the containment and name rules again, so an
        intermediate directory swapped for a symlink after the check is caught too.
        """
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        flags |= getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags)
        except OSError as exc:
            raise PathDenied("changed", detail="the file could not be opened safely") from exc
        try:
            info = os.fstat(fd)
            self._check_file(info)
            proc = f"/proc/self/fd/{fd}"
            if os.path.exists(proc):
                opened = os.readlink(proc)
                self.check_real(opened)
            else:  # pragma: no cover - Linux always has /proc here
                before = os.stat(real)
                if (before.st_dev, before.st_ino) != (info.st_dev, info.st_ino):
                    raise PathDenied("changed")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise


# -- redaction ------------------------------------------------------------------------------

REDACTED = "[redacted]"

_SENSITIVE = (
    r"(?:secret|passw(?:or)?d|passwd|pwd|token|api[_-]?key|apikey|private[_-]?key|"
    r"access[_-]?key|auth[_-]?key|credential|dsn|signing[_-]?key|session[_-]?key|"
    r"client[_-]?secret|webhook[_-]?url|encryption[_-]?key|salt)"
)
#: ``NAME = value``, ``NAME: value``, ``"NAME": value``, ``NAME=value`` (env files), not ``==``.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<lead>
      ["'`]?
      [A-Za-z0-9_.\-]*"""
    + _SENSITIVE
    + r"""[A-Za-z0-9_.\-]*
      ["'`]?
      \s*(?::=|:|=(?!=))\s*
    )
    (?P<value>\S.*)$
    """
)
#: ``scheme://user:password@host``
_DSN = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]*:)([^\s@/]+)(@)")
_BEARER = re.compile(r"(?i)\b((?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=\-]{8,}")
_AWS = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def redact_line(line: str) -> str:
    """The line with credential-looking values replaced by ``[redacted]``."""
    if _PEM.search(line):
        return REDACTED
    line = _DSN.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", line)
    line = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", line)
    line = _AWS.sub(REDACTED, line)
    match = _ASSIGNMENT.search(line)
    if match is not None and REDACTED not in match.group("value"):
        line = line[: match.start("value")] + REDACTED
    return line


def redact_text(text: str) -> str:
    """``redact_line`` on every line; a private-key block is blanked whole."""
    out: list[str] = []
    in_key = False
    for line in text.split("\n"):
        if _PEM.search(line):
            in_key = True
        if in_key:
            out.append(REDACTED)
            if "-----END" in line:
                in_key = False
            continue
        out.append(redact_line(line))
    return "\n".join(out)
