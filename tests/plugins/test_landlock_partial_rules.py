"""Issue 30, round 13, finding 3: the guest's Landlock was all or nothing, and the host did
not learn what the guest enforced.

When the kernel refused the rule of ONE path (``landlock_add_rule``, any errno), the guest
dropped its whole ruleset and ran the plugin with no Landlock at all, while the host
reported its own kernel's ABI (``_host_landlock_abi``) and ``plugin list`` showed "Landlock
ABI N".  Now a refused path rule leaves out that path only (it is then not readable); only a
failure of ``landlock_create_ruleset`` or ``landlock_restrict_self`` means "no Landlock";
and the guest says what it enforced in its ``contained`` message, before any plugin code is
imported, which is what the host keeps and shows.

The end-to-end tests run the real guest, bwrap and kernel; the site's bwrap is a wrapper
that loads a seccomp filter first (``_WRAPPER``): either the guest's
``landlock_create_ruleset`` fails (ENOSYS, as on a kernel without Landlock; the host
process keeps its Landlock), or each ``landlock_add_rule`` goes to the wrapper (a seccomp
user notification), which answers ``EBADFD`` (what Landlock answers for a file of an
internal file system) for the rule of one chosen file and lets the kernel take every other
rule.  (A real file Landlock refuses is out of reach here: an ``nsfs`` file bound into the
plugin's directory is taken by Landlock through the bind mount.)  Only the bookkeeping's
unit test plays the kernel, at the ``landlock_add_rule`` boundary (``_add_rules``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import guest
from django_webfetch.plugins.runtime.host import capabilities
from tests.plugins.packages import child_report

pytestmark = pytest.mark.django_db


def _ptrace_scope() -> int:
    """Yama's ``ptrace_scope`` (0 without Yama): from 2, the wrapper may not read the
    memory of the plugin process it started (its ``landlock_add_rule`` argument)."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 0


needs_landlock = pytest.mark.skipif(
    not capabilities().get("isolated")
    or not capabilities().get("landlock")
    or _ptrace_scope() >= 2,
    reason="a host that builds the plugin sandbox on a kernel with Landlock (and lets a "
    "process read the memory of its descendants)",
)

#: Files the plugin tries to read at import: each is in the sandbox's mount view, none is
#: under a Landlock read rule (``/etc/ld.so.cache`` is bound for the loader; ``/proc`` is
#: the sandbox's own).  Without Landlock each is read.
_OUTSIDE = ("/etc/ld.so.cache", "/proc/self/status", "/dev/zero")

_PLUGIN = """\
import errno, json, os

def _read(path):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return "read"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

READS = {path: _read(path) for path in json.loads(%r)}

def manifest():
    return {"name": %r, "version": "1.0", "description": "x", "egress": [], "tools": [],
            "reads": READS}
"""

#: The site, played by a child process (the host's state, ``capabilities`` included, is its
#: own): its bwrap is the test's wrapper; it reads the plugin's manifest in a plugin
#: process, as the registry reads it.
_SITE = r"""
import json, os, sys

config = json.loads(sys.argv[1])
os.environ["WEBFETCH_PLUGIN_BWRAP"] = config["bwrap"]
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()
from django_webfetch.plugins.runtime import host

found = host.describe(host.Origin(config["entry"], config["path"], config["top"]))
label = host.isolation_label(False, found["isolation"])
print(json.dumps({"found": found, "host_abi": host._host_landlock_abi(), "label": label}))
"""


def _plugin_dir(name: str) -> str:
    """A fresh directory every uid may search (a root site runs bwrap under an unprivileged
    uid) holding a module ``<name>.py``, the plugin's package is written beside it
    (``_write_plugin``: the package is what is imported; both are bound into the sandbox,
    and the guest allows reading both), and so is the test's bwrap wrapper (not bound)."""
    directory = tempfile.mkdtemp(prefix="webfetch-landlock-")
    os.chmod(directory, 0o755)
    with open(os.path.join(directory, name + ".py"), "w") as fh:
        fh.write("SHADOWED = True\n")
    return directory


def _write_plugin(directory: str, name: str, reads: list[str]) -> None:
    """The plugin's package ``name``: it tries to read each of ``reads`` at import."""
    package = os.path.join(directory, name)
    os.mkdir(package, 0o755)
    with open(os.path.join(package, "__init__.py"), "w") as fh:
        fh.write(_PLUGIN % (json.dumps(reads), name))


def _described(directory: str, name: str, bwrap: str) -> dict:
    config = {"bwrap": bwrap, "entry": f"{name}:manifest", "path": directory, "top": name}
    return child_report(_SITE, json.dumps(config))


@needs_landlock
def test_one_path_landlock_cannot_take_leaves_the_plugin_process_without_landlock():
    """The kernel refuses the Landlock rule of one path the guest allows (``<name>.py``
    beside the plugin's package; ``EBADFD``, as for a file Landlock takes no rule on).  On
    main the guest dropped its whole ruleset: the plugin read ``/etc/ld.so.cache``,
    ``/proc/self/status`` and ``/dev/zero`` (in its mount view, under no Landlock rule), and
    the host said "Landlock ABI N".  Now every other rule holds (each of those reads is
    refused, its own package is read), the refused path is not readable (no rule grants
    it: fail closed), and the host reports what the guest enforced: its ABI, and that one
    path refused."""
    name = "webfetch_landlock_partial"
    directory = _plugin_dir(name)
    refused = os.path.join(directory, name + ".py")
    own = os.path.join(directory, name, "__init__.py")
    try:
        _write_plugin(directory, name, [*_OUTSIDE, refused, own])
        report = _described(directory, name, _bwrap(directory, refuse=refused))
    finally:
        shutil.rmtree(directory)
    found = report["found"]
    assert found["problem"] == "", found
    reads = found["manifest"]["reads"]
    # Landlock holds on every other path: nothing outside the allowed set is read.
    assert {path: reads[path] for path in _OUTSIDE} == dict.fromkeys(_OUTSIDE, "EACCES"), reads
    assert reads[own] == "read", reads
    # The path whose rule the kernel refused is left out: not readable.
    assert reads[refused] == "EACCES", reads
    # What the host reports is what the guest enforced.
    isolation = found["isolation"]
    assert isolation["landlock"] == report["host_abi"] > 0, isolation
    assert isolation["landlock_refused_count"] == 1, isolation
    assert isolation["landlock_refused"] == [f"{refused}: {os.strerror(errno.EBADFD)}"]
    assert report["label"].endswith(
        f"seccomp allow-list; Landlock ABI {report['host_abi']}, 1 path rule refused by the "
        "kernel (left out, not readable))"
    ), report["label"]


#: The bwrap a test's site starts (``WEBFETCH_PLUGIN_BWRAP``; on a root site, ``launch``
#: executes it as the plugin's uid): it loads the filter program ``config["program"]``, then
#: executes the real bwrap.  With ``config["refuse"]`` (a file's device and inode), the
#: program sends each ``landlock_add_rule`` to this process (a seccomp user notification),
#: which answers ``config["errno"]`` for the rule of that file and lets every other rule go
#: to the kernel: the kernel refusing one path, played at the system call; nothing else of
#: the plugin process changes.
_WRAPPER = r"""
import ctypes, json, os, select, struct, sys

config = json.loads(sys.argv[1])
argv = [config["bwrap"], *sys.argv[2:]]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
with open(config["program"], "rb") as fh:
    program = fh.read()


class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


prog = Prog(len(program) // 8, program)
assert libc.prctl(38, 1, 0, 0, 0) == 0, "no_new_privs"
if not config.get("refuse"):
    assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, "seccomp"
    os.execv(argv[0], argv)
# seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, program)
listener = libc.syscall(config["seccomp"], 1, 8, ctypes.byref(prog))
assert listener >= 0, os.strerror(ctypes.get_errno())
child = os.fork()
if child == 0:
    os.close(listener)
    os.execv(argv[0], argv)
refuse = tuple(config["refuse"])
poller = select.poll()
poller.register(listener, select.POLLIN)
while True:
    if not poller.poll(100):
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            os._exit(os.waitstatus_to_exitcode(status))
        continue
    notice = ctypes.create_string_buffer(80)  # struct seccomp_notif, zeroed
    if libc.ioctl(listener, ctypes.c_ulong(0xC0502100), notice) != 0:
        if ctypes.get_errno() == 2:  # ENOENT: its caller is gone
            continue
        break
    ident, pid, _flags, _nr, _arch, _ip, *args = struct.unpack("=QIIiIQ6Q", notice.raw)
    refused = False
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
            memory.seek(args[2])
            _access, parent = struct.unpack("=Qi", memory.read(12))
        found = os.stat(f"/proc/{pid}/fd/{parent}")
        refused = (found.st_dev, found.st_ino) == refuse
    except OSError:
        pass
    # struct seccomp_notif_resp: the error, or SECCOMP_USER_NOTIF_FLAG_CONTINUE.
    answer = struct.pack("=QqiI", ident, 0, -config["errno"] if refused else 0, 0 if refused else 1)
    libc.ioctl(listener, ctypes.c_ulong(0xC0182101), ctypes.c_char_p(answer))
_done, status = os.waitpid(child, 0)
os._exit(os.waitstatus_to_exitcode(status))
"""


def _bwrap(directory: str, *, refuse: str = "") -> str:
    """A bwrap wrapper in ``directory`` (``_WRAPPER``): with ``refuse`` (a path), the
    kernel refuses the plugin process's Landlock rule of that file (``EBADFD``); without,
    its ``landlock_create_ruleset`` fails (ENOSYS, as a kernel without Landlock)."""
    import pyseccomp as sc

    from django_webfetch.plugins.runtime import bubblewrap

    rules = sc.SyscallFilter(sc.ALLOW)
    if refuse:
        rules.add_rule(sc.NOTIFY, "landlock_add_rule")
    else:
        rules.add_rule(sc.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
    program = os.path.join(directory, "filter.bpf")
    with open(program, "wb") as fh:
        rules.export_bpf(fh)
    found = os.stat(refuse) if refuse else None
    config = {
        "bwrap": bubblewrap.DEFAULT_BWRAP,
        "program": program,
        "refuse": [found.st_dev, found.st_ino] if found else None,
        "errno": errno.EBADFD,
        "seccomp": sc.resolve_syscall(sc.Arch.NATIVE, "seccomp"),
    }
    script = os.path.join(directory, "wrapper.py")
    with open(script, "w") as fh:
        fh.write(_WRAPPER)
    path = os.path.join(directory, "bwrap")
    with open(path, "w") as fh:
        fh.write(
            f"#!/bin/sh\nexec {bubblewrap.interpreter_path()} -I -S {script} "
            f"'{json.dumps(config)}' \"$@\"\n"
        )
    for name in (program, script):
        os.chmod(name, 0o644)
    os.chmod(path, 0o755)
    return path


@needs_landlock
def test_a_plugin_process_without_landlock_is_reported_without_landlock():
    """The guest's ``landlock_create_ruleset`` fails (the host's does not): on main the
    host reported its own ABI for a process that enforced no Landlock.  Now it reports
    "no Landlock" and the guest's reason; the plugin reads what Landlock would refuse."""
    name = "webfetch_landlock_none"
    directory = _plugin_dir(name)
    try:
        _write_plugin(directory, name, list(_OUTSIDE))
        report = _described(directory, name, _bwrap(directory))
    finally:
        shutil.rmtree(directory)
    found = report["found"]
    assert found["problem"] == "", found
    assert report["host_abi"] > 0
    assert found["manifest"]["reads"] == dict.fromkeys(_OUTSIDE, "read")
    isolation = found["isolation"]
    assert isolation["landlock"] == 0, isolation
    assert isolation["landlock_error"] == (
        f"landlock_create_ruleset: {os.strerror(errno.ENOSYS)}"
    ), isolation
    assert isolation["landlock_refused_count"] == 0, isolation
    assert report["label"].endswith(
        f"seccomp allow-list; no Landlock (landlock_create_ruleset: {os.strerror(errno.ENOSYS)}))"
    ), report["label"]


@needs_landlock
@pytest.mark.parametrize("kernel", ["refuses /dev/urandom", "no Landlock"])
def test_plugin_list_shows_what_the_plugin_process_enforced(example, monkeypatch, caplog, kernel):
    """``webfetch plugin list`` shows each instance's isolation as its plugin process
    enforced it (``registry.isolation``: the manifest read's ``contained`` report), never
    this host's kernel's ABI in its place: the ABI and the count of path rules the kernel
    refused, or "no Landlock" and the reason; the host's line leaves out the paths refused
    for one plugin."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    from .test_cli import webfetch

    abi = host._host_landlock_abi()
    directory = tempfile.mkdtemp(prefix="webfetch-landlock-")
    os.chmod(directory, 0o755)
    try:
        refuse = "/dev/urandom" if kernel.startswith("refuses") else ""
        monkeypatch.setenv("WEBFETCH_PLUGIN_BWRAP", _bwrap(directory, refuse=refuse))
        # This process's manifest reads and host capabilities, as a fresh process has them
        # (both are put back after the test: the next test's bwrap is the real one).
        monkeypatch.setattr(registry, "_described", {})
        monkeypatch.setattr(host, "_capabilities", None)
        registry.reset()
        webfetch("install", "example")
        output = webfetch("list").splitlines()
    finally:
        shutil.rmtree(directory)
    sandboxed = (
        "sandboxed process (bubblewrap: user, pid, net, ipc, uts, mount namespaces; "
        "seccomp allow-list; "
    )
    cgroup = ", ".join(sorted(registry.isolation("example")["cgroup"]))
    limits = f"; cgroup: {cgroup}" if cgroup else ""
    if refuse:
        instance = f"Landlock ABI {abi}, 1 path rule refused by the kernel (left out, not readable)"
        this_host = f"Landlock ABI {abi}"
        assert registry.isolation("example")["landlock_refused"] == [
            f"/dev/urandom: {os.strerror(errno.EBADFD)}"
        ]
    else:
        instance = this_host = f"no Landlock (landlock_create_ruleset: {os.strerror(errno.ENOSYS)})"
    assert output[0] == f"this host: {sandboxed}{this_host}{limits})"
    said = [r.getMessage() for r in caplog.records if r.name == "django_webfetch.plugins"]
    if refuse:
        assert any("Landlock path rules refused by the kernel: 1," in m for m in said), said
    else:
        assert any("runs without Landlock (landlock_create_ruleset" in m for m in said), said
    assert f"  isolation: {sandboxed}{instance}{limits})" in output, output


# -- the bookkeeping, the kernel played at ``landlock_add_rule`` -----------------------------

_HANDLED = guest._FS_BY_ABI[5]
_paths = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=300).map(
        lambda tail: "/" + tail
    ),
    max_size=24,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(
    read=_paths,
    listed=_paths,
    refused=st.sets(st.integers(min_value=0, max_value=60)),
    code=st.sampled_from([errno.EBADFD, errno.EINVAL, errno.ENOMSG, errno.ENOMEM, errno.EPERM]),
    abi=st.integers(min_value=1, max_value=7),
)
def test_a_refused_rule_leaves_out_its_path_only(read, listed, refused, code, abi):
    """Whichever rules the kernel refuses: every rule is tried once, in order; the ruleset
    holds every other rule with its rights and none of the refused ones; the guest reports
    each refused path (the first ``MAX_REFUSED_PATHS``, shortened; the count whole), and
    the host takes that report as it is."""
    from django_webfetch.plugins.runtime import protocol
    from django_webfetch.plugins.runtime.host import _checked_contained

    rules = guest._rules(read, listed, "/tmp/scratch", _HANDLED)
    kernel: dict[str, int] = {}
    tried: list[str] = []

    def add(path: str, rights: int) -> int:
        tried.append(path)
        if len(tried) - 1 in refused:
            return code
        kernel[path] = kernel.get(path, 0) | rights
        return 0

    left_out = guest._add_rules(rules, add)
    assert tried == [path for path, _rights in rules]
    expected = [(path, code) for index, (path, _rights) in enumerate(rules) if index in refused]
    assert left_out == expected
    granted: dict[str, int] = {}
    for index, (path, rights) in enumerate(rules):
        if index not in refused:
            granted[path] = granted.get(path, 0) | rights
    assert kernel == granted
    report = guest._enforced(abi, left_out)
    assert report["landlock"] == abi
    assert report["landlock_refused_count"] == len(expected)
    assert len(report["landlock_refused"]) == min(len(expected), protocol.MAX_REFUSED_PATHS)
    for said, (path, error) in zip(report["landlock_refused"], expected, strict=False):
        whole = f"{path}: {os.strerror(error)}"
        assert len(said) <= protocol.MAX_REFUSED_CHARS
        assert said == whole or (said.endswith(whole[-50:]) and said.startswith(whole[:50]))
    # A report the guest makes is one the host takes, field for field.
    taken = _checked_contained({"op": "contained", "isolation": report}, abi)
    assert taken["landlock_refused_count"] == report["landlock_refused_count"]
    assert taken["landlock"] == abi


def test_no_landlock_is_reported_with_its_reason():
    report = guest._unenforced("landlock_restrict_self", errno.EPERM)
    assert report["landlock"] == 0
    assert report["landlock_error"] == f"landlock_restrict_self: {os.strerror(errno.EPERM)}"
    from django_webfetch.plugins.runtime.host import _checked_contained

    assert (
        _checked_contained({"isolation": report}, 7)["landlock_error"] == (report["landlock_error"])
    )


@pytest.mark.parametrize(
    "change",
    [
        {"landlock": 8},  # above this kernel's ABI
        {"landlock": True},
        {"landlock_network": False},  # ABI 7 holds TCP
        {"landlock_refused": ["x"] * 9, "landlock_refused_count": 9},  # more than 8 listed
        {"landlock_refused": ["x" * 201], "landlock_refused_count": 1},
        {"landlock_refused": ["a"], "landlock_refused_count": 2},  # the list is not full
        {"landlock_refused": ["a", "b"], "landlock_refused_count": 1},
        {"landlock_refused": [1], "landlock_refused_count": 1},
        {"landlock_error": "no"},  # a reason of no Landlock, with Landlock
        {"landlock": 0, "landlock_network": False, "landlock_scoped": False},  # no reason
        {"landlock_error": None},
    ],
)
def test_the_host_takes_no_report_outside_its_bounds(change):
    """``contained`` is the guest's word, said before any plugin code ran: one of its fields
    out of type or bounds is a protocol error (``plugin_protocol_error``), never a report."""
    from django_webfetch.plugins.runtime.host import ProtocolViolation, _checked_contained

    report = {**guest._enforced(7, []), **change}
    with pytest.raises(ProtocolViolation):
        _checked_contained({"op": "contained", "isolation": report}, 7)
    with pytest.raises(ProtocolViolation):
        _checked_contained({"op": "contained"}, 7)
