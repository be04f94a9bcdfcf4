"""Issue 30, attack 13 (outside review after the twelfth round).

Each test fails while its finding stands.  Real files, the real readers of the digest, the
pin and the registry's metadata; nothing patched."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST, wheel


def _writer_waiting_on(fifo: Path) -> tuple[threading.Thread, list[int]]:
    """A thread blocked in ``open(fifo, O_WRONLY)``: the kernel lets it through only when
    someone opens the FIFO for reading (the FIFO's own ``open``, as a device's driver runs
    its ``open``: ``/dev/watchdog`` arms the machine's watchdog, a tape device rewinds on
    close, a serial port raises DTR and resets what hangs on it)."""
    opened: list[int] = []

    def wait() -> None:
        opened.append(os.open(fifo, os.O_WRONLY))

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, opened


def _release(fifo: Path, thread: threading.Thread, opened: list[int]) -> None:
    if thread.is_alive():
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        thread.join(5)
        os.close(reader)
    for fd in opened:
        os.close(fd)


def _package_with_link(tmp_path: Path, target: Path) -> Path:
    site = tmp_path / "site"
    (site / "webfetch_t").mkdir(parents=True)
    (site / "webfetch_t" / "__init__.py").write_text(MANIFEST % "t")
    (site / "webfetch_t" / "data.bin").symlink_to(target)
    return site


def _metadata_with_link(tmp_path: Path, target: Path) -> Path:
    site = tmp_path / "site"
    info = site / "webfetch_t-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\n")
    (info / "entry_points.txt").symlink_to(target)
    return info


@pytest.mark.parametrize("reader", ["code_digest", "metadata", "registry_state"])
def test_the_bounded_reader_opens_a_special_file_before_it_asks_what_it_is(
    tmp_path, reader, request
):
    """Finding 1 (round 12's bounded reader, ``provenance._open_regular``): a name in a
    plugin's package (or its ``entry_points.txt``, ``METADATA``, ``RECORD``) that leads to
    no regular file is refused, but only after it was opened (``os.open`` first, then
    ``fstat`` on the descriptor): opening runs the special file's own ``open``, whatever
    reading it would have done.  On a root-run site a link to ``/dev/watchdog`` passes the
    path check (root owns it, mode 0600) and every registry load, trust look-up and pin
    opens it (arming the hardware watchdog, which reboots the machine when no one feeds it);
    a tape device rewinds, a serial port resets the board behind it.  Shown with a FIFO:
    a writer waiting in ``open`` is let through by the digest.  Suggested fix: take the
    file's identity from an ``O_PATH`` descriptor (``fstat`` of it runs no driver), and
    open for reading (``/proc/self/fd/N``) only a regular file.  ``registry_state``: what
    every registry state look-up computes for every plugin entry point on ``sys.path``
    (``provider_of``: the digest), trusted or not, in every web and worker process."""
    from django_webfetch.plugins import closure, provenance, registry

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if reader == "code_digest":
        site = _package_with_link(tmp_path, fifo)
    elif reader == "metadata":
        info = _metadata_with_link(tmp_path, fifo)
    else:
        registry_on = request.getfixturevalue("registry_on")
        site = tmp_path / "site"
        wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
              {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
        (site / "webfetch_t" / "data.bin").symlink_to(fifo)
        registry_on.syspath_prepend(str(site))
        registry.reset()
    thread, opened = _writer_waiting_on(fifo)
    try:
        thread.join(0.5)
        assert thread.is_alive(), "the writer must wait until someone opens the FIFO"
        if reader == "code_digest":
            digest = provenance.code_digest(str(site), "webfetch_t")
            assert digest.startswith(provenance.UNPINNED_PREFIX)  # refused, as documented
        elif reader == "metadata":
            with pytest.raises(OSError):
                closure.Bounded(info).read_text("entry_points.txt")
        else:
            eps, _unreadable, _state = registry._installed()
            assert "t" in {ep.name for ep in eps}
        thread.join(1.0)
        assert thread.is_alive(), (
            "the reader opened the FIFO (its open ran) before refusing it as no regular file"
        )
    finally:
        _release(fifo, thread, opened)


@pytest.mark.parametrize("name", ["runtime.launch", "a.b", ".errors", "..", "fetcher.nothing"])
def test_a_lazy_package_answers_a_name_that_is_no_identifier_as_a_missing_attribute(name):
    """Finding 2 (low; the lazily re-exporting packages, ``exports.export``): an attribute
    name that is not a Python identifier is handed to ``importlib.import_module`` as
    ``<package>.<name>``: ``getattr(django_webfetch.plugins, "runtime.launch")`` answers a
    module that is no attribute of the package, ``hasattr(django_webfetch.net, "a.b")``
    raises ``ModuleNotFoundError`` (PEP 562: a missing attribute is ``AttributeError``;
    ``hasattr``, ``getattr(..., default)``, ``inspect`` and ``pickle`` rely on it), and a
    failed look-up of ``"fetcher.nothing"`` has imported ``net.fetcher`` (httpx, dnspython)
    on the way: in the plugin process, against test_guest_imports.py's promise.  Suggested
    fix: ``export`` raises ``AttributeError`` for any name that is not an identifier, before
    importing anything."""
    import django_webfetch.net
    import django_webfetch.plugins

    for package in (django_webfetch.net, django_webfetch.plugins):
        try:
            found = getattr(package, name, None)
        except AttributeError:  # pragma: no cover - the default is what getattr answers
            found = None
        except ImportError as exc:
            pytest.fail(f"getattr({package.__name__}, {name!r}) raised {exc!r}")
        assert found is None, (package.__name__, name, found)


def test_a_failed_lazy_look_up_imports_nothing():
    """Finding 2, continued: ``getattr(django_webfetch.net, "fetcher.nothing", None)``, a
    name the package does not have, imports ``net.fetcher`` and with it httpx (what the
    lazy packages exist to keep out of the plugin process) before it answers ``None``."""
    from tests.plugins.packages import child_report

    found = child_report(
        "import json, sys\n"
        "import django_webfetch.net as net\n"
        "before = 'httpx' in sys.modules\n"
        "answer = getattr(net, 'fetcher.nothing', None)\n"
        "print(json.dumps([before, answer is None, 'httpx' in sys.modules,\n"
        "                  'django_webfetch.net.fetcher' in sys.modules]))\n"
    )
    assert found == [False, True, False, False], found


# Finding 3 (guest Landlock all or nothing; the host does not learn it): open, its test on
# branch s8-attack30n (tests/plugins/test_digest_reader_and_lazy_package_look_ups.py) until it is
# fixed.
