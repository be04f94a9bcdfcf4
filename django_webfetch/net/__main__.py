"""``python -m django_webfetch.net explain URL`` / ``fetch URL``: the guard from a shell.

Uses ``EgressPolicy()`` (external_filtered, DESIGN.md defaults, the system's DNS) unless
``--nameserver`` or ``--allow``/``--deny`` entries are given.

Exit status (the same as ``manage.py webfetch explain|fetch``): 0 allowed / fetched,
1 refused by the guard, 2 failed or a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import EgressDenied, PolicyError, ResolutionError, WebFetchError
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


def _duration(seconds: float) -> str:
    """A duration for people: "850 ms", "1.2 s"."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m django_webfetch.net")
    parser.add_argument("command", choices=["explain", "fetch"])
    parser.add_argument("url")
    parser.add_argument("--allow", action="append", default=[], metavar="ENTRY")
    parser.add_argument("--deny", action="append", default=[], metavar="ENTRY")
    parser.add_argument("--nameserver", action="append", default=[], metavar="IP")
    parser.add_argument("--ca-file", default=None)
    parser.add_argument(
        "--no-resolve",
        action="store_true",
        help="explain: do not look the host up in DNS (a name is then ALLOWED SO FAR at best).",
    )
    args = parser.parse_args(argv)  # a usage error exits with 2 (argparse)
    try:
        policy = _policy(args)
    except PolicyError as exc:
        print(f"usage: {exc}", file=sys.stderr)
        return 2
    if args.command == "explain":
        decision = explain(args.url, policy=policy, resolve=not args.no_resolve)
        print(decision.as_text())
        if decision.allowed:
            return 0
        return 2 if decision.reason == ResolutionError.code else 1
    try:
        result = fetch(args.url, policy=policy)
    except EgressDenied as exc:
        print(f"refused: {exc.reason}", file=sys.stderr)
        return 1
    except WebFetchError as exc:
        failure = f" ({exc.failure}): {exc}" if exc.failure else ""
        print(f"failed: {exc.code}{failure}", file=sys.stderr)
        return 2
    for hop in result.hops:
        print(
            f"hop {hop.status} {hop.url} via {hop.address} in {_duration(hop.elapsed)}",
            file=sys.stderr,
        )
    print(
        f"HTTP {result.status} {result.media_type} {len(result.body)} bytes"
        f" in {_duration(result.elapsed)}",
        file=sys.stderr,
    )
    sys.stdout.write(result.body.decode(result.charset or "utf-8", "replace"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
