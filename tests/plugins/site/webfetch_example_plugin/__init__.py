"""An example django_webfetch plugin, installed into the test environment as a
distribution (``tests/plugins/site`` is put on ``sys.path`` by tests/plugins/conftest.py, so
``importlib.metadata`` finds its ``django_webfetch.plugins`` entry point).

Its tools call hosts of the network-namespace lab through the host-owned client, and a few
try to get around it (a raw socket, httpx, a subprocess, a thread) to prove they cannot.
``set_state(version=..., extra_egress=...)`` lets a test play a package upgrade: it writes
``state/state.json`` beside this file (each xdist worker mounts a private ``state/`` of
its own: tests/lab/workers.py), which ``manifest()`` reads each time it is called (in the
plugin process that reads manifests, too; a module attribute set in the test process would
not reach it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from typing import Any

from . import attacks as _attacks  # its pool's thread runs before any tool (in the site)
from . import probes as _probes

_PROCESS_MARK = os.urandom(8).hex()
_STATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state", "state.json")


def _state() -> dict[str, Any]:
    try:
        with open(_STATE) as fh:
            return dict(json.load(fh))
    except FileNotFoundError:
        return {}


def set_state(version: str = "1.0", extra_egress: Any = (), extra_tools: Any = ()) -> None:
    """The package as of another version (the defaults: as shipped).  ``extra_tools``:
    more tool specs (name, description, group), each run by ``whoami``."""
    if version == "1.0" and not extra_egress and not extra_tools:
        if os.path.exists(_STATE):
            os.unlink(_STATE)
        return
    state = {
        "version": version,
        "extra_egress": list(extra_egress),
        "extra_tools": [dict(spec) for spec in extra_tools],
    }
    os.makedirs(os.path.dirname(_STATE), exist_ok=True)
    with open(_STATE, "w") as fh:
        json.dump(state, fh)


EGRESS = [
    "granted.lab.example",
    "*.api.lab.example",
    "intranet.lab.example",
    "metadata.lab.example",
    "redirector.lab.example",
    "mixed.lab.example",
]


def fetch(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    response = plugin.http.get(arguments["url"])
    return {
        "status": response.status_code,
        "location": response.headers.get("location", ""),
        "length": len(response.content),
    }


def follow(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Follows one redirect itself: the follow-up is a new, separately checked request."""
    first = plugin.http.get(arguments["url"])
    result: dict[str, Any] = {"first": first.status_code}
    if 300 <= first.status_code < 400:
        try:
            second = plugin.http.get(first.headers["location"])
            result["second"] = second.status_code
        except Exception as exc:  # the refusal is redacted: only the policy's name
            result["second_error"] = getattr(exc, "reason", type(exc).__name__)
    return result


def post(plugin: Any, arguments: dict[str, Any]) -> str:
    response = plugin.http.post(arguments["url"], json={"token_set": "token" in plugin.config})
    return response.text[:2000]


def repeat(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Several requests in one call, with a pause the test uses to change the grant."""
    import time

    results: list[Any] = []
    for _ in range(int(arguments.get("times", 2))):
        try:
            results.append(plugin.http.get(arguments["url"]).status_code)
        except Exception as exc:
            results.append(getattr(exc, "reason", type(exc).__name__))
        time.sleep(float(arguments.get("pause", 0.0)))
    return {"results": results}


def raw_socket(plugin: Any, arguments: dict[str, Any]) -> str:
    with socket.create_connection((arguments["host"], 80), timeout=2):
        return "connected"


def raw_httpx(plugin: Any, arguments: dict[str, Any]) -> str:
    import httpx

    return str(httpx.get(arguments["url"]).status_code)


def run_process(plugin: Any, arguments: dict[str, Any]) -> str:
    return str(subprocess.run(["true"], check=False).returncode)


def in_thread(plugin: Any, arguments: dict[str, Any]) -> str:
    outcome: list[str] = []

    def work() -> None:
        try:
            socket.create_connection((arguments["address"], 80), timeout=2).close()
            outcome.append("connected")
        except Exception as exc:
            outcome.append(getattr(exc, "reason", type(exc).__name__))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return outcome[0]


def unix_socket(plugin: Any, arguments: dict[str, Any]) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(arguments["path"])
    return "connected"


def udp(plugin: Any, arguments: dict[str, Any]) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\x00" * 12, (arguments["address"], 53))
    return "sent"


def borrow(plugin: Any, arguments: dict[str, Any]) -> str:
    """Builds the host client of another instance (by id) and tries its grant."""
    from django_webfetch.plugins.client import PluginHttp

    return str(PluginHttp(int(arguments["instance"])).get(arguments["url"]).status_code)


def send(plugin: Any, arguments: dict[str, Any]) -> str:
    """A GET with caller-chosen headers."""
    response = plugin.http.get(arguments["url"], headers=dict(arguments.get("headers", {})))
    return response.text[:4000]


def misbehave(plugin: Any, arguments: dict[str, Any]) -> Any:
    """What a plugin process must survive without the host noticing (tests/plugins/
    test_runtime.py): ``how`` is sleep, spin, memory, output, requests, flood, forged_name,
    exit, crash or segfault."""
    import time

    how = arguments["how"]
    if how == "sleep":
        time.sleep(60)
    elif how == "spin":
        while True:
            pass
    elif how == "memory":
        return str(len(bytearray(4 << 30)))
    elif how == "output":
        return "x" * 100_000
    elif how == "requests":
        return [plugin.http.get(arguments["url"]).status_code for _ in range(10)]
    elif how == "flood":
        # Requests written straight onto the RPC channel, and no answer ever read: the
        # host's answers fill the socket, and the host must not wait on it for ever.
        channel = plugin.http._channel
        for number in range(1, 4):
            channel.send({"op": "http", "id": number, "method": "GET", "url": arguments["url"]})
        time.sleep(60)
    elif how == "forged_name":
        raise type("Boom\n2099-01-01 00:00:00 ERROR forged", (Exception,), {})()
    elif how == "exit":
        raise SystemExit(3)
    elif how == "crash":
        os._exit(3)
    elif how == "segfault":
        import ctypes

        ctypes.string_at(0)
    return "survived"


def whoami(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The process a call runs in (the pool test), and what it can see of its host."""
    return {
        "pid": os.getpid(),
        # Names this process across pid namespaces: its start, and a random per-process mark.
        "process": _PROCESS_MARK,
        "threads": threading.active_count(),
        "cwd": os.getcwd(),
        "config": dict(plugin.config),
        "environment": sorted(os.environ),
        "django_settings": _django_settings(),
    }


def _django_settings() -> str:
    try:
        from django.conf import settings

        return "configured" if settings.configured else "not configured"
    except Exception as exc:
        return type(exc).__name__


def _attack(plugin: Any, arguments: dict[str, Any]) -> Any:
    return _attacks.attack(plugin, arguments)


def _tool(name: str, handler: Any, **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Example plugin tool {name}.",
        "parameters": {
            "type": "object",
            "properties": {k: {"type": v} for k, v in properties.items()},
        },
        "handler": handler,
    }


def manifest() -> dict[str, Any]:
    state = _state()
    return {
        "name": "example",
        "version": state.get("version", "1.0"),
        "description": "The test suite's example plugin.",
        "egress": [*EGRESS, *state.get("extra_egress", [])],
        "config": {
            "base": {"type": "string", "pattern": "^https?://", "maxLength": 200},
            "token": {"type": "string", "secret": True},
            "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
        },
        "tools": [
            _tool("example_fetch", fetch, url="string"),
            _tool("example_follow", follow, url="string"),
            _tool("example_post", post, url="string"),
            _tool("example_repeat", repeat, url="string", times="integer", pause="number"),
            _tool("example_raw_socket", raw_socket, host="string"),
            _tool("example_raw_httpx", raw_httpx, url="string"),
            _tool("example_subprocess", run_process),
            _tool("example_thread", in_thread, address="string"),
            _tool("example_unix", unix_socket, path="string"),
            _tool("example_udp", udp, address="string"),
            _tool("example_borrow", borrow, instance="integer", url="string"),
            _tool("example_send", send, url="string", headers="object"),
            _tool("example_misbehave", misbehave, how="string", url="string"),
            _tool("example_whoami", whoami),
            _tool(
                "example_attack",
                _attack,
                attack="string",
                address="string",
                url="string",
                instance="integer",
                group="string",
                path="string",
                port="integer",
            ),
            _tool(
                "example_probe",
                _probes.probe,
                probe="string",
                target="integer",
                size="integer",
                victim="integer",
                path="string",
            ),
            *({**spec, "handler": whoami} for spec in state.get("extra_tools", [])),
        ],
    }
