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
                       (``*.sql``, ``*.dump``, ``*.bak`` copies), and any file whose first
                       bytes show a database or a dump (``SQLite format 3``,
                       ``-- PostgreSQL database dump``, ``-- MySQL dump``...),
                       ``manage.py dumpdata`` output (JSON, JSON lines, YAML, XML) and
                       Terraform state (``*.tfstate*``, ``"terraform_version"``) by content
``key_material``       ``.key .pem .crt .cer .der .p12 .pfx .jks .keystore``, ``id_rsa*``,
                       ``*.tfvars``, ``netrc`` / ``pgpass`` / ``htpasswd``, and a
                       service-account key (``"type": "service_account"``) by content
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
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django_webfetch.net.errors import WebFetchError
from django_webfetch.text.patterns import compile_pattern

__all__ = [
    "MAX_PATH_CHARS",
    "REDACTED",
    "SNIFF_BYTES",
    "PathDenied",
    "SourcePathGuard",
    "redact_line",
    "redact_lines",
    "redact_text",
    "sniff_database",
    "sniff_reason",
]

MAX_PATH_CHARS = 1024

_KEY_SUFFIXES = frozenset(
    {
        ".key",
        ".pem",
        ".crt",
        ".cer",
        ".der",
        ".p12",
        ".pfx",
        ".jks",
        ".keystore",
        ".p8",
        ".ppk",
        ".keytab",
    }
)
#: Key and credential files by name: SSH keys (``id_rsa``, ``id_ed25519_old``), encrypted
#: stores, ``netrc`` / ``pgpass`` / ``htpasswd`` without their dot, Terraform variable files
#: (``prod.tfvars``, ``x.auto.tfvars.json``), a ``service-account*.json`` key.
_KEY_NAMES = compile_pattern(
    r"^id_(?:rsa|dsa|ecdsa|ed25519)|^.*\.(?:gpg|asc|kdbx|tfvars)$|^_?(?:netrc|pgpass)$|"
    r"^htpasswd$|^.*\.htpasswd$|^service[_-]?account.*\.json$"
)
#: Databases and database dumps, as a class: SQLite and other engines' files, their
#: journals, and SQL dumps (``backup.sql``, ``db.dump``; ``.bak``/``.gz`` copies of them
#: are caught by the dotted-prefix rule).  ``sniff_database`` catches them by content.
_DB_NAME = compile_pattern(
    r"\.(?:sqlite3?|db3?|s3db|sl3|dump|rdb|mdb|ldb|kdb|accdb|frm|ibd|myd|sql|psql|pgsql|"
    r"pgdump|dmp|bson|tfstate)(?:-(?:wal|shm|journal))?$"
)
#: The interpreter tag of a compiled module (``prod_settings.cpython-311.pyc``).
_PYC_TAG = compile_pattern(r"\.(?:cpython|pypy|graalpy)[0-9a-z_\-]*(\.py[co])$")
#: The first bytes of a database file or a database dump, whatever its name.
_DUMP_SIGNATURES = (
    b"SQLite format 3\x00",
    b"-- PostgreSQL database dump",
    b"-- PostgreSQL database cluster dump",
    b"-- Dumped from database version",
    b"PGDMP",  # pg_dump's custom format
    b"-- MySQL dump",
    b"-- MariaDB dump",
    b"/*!40101 SET",  # mysqldump's preamble
    b"PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;",  # sqlite3's .dump
    b"\x00\x06\x15\x61",  # Berkeley DB hash
)
#: Dumps by structure (on RE2): ``manage.py dumpdata`` output in each of its formats
#: (JSON array ``[{"model": "``, JSON lines ``{"model": "app.model", "pk"``, YAML
#: ``- model:``, XML ``<django-objects``) and Terraform state (``"terraform_version"``).
_DUMP_SHAPES = compile_pattern(
    rb'^\[\s*\{\s*"model"\s*:\s*"'
    rb'|^\{\s*"model"\s*:\s*"[A-Za-z0-9_]+\.[A-Za-z0-9_]+"\s*,\s*"(?:pk|fields)"'
    rb"|^- model:[ \t]"
    rb"|<django-objects[\s>]"
    rb'|"terraform_version"\s*:'
)
#: Key material by content: a Google service-account key (or any JSON with a
#: ``"private_key"`` member).  PEM blocks are blanked line by line by the redactor.
_KEY_SHAPES = compile_pattern(rb'"type"\s*:\s*"service_account"|"private_key"\s*:')
#: How much of a file ``sniff_database`` reads.
SNIFF_BYTES = 4096


def sniff_database(head: bytes) -> bool:
    """Whether the first bytes of a file show a database or a database dump."""
    return sniff_reason(head) == "database_file"


def sniff_reason(head: bytes) -> str | None:
    """The refused class the first bytes of a file show (``database_file``: a database, a
    database dump, a ``dumpdata`` fixture, Terraform state; ``key_material``: a
    service-account key), or ``None``."""
    head = head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n")
    if any(signature in head for signature in _DUMP_SIGNATURES) or _DUMP_SHAPES.search(head):
        return "database_file"
    if _KEY_SHAPES.search(head):
        return "key_material"
    return None


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


def _name_reason(name: str, *, whole: bool) -> str | None:
    """The denied class of one (casefolded) file name; ``whole``: the complete name, not a
    prefix of it (a bare ``settings`` is refused as a package only when it is the name)."""
    name = name.rstrip(" .~")
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    suffix = f".{suffix}" if suffix else ""
    if (whole and name == "settings") or (
        suffix in {".py", ".pyc", ".pyo", ".pyi"}
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


def _component_reason(part: str) -> str | None:
    if part.startswith("."):
        return "dot_segment"
    # Trailing spaces and dots are dropped by some file systems (``settings.py.``).
    name = part.casefold().rstrip(" .")
    if "secret" in name or "credential" in name:
        return "credential_name"
    name = _PYC_TAG.sub(lambda m: m.group(1), name)
    # Backup, editor and copy variants keep the original name as a prefix
    # (``settings.py~``, ``settings.py.bak``, ``db.sqlite3.1``, ``server.key.orig``): every
    # dotted prefix of the name is judged like the name itself.
    pieces = name.split(".")
    for count in range(len(pieces), 0, -1):
        reason = _name_reason(".".join(pieces[:count]), whole=count == len(pieces))
        if reason is not None:
            return reason
    return None


def _parts_reason(parts: Iterable[str]) -> str | None:
    for part in parts:
        reason = _component_reason(part)
        if reason is not None:
            return reason
    return None


def _fd_mount_id(fd: int) -> int | None:
    """The mount id of an open descriptor (``/proc/self/fdinfo``), ``None`` without /proc."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as fh:
            info = fh.read(4096)
    except OSError:
        return None
    for line in info.split(b"\n"):
        if line.startswith(b"mnt_id:"):
            try:
                return int(line[7:].strip())
            except ValueError:  # pragma: no cover - the kernel writes a number
                return None
    return None  # pragma: no cover - every Linux since 3.15 reports mnt_id


def _path_mount_id(path: str) -> int | None:
    """The mount id of the object at ``path`` itself (never following a final symlink)."""
    flags = getattr(os, "O_PATH", 0) or os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        return _fd_mount_id(fd)
    finally:
        os.close(fd)


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
    #: Files and directories named by the site's settings that hold private data: the
    #: settings module itself (whatever its name), session files, file caches, upload
    #: temporaries, SQLite databases.  Refused as ``settings_path``.
    private_paths: tuple[str, ...] = ()
    _device: int = field(default=-1, init=False, repr=False, compare=False)
    _mount: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        root = os.path.realpath(os.fspath(self.root))
        object.__setattr__(self, "root", root)
        try:
            device = os.stat(root).st_dev
        except OSError:
            device = -1
        object.__setattr__(self, "_device", device)
        object.__setattr__(self, "_mount", _path_mount_id(root))
        object.__setattr__(
            self,
            "denied_roots",
            tuple(os.path.realpath(os.fspath(d)) for d in self.denied_roots if d),
        )
        object.__setattr__(
            self,
            "private_paths",
            tuple(os.path.realpath(os.fspath(d)) for d in self.private_paths if d),
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
        for private in self.private_paths:
            if _within(real, private):
                raise PathDenied("settings_path")
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
        self._check_mount(_path_mount_id(real))
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

    def _check_mount(self, mount: int | None) -> None:
        """Same mount as the root.  A bind mount of a directory or file from the SAME file
        system keeps ``st_dev`` (and a bound file keeps one name), so only the mount id
        tells ``mount --bind /home/me/private <root>/data`` apart (``other_filesystem``)."""
        if self._mount is not None and mount != self._mount:
            raise PathDenied("other_filesystem")

    def resolve_absolute(self, path: object) -> tuple[str, str] | None:
        """For paths that came from elsewhere (traceback frames): the real path and its
        relative form when it is a readable project file, else ``None`` (never raises)."""
        if not isinstance(path, str) or not path or "\x00" in path or len(path) > 4096:
            return None
        try:
            real = os.path.realpath(path)
            shown = self.check_real(real)
            self._check_file(os.stat(real))
            self._check_mount(_path_mount_id(real))
        except (PathDenied, OSError, ValueError):
            return None
        return real, shown

    def allows_dir(self, real_dir: str) -> bool:
        """Whether a search may descend into a (real) directory."""
        if real_dir == self.root:
            return True
        try:
            self.check_real(real_dir)
            if os.lstat(real_dir).st_dev != self._device:
                return False
            self._check_mount(_path_mount_id(real_dir))
            return True
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
            self._check_mount(_fd_mount_id(fd))
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
            # Databases and dumps as a class, whatever the file is called.
            reason = sniff_reason(os.pread(fd, SNIFF_BYTES, 0))
            if reason is not None:
                raise PathDenied(reason)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise


# -- redaction ------------------------------------------------------------------------------

REDACTED = "[redacted]"

# Every pattern below runs on RE2 (linear time): the text is a log line an
# anonymous client shaped (a 600-character ``Host`` header of ``tokentoken…`` made the
# backtracking version cubic) or a source file anyone who can commit wrote.  RE2 has no
# look-around and no backreference, so those are written out as alternatives.
_SENSITIVE = (
    r"(?:secret|passw(?:or)?d|passwd|pwd|pass[_-]?phrase|token|api[_-]?key|apikey|"
    r"private[_-]?key|access[_-]?key|auth[_-]?key|credential|dsn|signing[_-]?key|"
    r"session[_-]?key|client[_-]?secret|webhook[_-]?url|encryption[_-]?key|salt|"
    r"session[_-]?id|sessid|fernet|hmac|cookie)"
)
_NAME_CHARS = r"[A-Za-z0-9_.\-]"
#: A sensitive name: one that contains a sensitive word, or ends in ``_KEY`` / ``_PASS``
#: (``FERNET_KEY``, ``HMAC_KEY``, ``SMTP_PASS``; a bare ``key`` or ``pass`` is code).
_NAME = rf"(?:{_NAME_CHARS}*{_SENSITIVE}{_NAME_CHARS}*|{_NAME_CHARS}*[_.\-](?:key|pass|pw|pin))"
#: ``NAME = value``, ``NAME: value``, ``"NAME": value``, ``NAME=value`` (env files),
#: ``environ["NAME"] = value``, and a comparison with a literal (``token == "abc"``).
#: The value may be empty (it is then on the following line).  Two alternatives, one
#: per operator kind: ``=`` is not ``==``, and a comparison counts when a literal (not a
#: name, ``token == expected``) follows it.
_LEAD = rf"""["'`]?{_NAME}["'`]?\]?[ \t]*"""
_ASSIGNMENT = compile_pattern(
    rf"""(?i)(?P<lead>{_LEAD}(?::=|:|!?=)[ \t]*)(?P<value>(?:[^=].*)?)$"""
    rf"""|(?P<lead2>{_LEAD}[=!]=[ \t]*)(?P<value2>[^A-Za-z_( \t].*)$"""
)
#: A quoted sensitive name passed along with its value: ``setdefault("SECRET_KEY", v)``,
#: ``setattr(s, "API_TOKEN", v)``, ``config.set("db", "password", v)``,
#: ``env("X_KEY", default=v)``.
_CALL = compile_pattern(
    rf"""(?i)(?P<lead>(?:"{_NAME}"|'{_NAME}'|`{_NAME}`)[ \t]*,[ \t]*)(?P<value>.*)$"""
)
#: A command-line flag: ``--password value``.
_FLAG = compile_pattern(
    r"(?i)([ \t]-{1,2}[A-Za-z0-9_\-]*" + _SENSITIVE + r"[A-Za-z0-9_\-]*[ \t]+)([^ \t]+)"
)
#: Positional credentials: ``auth=(user, pw)``, ``HTTPBasicAuth(user, pw)``,
#: ``smtp.login(user, pw)``, ``.authenticate(user, pw)``: the second argument.
_QUOTED = r"""(?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')"""
_POSITIONAL = compile_pattern(
    r"(?i)((?:\bauth[ \t]*=[ \t]*[A-Za-z_.]*|[A-Za-z_]*auth|\.login|\.authenticate|"
    r"\bcredentials)[ \t]*\([ \t]*(?:" + _QUOTED + r"|[^,()\"']*)"
    r"[ \t]*,[ \t]*(?:(?:user(?:name)?|password)[ \t]*=[ \t]*)?)(" + _QUOTED + r"|[^,()\s]+)"
)
#: Command lines: ``mysql -pPW`` (attached), ``sshpass -p PW``, ``redis-cli -a PW``,
#: ``curl -u user:PW`` / ``--user user:PW``.
_COMMAND = compile_pattern(
    r"(\b(?i:mysql[a-z_-]*|mariadb[a-z_-]*)\b[^\n]*?[ \t]-p)([^ \t]+)"
    r"|(\b(?i:sshpass)\b[^\n]*?[ \t]-p[ \t]*)([^ \t]+)"
    r"|(\b(?i:redis-cli)\b[^\n]*?[ \t]-a[ \t]*)([^ \t]+)"
    r"|([ \t](?:-u|--user|--proxy-user)(?:[ \t]+|=)['\"]?[^ \t:'\"]*:)([^ \t'\"]+)"
)
#: Header values: ``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie``,
#: ``X-Api-Key``, ``X-Auth-Token`` (``Name: value`` or a quoted dict entry).  The auth
#: scheme (``Bearer``) is kept.
_HEADER = compile_pattern(
    r"""(?i)(\b(?:proxy-)?authorization|\b(?:set-)?cookie|\bx-(?:api|auth)-(?:key|token)|"""
    r"""\bhttp_(?:authorization|cookie))(["']?[ \t]*[:=][ \t]*["']?"""
    r"""(?:(?:bearer|basic|token|digest|negotiate|ntlm|hmac|aws4-hmac-sha256)[ \t]+)?)"""
    r"""([^"'\n]+)"""
)
#: ``scheme://user:password@host`` (the user kept) and ``scheme://token@host``.
_DSN = compile_pattern(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/?#@]*:)([^\s@/]+)(@)")
_USERINFO = compile_pattern(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s:/?#@\[\]]+)(@)")
_BEARER = compile_pattern(r"(?i)\b((?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=\-]{8,}")
_AWS = compile_pattern(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
#: Values whose shape alone says "credential", whatever name they are assigned to.
_TOKEN_SHAPES = compile_pattern(
    "|".join(
        [
            r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{8,}",
            r"\bwhsec_[0-9A-Za-z]{16,}",
            r"\bsk-[A-Za-z0-9_\-]{20,}",
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_\-]{16,}",
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
            r"\bAIza[0-9A-Za-z_\-]{30,}",
            r"\bya29\.[0-9A-Za-z_\-]{16,}",
            r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
            r"\bnpm_[A-Za-z0-9]{30,}",
            r"\bpypi-[A-Za-z0-9_\-]{30,}",
            r"\bhf_[A-Za-z0-9]{30,}",
            r"\bdop_v1_[0-9a-f]{40,}",
            r"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}",
            r"\bshp(?:at|ss|ca|pa)_[0-9a-fA-F]{20,}",
            r"\bdapi[0-9a-f]{32}",
            r"\bkey-[0-9a-f]{32}",
            # A JWT (header.payload.signature; the header is JSON: "eyJ").
            r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        ]
    )
)
#: Capability URLs (whoever holds the URL holds the right), by shape: webhook paths
#: (Slack, Discord), a Telegram bot token (``bot<id>:<token>``), and signature / token /
#: key query parameters as a class (Azure SAS ``sig=``, S3 ``X-Amz-Signature``, GCS
#: ``X-Goog-Signature``, ``?token=``, ``?api_key=``...).  The path or value is redacted.
_CAPABILITY = compile_pattern(
    r"(?i)(\bhooks\.slack\.com/(?:services|workflows|triggers)/)([^\s\"'<>`]+)"
    r"|(\bdiscord(?:app)?\.com/api/webhooks/[0-9]+/)([^\s\"'<>`?#]+)"
    r"|(\bbot[0-9]{5,}:)([A-Za-z0-9_\-]{20,})"
    r"|([?&;](?:sig|signature|[a-z0-9_.\-]*-(?:signature|credential|security-token)|token|"
    r"access_token|refresh_token|id_token|key|api_key|api-key|apikey|secret|client_secret|"
    r"password|passwd|pwd|auth|code)=)([^&\s#\"'<>`]+)"
)
#: Keys inside a semicolon-separated connection string, whatever name the string is
#: assigned to (``AccountKey=``, ``SharedAccessKey=``, ``Password=``, ``Pwd=``).
_CONNECTION = compile_pattern(
    r"(?i)((?:^|[;\s\"'`])(?:account[ _]?key|shared[ _]?access[ _]?key|"
    r"shared[ _]?access[ _]?signature|password|pwd)[ \t]*=[ \t]*)([^;\s\"'`]+)"
)
#: Django's generated ``SECRET_KEY`` shape, whatever it is assigned to.
_DJANGO_INSECURE = compile_pattern(r"\b(django-insecure-)([^\s\"'`]+)")
#: More command lines: npm's ``_auth=`` / ``_authToken=`` (``.npmrc``), ``sqlcmd -P PW``
#: (and ``bcp`` / ``osql`` / ``isql``), ``htpasswd -b [file] user PW`` (the last argument).
_COMMAND2 = compile_pattern(
    r"(?i)(:?\b_auth(?:token)?[ \t]*=[ \t]*)([^ \t\"'`]+)"
    r"|(\b(?:sqlcmd|bcp|osql|isql)\b[^\n]*?[ \t]-P[ \t]*)([^ \t]+)"
    r"|(\bhtpasswd\b[^\n]*?[ \t]-[A-Za-z]*b[^\n]*[ \t])([^ \t]+)[ \t]*$"
)
_PEM = compile_pattern(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|^PuTTY-User-Key-File-")
_KEY_END = compile_pattern(r"-----END |^Private-MAC:")
#: A value that names nothing secret (``primary_key=True``) is kept.
_KEPT_VALUES = frozenset({"true", "false", "none", "null"})
#: Cheap pre-check: a text whose casefolded form contains none of these words needs no
#: redaction (every pattern above needs one of them; plain substring tests run at C speed).
#: ``tests/diagnostics/test_redaction_dumps_and_forged_log_records.py`` checks every pattern's
#: trigger.
_TRIGGER_WORDS = (
    "secret", "passw", "pwd", "phrase", "token", "key", "credential", "dsn", "salt",
    "webhook", "://", "bearer", "basic", "akia", "asia", "sk_", "rk_", "pk_", "sk-", "ghp_",
    "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "aiza", "sg.", "eyj",
    "-----begin", "putty", "_pass", "-pass", ".pass", "_pw", "-pw", ".pw", "_pin", "-pin",
    ".pin", "session", "sessid", "fernet", "hmac", "cookie", "auth", "login", "credentials",
    "mysql", "mariadb", "sshpass", "redis-cli", "-u", "--user", "--proxy-user",
    "whsec_", "ya29.", "npm_", "pypi-", "hf_", "dop_v1_", "hvs.", "hvb.", "hvr.", "shpat_",
    "shpss_", "shpca_", "shppa_", "dapi", "sig", "hooks.slack", "discord", "bot",
    "django-insecure", "_auth", "sqlcmd", "bcp", "osql", "isql", "htpasswd",
    "accountkey", "account key", "account_key", "sharedaccess", "shared access",
    "shared_access", "pwd", "code=",
)  # fmt: skip


def _triggered(text: str) -> bool:
    folded = text.casefold()
    return any(word in folded for word in _TRIGGER_WORDS)


_TRIPLE = ("'" * 3, '"' * 3)
_STRINGS = compile_pattern("'{3}|\"{3}|'(?:\\\\.|[^'\\\\])*'|\"(?:\\\\.|[^\"\\\\])*\"")


def _pairs(match: Any) -> str:
    """Keep each odd group (the lead), redact each even one (the value) that matched."""
    out: list[str] = []
    for index in range(1, match.re.groups + 1, 2):
        lead = match.group(index)
        if lead is not None:
            out.append(f"{lead}{REDACTED}")
    return "".join(out)


def _redact_simple(line: str) -> str:
    line = _DSN.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", line)
    line = _USERINFO.sub(
        lambda m: m.group(0) if m.group(2) == REDACTED else f"{m.group(1)}{REDACTED}@", line
    )
    line = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", line)
    line = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", line)
    line = _AWS.sub(REDACTED, line)
    line = _TOKEN_SHAPES.sub(REDACTED, line)
    line = _POSITIONAL.sub(lambda m: f"{m.group(1)}{REDACTED}", line)
    line = _COMMAND.sub(_pairs, line)
    line = _CAPABILITY.sub(_pairs, line)
    line = _CONNECTION.sub(_pairs, line)
    line = _DJANGO_INSECURE.sub(_pairs, line)
    line = _COMMAND2.sub(_pairs, line)
    return str(_FLAG.sub(lambda m: f"{m.group(1)}{REDACTED}", line))


def _sensitive_value(line: str) -> tuple[int, str, bool] | None:
    """``(offset, raw value, may continue)`` of the earliest sensitive assignment on the line.

    An empty value continues on the next line only for an assignment (``NAME =``), a quoted
    key (``"PASSWORD":``), a key alone on its line (YAML, INI) or a call (``setdefault(…,``);
    ``if password:`` / ``for token in tokens:`` are code, and the next line is kept.
    """
    found: list[tuple[int, str, bool]] = []
    match = _ASSIGNMENT.search(line)
    if match is not None:
        index = 1 if match.group(1) is not None else 3
        lead, value = match.group(index), match.group(index + 1)
        offset = match.end(index)
        before = line[: match.start(index)].strip()
        continues = "=" in lead or lead[:1] in {"'", '"', "`"} or before in {"", "-", "#"}
        if value.strip().rstrip(",;)]} ").casefold() not in _KEPT_VALUES:
            found.append((offset, value, continues))
    match = _CALL.search(line)
    if match is not None:
        found.append((match.end(1), match.group(2), True))
    return min(found) if found else None


class _Redactor:
    """Line-by-line redaction that remembers a private-key block and a sensitive value that
    continues past its line: an open bracket or triple quote, a trailing backslash, or
    ``NAME =`` / ``"NAME":`` with the value on the next non-blank line."""

    def __init__(self) -> None:
        self.in_key = False
        self.depth = 0
        self.quote: str | None = None
        self.pending = False

    def _track(self, text: str) -> None:
        """Update the continuation state from a value's raw text (or a continuation line)."""
        if self.quote is not None:
            end = text.find(self.quote)
            if end == -1:
                return
            text = text[end + 3 :]
            self.quote = None
        code: list[str] = []
        position = 0
        for match in _STRINGS.finditer(text):
            if self.quote is None:
                code.append(text[position : match.start()])
            token = match.group(0)
            if token in _TRIPLE:
                self.quote = None if self.quote == token else (self.quote or token)
            position = match.end()
        if self.quote is None:
            code.append(text[position:])
        rest = " ".join(code)
        opened = sum(rest.count(c) for c in "([{") - sum(rest.count(c) for c in ")]}")
        self.depth = max(self.depth + opened, 0)
        self.pending = self.depth == 0 and self.quote is None and text.rstrip().endswith("\\")

    def lines(self, run: list[str]) -> list[str]:
        """``line`` on each of ``run``; a run none of whose text holds a trigger word, met
        with nothing open (no key block, no continued value), is returned as it is in one
        check: each of its lines would be, and nothing would open."""
        idle = not self.in_key and not self.depth and self.quote is None and not self.pending
        if idle and not _triggered("\n".join(run)):
            return run
        return [self.line(line) for line in run]

    def line(self, line: str) -> str:
        begins = _PEM.search(line) is not None
        if self.in_key or begins:
            if not self.in_key:
                self.in_key = "-----END" not in line  # a one-line block ends where it begins
            elif _KEY_END.search(line):
                self.in_key = False
            return REDACTED
        if self.depth > 0 or self.quote is not None or self.pending:
            if self.pending and not line.strip():
                return line
            self.pending = False
            self._track(line)
            return REDACTED
        if not _triggered(line):
            return line
        line = _redact_simple(line)
        found = _sensitive_value(line)
        if found is None:
            return line
        offset, value, continues = found
        if value.strip().strip("\"'`,;)]}") == REDACTED:
            return line  # already redacted by a shape
        if not value.strip():
            self.pending = continues
            return line
        self._track(value)
        return line[:offset] + REDACTED


def redact_line(line: str) -> str:
    """The line with credential-looking values replaced by ``[redacted]`` (one line, no
    context; ``redact_lines`` also follows a value onto its continuation lines)."""
    return _Redactor().line(line)


#: Lines looked at together by ``redact_lines``: a file of 4 MiB has some 700,000 lines, and
#: most runs of them hold no trigger word.
_RUN = 512


def redact_lines(lines: Iterable[str]) -> Iterator[str]:
    """``redact_line`` on every line, remembering key blocks and continued values."""
    redactor = _Redactor()
    run: list[str] = []
    for line in lines:
        run.append(line)
        if len(run) == _RUN:
            yield from redactor.lines(run)
            run = []
    yield from redactor.lines(run)


def redact_text(text: str) -> str:
    """``redact_lines`` over a whole text; unchanged when nothing in it looks sensitive."""
    if not _triggered(text):
        return text
    return "\n".join(redact_lines(text.split("\n")))
