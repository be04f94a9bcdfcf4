"""A child process of tests/plugins/test_system_directories_under_a_linked_parent.py: in a
mount namespace of its own, ``/usr`` made as an OSTree host has it (``mode`` "link": every
entry as it was, ``/usr/local`` a link to where it lives now; "plain": ``/usr`` as it is), a
site whose settings package lies under ``/usr/local/lib``, and one plugin call through the
real sandbox.  Prints one JSON line: the call's outcome and ``bubblewrap._system()``.

Arguments: SETTINGS_PACKAGE_DIR PLUGIN_DIR VAR_DIR MODE."""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile

_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_CLONE_NEWNS = 0x00020000


def _ok(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def _ostree_usr(libc: ctypes.CDLL, var: str) -> None:
    """``/usr`` as an OSTree host has it: each entry bound back where it was, but
    ``local``, a link to a directory under ``var`` that holds the old ``/usr/local``."""
    hold = tempfile.mkdtemp(prefix="webfetch-oldusr-", dir=var)
    _ok(libc.mount(b"/usr", hold.encode(), None, _MS_BIND | _MS_REC, None), "hold /usr")
    _ok(libc.mount(b"tmpfs", b"/usr", b"tmpfs", 0, b"mode=0755"), "tmpfs /usr")
    usrlocal = tempfile.mkdtemp(prefix="webfetch-usrlocal-", dir=var)
    os.chmod(usrlocal, 0o755)
    for name in os.listdir(hold):
        source, target = os.path.join(hold, name), os.path.join("/usr", name)
        flags = _MS_BIND | _MS_REC
        if name == "local":
            _ok(libc.mount(source.encode(), usrlocal.encode(), None, flags, None), name)
            os.symlink(usrlocal, target)
        elif os.path.islink(source):
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.mkdir(target)
            _ok(libc.mount(source.encode(), target.encode(), None, flags, None), name)
        else:
            open(target, "w").close()  # noqa: SIM115
            _ok(libc.mount(source.encode(), target.encode(), None, _MS_BIND, None), name)
    assert os.path.islink("/usr/local") and os.path.isdir("/usr/local/lib")


def main() -> None:
    site, plugins, var, mode = sys.argv[1:5]
    libc = ctypes.CDLL(None, use_errno=True)
    _ok(libc.unshare(_CLONE_NEWNS), "unshare")
    _ok(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "private")
    if mode == "link":
        _ostree_usr(libc, var)
    sys.path.insert(0, site)  # by its name under /usr/local/lib, as the site imports it
    os.environ["DJANGO_SETTINGS_MODULE"] = "webfetch_linked_site.settings"
    import django

    django.setup()
    from django_webfetch.plugins.runtime import bubblewrap
    from django_webfetch.plugins.runtime.host import Origin, execute, shutdown

    class NoHttp:
        def request(self, *args: object, **kwargs: object) -> None:
            raise ValueError("no request in this test")

    origin = Origin("webfetch_linked_reader:manifest", plugins, "webfetch_linked_reader")
    call = {
        "tool": "webfetch_linked_reader_run",
        "arguments": {},
        "config": {},
        "plugin": "webfetch_linked_reader",
        "alias": "x",
        "reference": "r",
    }
    try:
        outcome = execute(origin, ("webfetch_linked_reader", 1), call, NoHttp())
    finally:
        shutdown()
    print(
        json.dumps(
            {
                "kind": outcome.kind,
                "text": outcome.text,
                "error": outcome.error,
                "system": bubblewrap._system(),
            }
        )
    )


if __name__ == "__main__":
    main()
