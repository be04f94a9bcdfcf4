"""The source path guard, attacked: traversal, symlinks, look-alikes, NUL bytes, every denied
class, FIFOs, binary and huge files, a symlink swapped in after the check; and redaction."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.diagnostics.paths import (
    REDACTED,
    PathDenied,
    SourcePathGuard,
    redact_line,
    redact_text,
)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "views.py").write_text("def cart(request):\n    return 1 / 0\n")
    (root / "media").mkdir()
    (root / "media" / "upload.txt").write_text("user upload\n")
    (root / "collected").mkdir()
    (root / "collected" / "app.js").write_text("var x = 1;\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the root\n")
    guard = SourcePathGuard(str(root), (str(root / "media"), str(root / "collected")))
    return root, outside, guard


def reason(guard, path):
    with pytest.raises(PathDenied) as info:
        guard.resolve(path)
    assert str(info.value) == f"path refused by rule {info.value.reason!r}"
    return info.value.reason


def test_a_project_file_is_allowed(project):
    root, _, guard = project
    real, shown = guard.resolve("shop/views.py")
    assert real == str(root / "shop" / "views.py") and shown == "shop/views.py"
    assert guard.resolve("./shop//views.py")[1] == "shop/views.py"
    with guard.open(real) as fh:
        assert fh.read().startswith(b"def cart")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../outside/secret.txt", "dot_segment"),
        ("shop/../../outside/secret.txt", "dot_segment"),
        ("shop/..", "dot_segment"),
        ("/etc/passwd", "absolute_path"),
        ("//etc/passwd", "absolute_path"),
        ("~/x", "absolute_path"),
        ("~root/.ssh/id_rsa", "absolute_path"),
        ("shop\\..\\..\\outside", "invalid_path"),
        ("shop/views.py\x00.txt", "invalid_path"),
        ("\x00", "invalid_path"),
        ("shop/views.py\n", "invalid_path"),
        ("shop/\u202eyp.sweiv", "invalid_path"),  # bidi override
        ("shop/vi\u200bews.py", "invalid_path"),  # zero-width space
        ("\uff0e\uff0e/outside/secret.txt", "invalid_path"),  # fullwidth dots fold to ".."
        ("shop/\uff56iews.py", "invalid_path"),  # fullwidth v
        ("ｓｅｔｔｉｎｇｓ.py", "invalid_path"),
        ("shop/\u2024\u2024/x", "invalid_path"),  # one-dot leaders fold to ".."
        ("shop/views\u00a0.py", "invalid_path"),  # no-break space
        ("", "invalid_path"),
        ("x" * 1025, "invalid_path"),
        (".", "not_a_file"),
        ("shop", "not_a_file"),
        ("shop/missing.py", "not_found"),
    ],
)
def test_traversal_and_syntax_refusals(project, path, expected):
    assert reason(project[2], path) == expected


@pytest.mark.parametrize("value", [None, 3, b"shop/views.py", ["shop/views.py"]])
def test_non_text_paths(project, value):
    assert reason(project[2], value) == "invalid_path"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (".env", "dot_segment"),
        (".git/config", "dot_segment"),
        (".venv/lib/x.py", "dot_segment"),
        ("settings.py", "settings_file"),
        ("Settings.PY", "settings_file"),
        ("settings_production.py", "settings_file"),
        ("local_settings.py", "settings_file"),
        ("conf/settings/base.py", "settings_file"),
        ("settings.pyc", "settings_file"),
        ("settings.py.", "settings_file"),
        ("settings.py ", "settings_file"),
        ("server.key..", "key_material"),
        ("secrets.py", "credential_name"),
        ("secrets.json", "credential_name"),
        ("app/SECRET_stuff.txt", "credential_name"),
        ("google-credentials.json", "credential_name"),
        ("credentials/aws.txt", "credential_name"),
        ("db.sqlite3", "database_file"),
        ("data/app.sqlite", "database_file"),
        ("app.db", "database_file"),
        ("db.sqlite3-journal", "database_file"),
        ("db.sqlite3-wal", "database_file"),
        ("backup.dump", "database_file"),
        ("server.key", "key_material"),
        ("cert.pem", "key_material"),
        ("cert.crt", "key_material"),
        ("store.p12", "key_material"),
        ("store.pfx", "key_material"),
        ("keystore.jks", "key_material"),
        ("id_rsa", "key_material"),
        ("deploy/id_ed25519", "key_material"),
        ("production.env", "env_file"),
    ],
)
def test_every_denied_class(project, name, expected):
    root, _, guard = project
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("SECRET_KEY = 'x'\n")
    assert reason(guard, name) == expected
    # The same file through a harmless-looking symlink is refused on its real name.
    link = root / "innocent.txt"
    link.symlink_to(target)
    assert reason(guard, "innocent.txt") == expected
    # And a frame path pointing at it is never expanded.
    assert guard.resolve_absolute(str(target)) is None


def test_media_and_static_roots(project):
    root, _, guard = project
    assert reason(guard, "media/upload.txt") == "media_root"
    assert reason(guard, "collected/app.js") == "media_root"
    (root / "shop" / "avatar").symlink_to(root / "media")
    assert reason(guard, "shop/avatar/upload.txt") == "media_root"


def test_symlink_escapes(project):
    root, outside, guard = project
    (root / "etc").symlink_to("/etc")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "out").symlink_to(outside)
    (root / "shop" / "up").symlink_to("../..")
    (root / "loop").symlink_to(root / "loop")
    assert reason(guard, "etc/passwd") == "outside_root"
    assert reason(guard, "passwd") == "outside_root"
    assert reason(guard, "out/secret.txt") == "credential_name"
    (outside / "plain.txt").write_text("x")
    assert reason(guard, "out/plain.txt") == "outside_root"
    assert reason(guard, "shop/up/outside/plain.txt") == "outside_root"
    assert reason(guard, "loop") in {"not_found", "outside_root"}


def test_symlinked_directory_inside_the_root_is_fine(project):
    root, _, guard = project
    (root / "alias").symlink_to(root / "shop")
    assert guard.resolve("alias/views.py")[1] == "shop/views.py"


def test_root_itself_under_a_dot_directory_is_not_held_against_files(tmp_path):
    root = tmp_path / ".hidden" / "project"
    root.mkdir(parents=True)
    (root / "app.py").write_text("x = 1\n")
    guard = SourcePathGuard(str(root))
    assert guard.resolve("app.py")[1] == "app.py"
    # The guard resolves a symlinked root once, at construction.
    (tmp_path / "root-link").symlink_to(root)
    assert SourcePathGuard(str(tmp_path / "root-link")).resolve("app.py")[0] == str(root / "app.py")


def test_fifo_and_devices_are_not_files(project):
    root, _, guard = project
    os.mkfifo(root / "pipe")
    assert reason(guard, "pipe") == "not_a_file"
    (root / "null").symlink_to("/dev/null")
    assert reason(guard, "null") == "outside_root"


def test_fifo_swapped_in_after_the_check_does_not_block(project):
    root, _, guard = project
    target = root / "shop" / "swap.py"
    target.write_text("x = 1\n")
    real, _ = guard.resolve("shop/swap.py")
    target.unlink()
    os.mkfifo(target)
    # O_NONBLOCK: opening a FIFO with no writer returns at once, and it is not a file.
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(_open_reason(guard, real)))
    worker.start()
    worker.join(5)
    assert not worker.is_alive()
    assert result == ["not_a_file"]


def _open_reason(guard, real):
    try:
        guard.open(real).close()
    except PathDenied as exc:
        return exc.reason
    return "opened"


def test_symlink_swapped_in_after_the_check_is_caught(project):
    root, outside, guard = project
    target = root / "shop" / "race.py"
    target.write_text("x = 1\n")
    real, _ = guard.resolve("shop/race.py")
    # The final component becomes a symlink out of the root: O_NOFOLLOW refuses it.
    target.unlink()
    target.symlink_to(outside / "secret.txt")
    assert _open_reason(guard, real) == "changed"
    # An intermediate directory becomes a symlink: the opened descriptor's own path is
    # checked again and is outside the root.
    (outside / "race.py").write_text("stolen\n")
    target.unlink()
    shop_moved = root / "shop-moved"
    (root / "shop").rename(shop_moved)
    (root / "shop").symlink_to(outside)
    assert _open_reason(guard, real) == "outside_root"


def test_resolve_absolute_for_frames(project):
    root, outside, guard = project
    assert guard.resolve_absolute(str(root / "shop" / "views.py")) == (
        str(root / "shop" / "views.py"),
        "shop/views.py",
    )
    for value in (
        str(outside / "secret.txt"),
        "/usr/lib/python3/os.py",
        "<frozen importlib._bootstrap>",
        "",
        "x\x00y",
        None,
        str(root / "shop"),
    ):
        assert guard.resolve_absolute(value) is None


def test_allows_dir(project):
    root, _, guard = project
    assert guard.allows_dir(str(root))
    assert guard.allows_dir(str(root / "shop"))
    assert not guard.allows_dir(str(root / "media"))
    assert not guard.allows_dir(str(root.parent))


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_arbitrary_paths_never_escape(tmp_path_factory, path):
    # Whatever the text, the guard either refuses or returns a file inside the root.
    root = tmp_path_factory.getbasetemp() / "fuzz-root"
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    guard = SourcePathGuard(str(root))
    try:
        real, shown = guard.resolve(path)
    except PathDenied:
        return
    assert os.path.commonpath([real, str(root)]) == str(root)
    assert not any(part.startswith(".") for part in shown.split("/"))


# -- redaction ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kept", "gone"),
    [
        ("SECRET_KEY = 'django-insecure-abc123'", "SECRET_KEY = ", "abc123"),
        ('    "PASSWORD": "hunter2",', '"PASSWORD": ', "hunter2"),
        ("DB_PASSWORD=hunter2", "DB_PASSWORD=", "hunter2"),
        ("api_key: sk-live-123456", "api_key: ", "sk-live-123456"),
        ("GITHUB_TOKEN = os.environ.get('T', 'ghp_fallback')", "GITHUB_TOKEN = ", "ghp_fallback"),
        ("AWS_SECRET_ACCESS_KEY = 'wJalrXUtnFEMI'", "AWS_SECRET_ACCESS_KEY = ", "wJalrXUtnFEMI"),
        (
            "DATABASE_URL = 'postgres://app:s3cr3t@db.internal:5432/app'",
            "DATABASE_URL = ",
            "s3cr3t",
        ),
        ("see postgres://app:s3cr3t@db/x for details", "postgres://app:", "s3cr3t"),
        ("headers = {'Authorization': 'Bearer eyJhbGciOi'}", "Bearer ", "eyJhbGciOi"),
        ("key id AKIAIOSFODNN7EXAMPLE in log", "key id ", "AKIAIOSFODNN7EXAMPLE"),
        ("-----BEGIN RSA PRIVATE KEY-----", "", "BEGIN"),
        ("sentry_dsn := 'https://abc@o1.ingest.sentry.io/1'", "sentry_dsn := ", "abc@o1"),
    ],
)
def test_redaction(line, kept, gone):
    out = redact_line(line)
    assert kept in out and gone not in out and REDACTED in out


@pytest.mark.parametrize(
    "line",
    [
        "def cart(request):",
        "if token == expected:",
        "return render(request, 'shop/cart.html', {'items': items})",
        "x = compute(1, 2)",
    ],
)
def test_ordinary_code_is_kept(line):
    assert redact_line(line) == line


def test_private_key_block_is_blanked_whole():
    text = (
        "a = 1\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n"
        "-----END PRIVATE KEY-----\nb = 2"
    )
    assert redact_text(text) == f"a = 1\n{REDACTED}\n{REDACTED}\n{REDACTED}\nb = 2"


def test_hard_links_are_refused(project):
    root, outside, guard = project
    os.link(outside / "secret.txt", root / "shop" / "notes.txt")
    assert reason(guard, "shop/notes.txt") == "hard_link"
    assert guard.resolve_absolute(str(root / "shop" / "notes.txt")) is None


def test_a_bind_mount_inside_the_root_is_refused(project):
    from tests.lab import netns

    if not netns.LAB_ACTIVE:
        pytest.skip("needs the lab's private mount namespace")
    root, _, guard = project
    target = root / "shop" / "mounted"
    target.mkdir()
    libc = netns._libc()
    # tmpfs: another device, as /etc bind-mounted into the tree would be.
    netns._mount(libc, "tmpfs", str(target), "tmpfs", 0)
    try:
        (target / "file.py").write_text("x = 1\n")
        assert reason(guard, "shop/mounted/file.py") == "other_filesystem"
        assert not guard.allows_dir(str(target))
    finally:
        assert libc.umount2(str(target).encode(), 0) == 0


_SENSITIVE_NAMES = [
    "SECRET_KEY",
    "PASSWORD",
    "DB_PASSWORD",
    "API_KEY",
    "apiKey",
    "GITHUB_TOKEN",
    "access_token",
    "AWS_SECRET_ACCESS_KEY",
    "SENTRY_DSN",
    "client_secret",
    "EMAIL_HOST_PASSWORD",
]


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(_SENSITIVE_NAMES),
    value=st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
        min_size=6,
        max_size=60,
    ),
    operator=st.sampled_from([" = ", "=", ": ", " := ", '": ']),
    indent=st.sampled_from(["", "    ", '    "']),
    quote=st.sampled_from(["'", '"', ""]),
)
def test_a_sensitive_assignment_never_shows_its_value(name, value, operator, indent, quote):
    value = value.strip()
    if len(value) < 6:
        return
    line = f"{indent}{name}{operator}{quote}{value}{quote}"
    out = redact_line(line)
    assert value not in out, (line, out)
    assert REDACTED in out
