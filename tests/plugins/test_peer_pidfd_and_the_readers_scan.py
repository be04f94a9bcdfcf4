"""No descriptor of the host process from the RPC channel, and a bounded scan of what a
plugin sends (issue 30, round 31, findings 1 and 2, both Low; the outside attacker's tests).

* ``getsockopt`` was allowed with any option, so ``SO_PEERPIDFD`` on the channel handed
  the plugin a pidfd of the host process, outside its PID namespace (no call of the
  allow-list could use it: one entry away from a signal).  It is allowed now only for
  ``SOL_SOCKET``'s ``SO_TYPE``, ``SO_ERROR``, ``SO_PROTOCOL`` and ``SO_DOMAIN``
  (``bubblewrap.GETSOCKOPT_OPTIONS``).
* ``protocol.shape`` walked every bracket of a message in Python, but counted only those
  that open a value: 8 MiB of ``]`` cost the host 0.6 s of CPU per call.  A slice that
  closes more than was opened ends the scan (no JSON text does), so each bracket walked is
  one opened (a value, bounded) or one closed after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.packages import open_up

#: The host, in a child: optionally on a kernel without Landlock, one call of ``probe``.
_HOST = r"""
import errno, json, sys
if sys.argv[3] == "no-landlock":
    import pyseccomp as sc
    rules = sc.SyscallFilter(sc.ALLOW)
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
    rules.load()
from django_webfetch.plugins.runtime import host
site, top = sys.argv[1:3]
origin = host.Origin(top + ":manifest", site, top)
limits = host.Limits(10, 30, 1 << 30, 1 << 20, 5, 0)
call = {"tool": "probe", "arguments": {}, "config": {}, "plugin": "a31", "alias": "x",
        "reference": "x"}
try:
    outcome = host.execute(origin, ("a31", 1), call, None, limits=limits)
except host.RuntimeFailure as exc:
    print(json.dumps({"kind": "refused", "code": exc.code, "detail": exc.detail}))
else:
    print(json.dumps({"kind": outcome.kind, "text": outcome.text, "code": outcome.code,
                      "error": outcome.error}))
"""


def _run_host(site: Path, top: str, kernel: str, cwd: Path) -> dict:
    import django_webfetch
    from django_webfetch.plugins.runtime.bubblewrap import site_dirs

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", _HOST, str(site), top, kernel],
        capture_output=True, text=True, timeout=120, cwd=str(cwd), start_new_session=True,
        env={**env, "PYTHONPATH": ":".join([root, *site_dirs()])}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _plugin(tmp_path: Path, body: str) -> Path:
    """A plugin package ``webfetch_a31`` whose tool ``probe`` runs ``body`` (which sets
    ``out``, a dict) and returns it as JSON."""
    site = tmp_path / "srv" / "plugins"
    (site / "webfetch_a31").mkdir(parents=True)
    source = (
        "import json, os\n\n\ndef run(plugin, arguments):\n    out = {}\n"
        + "".join(f"    {line}\n" for line in body.strip().splitlines())
        + "    return json.dumps(out)\n\n\n"
        "def manifest():\n"
        "    return {'name': 'a31', 'version': '1.0', 'description': 'x', 'egress': [],\n"
        "            'tools': [{'name': 'probe', 'description': 'x',\n"
        "                       'parameters': {'type': 'object'}, 'handler': run}]}\n"
    )
    (site / "webfetch_a31" / "__init__.py").write_text(source)
    open_up(tmp_path)
    return site


# -- finding 1: a descriptor of the host process, from the channel ----------------------

#: The channel socket (the guest's own object, found as any plugin code finds it), asked
#: for its peer as a process descriptor: ``SO_PEERPIDFD`` (Linux 6.5).  ``getsockopt`` is
#: in the allow-list with no condition on the option.
_PEER_PIDFD = """
import gc, socket, struct
channel = [o for o in gc.get_objects() if isinstance(o, socket.socket)][0]
try:
    raw = channel.getsockopt(socket.SOL_SOCKET, 77, 4)
    fd = struct.unpack('i', raw)[0]
    out['pidfd'] = fd
    out['stat'] = repr(os.fstat(fd))
except OSError as exc:
    out['refused'] = exc.errno
"""


@pytest.mark.parametrize("kernel", ["landlock", "no-landlock"])
def test_a_plugin_gets_no_descriptor_of_the_host_process_from_its_channel(tmp_path, kernel):
    """History: issue 30, round 31, finding 1 (Low, hardening).

    The plugin process's own PID namespace is promised to leave it no handle on any
    host process ("no host process has a number there").  ``getsockopt`` is allowed for
    any option, so ``SO_PEERPIDFD`` on the RPC channel hands the plugin a pidfd of the
    host process itself (the web or worker process, outside its PID namespace; its
    ``fdinfo`` says ``Pid: 0``).  With today's allow-list no call takes a pidfd
    (``pidfd_send_signal``, ``waitid(P_PIDFD)``, ``pidfd_getfd``, ``setns`` are refused,
    ``ioctl`` is limited to five requests), so nothing reaches the host through it: it is
    a reference the namespace was meant to make impossible, one allow-list entry away
    from a signal or a descriptor theft.  It should fail (``EPERM`` from the filter, as
    for ``setsockopt``)."""
    site = _plugin(tmp_path, _PEER_PIDFD)
    report = _run_host(site, "webfetch_a31", kernel, tmp_path)
    assert report["kind"] == "text", report
    seen = json.loads(report["text"])
    assert "pidfd" not in seen, f"the plugin holds a pidfd of the host process: {seen}"
    assert seen["refused"] == 1, seen  # EPERM, from the filter


# -- finding 2: what one malformed message costs the host's reader ----------------------


@pytest.mark.parametrize("unit", [b"]", b"}", b"[]]", b"{}}]"])
def test_the_readers_scan_is_bounded_by_the_value_bound_not_the_byte_cap(monkeypatch, unit):
    """History: issue 30, round 31, finding 2 (Low).

    ``protocol.shape`` (run on every message a plugin process sends, and on a tool's
    ``json`` result) counts values at ``[``, ``{``, ``,`` and ``:`` and stops past
    ``MAX_VALUES``, but walks every bracket in Python (``itertools.accumulate`` over
    ``_STEP.__getitem__``), and a closing bracket is no value: a message of 8 MiB of
    ``]`` (the byte cap) is scanned whole before ``json.loads`` refuses it.  Measured on
    the project's machine: 0.61 s of the host's CPU for one such message, against 0.06 s
    for 8 MiB of spaces and 0.02 s for 8 MiB of ``[]`` (stopped by the value bound); the
    plugin's own cost is one ``write``, outside its CPU bound.  Each call of a hostile
    plugin can so make its host (a web or worker process) spend ~0.6 s of CPU that no
    bound counts, besides the cold start of the next process.  Counted here without a
    clock: the per-bracket steps of one scan must stay within what the value bound
    allows (a valid text has no more closing brackets than values), not the byte cap."""
    from django_webfetch.plugins.runtime import protocol

    class Counting(dict):
        steps = 0

        def __getitem__(self, key):
            Counting.steps += 1
            return dict.__getitem__(self, key)

    monkeypatch.setattr(protocol, "_STEP", Counting(protocol._STEP))
    body = unit * ((protocol.MAX_MESSAGE - 64) // len(unit))
    with pytest.raises(protocol.ProtocolError):
        protocol.parse(body)
    # Openers are values (at most ``MAX_VALUES`` and a slice past it); closers at most
    # as many, and a slice.
    bound = 2 * protocol.MAX_VALUES + 3 * protocol._SCAN_CHUNK
    assert Counting.steps <= bound, (
        f"{Counting.steps} bracket steps for one message of closing brackets "
        f"(at most {bound} expected)"
    )


def test_a_valid_message_is_read_as_before() -> None:
    """History: issue 30, round 31, finding 2.  The early end changes nothing for JSON:
    nested, wide and stringy texts give the same value, depth and count."""
    from django_webfetch.plugins.runtime import protocol

    for value in (
        {"op": "call", "arguments": {"q": "]]]}}}", "list": [[1, [2, [3]]], {}]}},
        [[[[[]]]]],
        ["]" * 70_000, {"k": "}" * 70_000}],
        list(range(5000)),
    ):
        text = json.dumps(value).encode()
        assert protocol.parse(text) == value
        deepest, values = protocol.shape(text)
        assert deepest >= 1 and values >= 1
