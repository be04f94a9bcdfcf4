"""``python -m django_webfetch.net explain URL`` / ``fetch URL``: the guard from a shell.

Uses ``EgressPolicy()`` (external_filtered, DESIGN.md defaults, the system's DNS) unless
``--nameserver`` or ``--allow``/``--deny`` entries are given.  Exit status: 0 allowed or
fetched, 2 refused, 1 failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import EgressDenied, WebFetchError
from .fetcher import fetch
from .guard import explain
from .policy import EgressPolicy


def _policy(args: argparse.Namespace) -> EgressPolicy:
    return EgressPolicy(
        allowlist=tuple(args.allow),
        denylist=tuple(args.deny),
        nameservers=tuple(args.nameserver) if args.nameserver else None,
        ca_file=args.ca_file,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m django_webfetch.net")
    parser.add_argument("command", choices=["explain", "fetch"])
    parser.add_argument("url")
    parser.add_argument("--allow", action="append", default=[], metavar="ENTRY")
    parser.add_argument("--deny", action="append", default=[], metavar="ENTRY")
    parser.add_argument("--nameserver", action="append", default=[], metavar="IP")
    parser.add_argument("--ca-file", default=None)
    args = parser.parse_args(argv)
    policy = _policy(args)
    if args.command == "explain":
        decision = explain(args.url, policy=policy)
        print(decision.as_text())
        return 0 if decision.allowed else 2
    try:
        result = fetch(args.url, policy=policy)
    except EgressDenied as exc:
        print(f"refused: {exc.reason}", file=sys.stderr)
        return 2
    except WebFetchError as exc:
        print(f"failed: {exc.code}", file=sys.stderr)
        return 1
    for hop in result.hops:
        print(f"hop {hop.status} {hop.url} via {hop.address}", file=sys.stderr)
    print(f"HTTP {result.status} {result.media_type} {len(result.body)} bytes", file=sys.stderr)
    sys.stdout.write(result.body.decode(result.charset or "utf-8", "replace"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
