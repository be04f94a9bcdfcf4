"""The effective grant: what a plugin declares ∩ what the operator granted (DESIGN.md §8).

Both sides are lists of egress entries (exact host names, ``*.suffix`` patterns that never
match the apex, exact IP literals; no ports).  A destination is reachable only when some
declared entry AND some granted entry match it.  The intersection of two entries is the
narrower one when one covers the other, and empty otherwise (two different names, two
disjoint suffixes, a name and an address), so the result is again a plain list of entries
that the guard reads as an allowlist.
"""

from __future__ import annotations

from collections.abc import Iterable

from django_webfetch.net.hosts import EntryKind, ListEntry

from .manifest import canonical_entry, parse_egress_entry

__all__ = ["covers", "difference", "intersect"]


def covers(outer: ListEntry, inner: ListEntry) -> bool:
    """Does every destination ``inner`` matches also match ``outer``?"""
    if outer.kind is EntryKind.ADDRESS:
        return (
            inner.kind is EntryKind.ADDRESS
            and outer.address is not None
            and inner.address is not None
            and outer.address.packed == inner.address.packed
        )
    if outer.kind is EntryKind.NAME:
        return inner.kind is EntryKind.NAME and inner.value == outer.value
    # outer is *.suffix: strict subdomains only, never the apex.
    if inner.kind is EntryKind.NAME:
        return inner.value.endswith("." + outer.value)
    if inner.kind is EntryKind.SUFFIX:
        return inner.value == outer.value or inner.value.endswith("." + outer.value)
    return False


def intersect(declared: Iterable[str], granted: Iterable[str]) -> tuple[str, ...]:
    """The effective entries (canonical text).  Raises ``ManifestError`` on a bad entry."""
    decl = [parse_egress_entry(e) for e in declared]
    gran = [parse_egress_entry(e) for e in granted]
    result: list[str] = []
    for g in gran:
        for d in decl:
            if covers(d, g):
                result.append(canonical_entry(g.raw))
            elif covers(g, d):
                result.append(canonical_entry(d.raw))
    return tuple(dict.fromkeys(result))


def difference(new: Iterable[str], old: Iterable[str]) -> tuple[str, ...]:
    """Entries of ``new`` not covered by any entry of ``old`` (what an upgrade adds)."""
    previous = [parse_egress_entry(e) for e in old]
    added: list[str] = []
    for raw in new:
        entry = parse_egress_entry(raw)
        if not any(covers(p, entry) for p in previous):
            added.append(canonical_entry(raw))
    return tuple(added)
