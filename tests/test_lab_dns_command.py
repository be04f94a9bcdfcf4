"""``python -m tests.lab.dns``: the README's recipe for a web fetch on a machine without
outside DNS serves the names it is given, and NXDOMAIN for every other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dns.resolver
import pytest

from tests.asgi import free_port

ROOT = Path(__file__).resolve().parents[1]


def test_the_lab_dns_command_answers_the_names_it_was_given():
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.lab.dns",
            f"127.0.0.1:{port}",
            "news.lab.example=11.0.0.10,2606:4700:10::10",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith(f"DNS on 127.0.0.1 port {port}")
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = port
        answer = resolver.resolve("news.lab.example", "A")
        assert [r.address for r in answer] == ["11.0.0.10"]
        answer = resolver.resolve("news.lab.example", "AAAA", tcp=True)
        assert [r.address for r in answer] == ["2606:4700:10::10"]
        with pytest.raises(dns.resolver.NXDOMAIN):
            resolver.resolve("other.lab.example", "A")
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
