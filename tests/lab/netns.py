"""Move the test process into a private network namespace: the lab.

``enter()`` runs once, from ``pytest_configure``, while the process still has a single
thread (network and mount namespaces are per thread; threads started later inherit them).
It

* unshares the network and mount namespaces (``unshare(2)`` through ctypes; needs root),
* makes every mount private, so nothing below leaks back to the host,
* remounts ``/sys`` so ``/sys/class/net`` shows this namespace's interfaces,
* brings ``lo`` up and puts the lab addresses on it (public-looking ones for the servers the
  guard may reach, private-looking ones for servers it must never reach),
* bind-mounts a lab-owned ``/etc/hosts`` (with names that exist *only* there) and a
  ``/etc/resolv.conf`` that points at the lab DNS server,
* and then verifies that the namespace has no interface but ``lo`` and that every thread
  of the process is inside it.  Any doubt aborts the run.

The namespace has no route out: the only addresses that exist are the ones on ``lo``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import os
import shutil
import socket
import subprocess
import tempfile

__all__ = [
    "DNS_V4",
    "DNS_V6",
    "ETC_HOSTS",
    "HOSTS_ONLY_NAMES",
    "LAB_ACTIVE",
    "LOOPBACK",
    "PRIVATE",
    "PUBLIC",
    "PUBLIC_V4",
    "PUBLIC_V6",
    "LabError",
    "LabUnavailable",
    "enter",
    "lab_dir",
    "verify",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

#: Public-looking addresses (our classifier calls them public) that the lab servers bind.
PUBLIC_V4: tuple[str, ...] = tuple(f"11.0.0.{i}" for i in range(10, 21))
PUBLIC_V6: tuple[str, ...] = tuple(f"2606:4700:10::{i}" for i in range(10, 21))
PUBLIC: tuple[str, ...] = PUBLIC_V4 + PUBLIC_V6
#: The lab DNS server (UDP and TCP port 53).
DNS_V4 = "11.0.0.53"
DNS_V6 = "2606:4700:10::53"
#: Private-looking addresses, bound too: a wrongly allowed connect would succeed and show
#: up in the servers' accept log.
PRIVATE: tuple[str, ...] = (
    "10.0.0.10",
    "192.168.1.10",
    "100.64.0.10",
    "169.254.169.254",
    "fd00::10",
)
LOOPBACK: tuple[str, ...] = ("127.0.0.1", "::1")

#: Names present only in the lab's /etc/hosts (the lab DNS server does not know them).
#: ``etc-hosts-only.example`` points at a public-looking address nothing listens on;
#: ``hosts-only.lab.example`` at a lab server, so a fetcher that consults /etc/hosts would
#: visibly reach it.
HOSTS_ONLY_NAMES: dict[str, str] = {
    "etc-hosts-only.example": "11.0.0.66",
    "hosts-only.lab.example": "11.0.0.10",
}
ETC_HOSTS = (
    "# django_webfetch test lab: this file is bind-mounted over /etc/hosts inside the\n"
    "# lab network namespace.  The guard must never consult it.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    + "".join(f"{addr}\t{name}\n" for name, addr in HOSTS_ONLY_NAMES.items())
)
RESOLV_CONF = f"# django_webfetch test lab\nnameserver {DNS_V4}\noptions timeout:1 attempts:1\n"

_ENV_NETNS = "WEBFETCH_LAB_NETNS"
_ENV_ACTIVE = "WEBFETCH_LAB_ACTIVE"
_ENV_DIR = "WEBFETCH_LAB_DIR"
#: Set by ``tests/lab/worker-python`` to the id of the fresh, empty network namespace it
#: started the process in (an xdist worker: execnet starts a thread before any hook runs, so
#: the worker cannot unshare by itself).
_ENV_ADOPT = "WEBFETCH_LAB_ADOPT"

#: True once this process is inside a verified lab namespace.
LAB_ACTIVE = False
_lab_dir: str | None = None


class LabUnavailable(RuntimeError):
    """The lab cannot be set up here (not root, no unshare, no ``ip``): skip, or fail in CI."""


class LabError(RuntimeError):
    """The lab was entered but is not what it must be: always abort the run."""


_owns_lab_dir = False


def lab_dir() -> str:
    """A private temporary directory of this run (hosts file, CA, ...)."""
    global _lab_dir, _owns_lab_dir
    if _lab_dir is None:
        inherited = os.environ.get(_ENV_DIR)
        if inherited:
            _lab_dir = inherited
        else:
            _lab_dir = tempfile.mkdtemp(prefix="webfetch-lab-")
            _owns_lab_dir = True
        os.environ[_ENV_DIR] = _lab_dir
    return _lab_dir


def owns_lab_dir() -> bool:
    """Whether this process created the lab directory (a nested pytest run inherits it and
    must not delete it under its parent)."""
    return _owns_lab_dir


def _netns_id(task: str = "self") -> int:
    return os.stat(f"/proc/{task}/ns/net").st_ino


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int
) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source!r} on {target!r}: {os.strerror(err)}")


def _ip(batch: list[str]) -> None:
    proc = subprocess.run(
        ["ip", "-batch", "-"],
        input="\n".join(batch) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise LabError(f"ip -batch failed: {proc.stderr.strip()}")


def enter() -> None:
    """Enter (or confirm we are already in) the lab namespace.  See the module docstring."""
    global LAB_ACTIVE
    adopt = os.environ.pop(_ENV_ADOPT, None)
    if adopt is not None:
        _adopt(adopt)
        return
    if os.environ.get(_ENV_NETNS) == str(_netns_id()):
        # A process started inside the lab (it inherited the namespace).
        verify()
        LAB_ACTIVE = True
        return
    if not hasattr(os, "unshare") and not os.path.exists("/proc/self/ns/net"):
        raise LabUnavailable("the lab needs Linux network namespaces")
    if shutil.which("ip") is None:
        raise LabUnavailable("the lab needs the `ip` command (Debian package iproute2)")
    tasks = os.listdir("/proc/self/task")
    if len(tasks) != 1:
        raise LabUnavailable(
            f"the process already runs {len(tasks)} threads; namespaces must be entered first"
        )
    libc = _libc()
    if libc.unshare(ctypes.c_int(CLONE_NEWNET | CLONE_NEWNS)) != 0:
        err = ctypes.get_errno()
        hint = " (the lab needs root)" if err == errno_mod.EPERM else ""
        raise LabUnavailable(f"unshare(CLONE_NEWNET|CLONE_NEWNS) failed: {os.strerror(err)}{hint}")
    # From here on we are in an empty network namespace: any failure is fatal.
    _build(libc)


def _adopt(expected: str) -> None:
    """Build the lab in the fresh namespace ``tests/lab/worker-python`` started this
    process in (``unshare --net --mount``): every thread was born inside it."""
    if expected != str(_netns_id()):
        raise LabError("the worker's namespace is not the one its wrapper made")
    seen = interfaces()
    if any(names != ["lo"] for names in seen.values()):
        raise LabError(f"the worker's namespace is not empty: {seen}")
    # Each worker has its own lab directory (hosts file, CA), never its controller's.
    global _lab_dir, _owns_lab_dir
    os.environ.pop(_ENV_DIR, None)
    _lab_dir, _owns_lab_dir = None, False
    _build(_libc())


def _build(libc: ctypes.CDLL) -> None:
    global LAB_ACTIVE
    try:
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
        # sysfs shows the interfaces of the namespace that mounted it: mount a fresh one.
        _mount(libc, "sysfs", "/sys", "sysfs", 0)
        _configure_lo()
        directory = lab_dir()
        hosts = os.path.join(directory, "hosts")
        with open(hosts, "w") as fh:
            fh.write(ETC_HOSTS)
        _mount(libc, hosts, "/etc/hosts", None, MS_BIND)
        if os.path.isfile("/etc/resolv.conf") and not os.path.islink("/etc/resolv.conf"):
            resolv = os.path.join(directory, "resolv.conf")
            with open(resolv, "w") as fh:
                fh.write(RESOLV_CONF)
            _mount(libc, resolv, "/etc/resolv.conf", None, MS_BIND)
    except OSError as exc:
        raise LabError(f"setting up the lab namespace failed: {exc}") from exc
    verify()
    os.environ[_ENV_NETNS] = str(_netns_id())
    os.environ[_ENV_ACTIVE] = "1"
    LAB_ACTIVE = True


def _configure_lo() -> None:
    disable_v6 = "/proc/sys/net/ipv6/conf/lo/disable_ipv6"
    if os.path.exists(disable_v6):
        with open(disable_v6, "w") as fh:
            fh.write("0")
    batch = ["link set lo up"]
    for addr in (*PUBLIC_V4, DNS_V4, *PRIVATE):
        if ":" in addr:
            batch.append(f"addr add {addr}/128 dev lo nodad")
        else:
            batch.append(f"addr add {addr}/32 dev lo")
    for addr in (*PUBLIC_V6, DNS_V6):
        batch.append(f"addr add {addr}/128 dev lo nodad")
    _ip(batch)


def interfaces() -> dict[str, list[str]]:
    """Interface names as seen through netlink/ioctl and through /sys/class/net."""
    return {
        "if_nameindex": sorted(name for _, name in socket.if_nameindex()),
        "sysfs": sorted(os.listdir("/sys/class/net")),
    }


def verify() -> None:
    """Abort unless the process is in a namespace whose only interface is ``lo``."""
    seen = interfaces()
    for source, names in seen.items():
        if names != ["lo"]:
            raise LabError(f"lab namespace has interfaces other than lo ({source}: {names})")
    own = _netns_id()
    for task in os.listdir("/proc/self/task"):
        if _netns_id(f"self/task/{task}") != own:
            raise LabError(f"thread {task} of the test process is outside the lab namespace")
    for addr in (*PUBLIC, DNS_V4, DNS_V6, *PRIVATE):
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind((addr, 0))
            except OSError as exc:
                raise LabError(f"lab address {addr} is not on lo: {exc}") from exc
    with open("/etc/hosts") as fh:
        if fh.read() != ETC_HOSTS:
            raise LabError("/etc/hosts is not the lab's file")
