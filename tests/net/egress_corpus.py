"""A development corpus of URL spellings on which lenient parsers and ours disagree.

``corpus(host, v4, v6)`` builds every case around one lab host name and its addresses, so
the same strings can be fed through ``net.fetch`` and through every other way out of the
app (the guarded httpx clients, the httpx2 bridge, the plugin client) and the verdicts
compared.  Generated, not hand-picked: every Unicode decimal-digit script spells the port,
every position of a confusable character is tried.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable

from django_webfetch.net import EgressDenied, WebFetchError


def verdict(call: Callable[[], object]) -> str:
    """What one path answered: the refusal's reason, the failure's code, or "ok"."""
    try:
        call()
    except EgressDenied as exc:
        return exc.reason
    except WebFetchError as exc:
        return exc.code
    return "ok"


def _digit_zeros() -> list[str]:
    """The zero of every Unicode decimal-digit run (Nd: ASCII, Arabic-Indic, fullwidth...)."""
    zeros = []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) == "Nd" and unicodedata.decimal(char) == 0:
            zeros.append(char)
    return zeros


def _in_script(number: str, zero: str) -> str:
    return "".join(chr(ord(zero) + int(d)) for d in number)


def port_spellings(port: int) -> list[str]:
    """``port`` as written in every decimal-digit script, plus the other lenient forms."""
    text = str(port)
    spelled = [_in_script(text, zero) for zero in _digit_zeros() if zero != "0"]
    mixed = [_in_script(text[:1], "\uff10") + text[1:], text[:1] + _in_script(text[1:], "\u0660")]
    lenient = [
        f"{text[:1]}_{text[1:]}",
        f"0{text}",
        f"00{text}",
        f"+{text}",
        f" {text}",
        f"{text} ",
        f"{text}.",
        f"{text}\t",
        hex(port),
        "\u2078\u2070",  # superscripts: digits, not decimal
        "",
    ]
    return spelled + mixed + lenient


def corpus(host: str, v4: str, v6: str, path: str = "/plain") -> list[str]:
    """Every case, around ``host`` (resolving to ``v4``/``v6`` in the lab)."""
    label, _, rest = host.partition(".")
    cases: list[str] = [
        # The plain forms (allowed): the baseline every path must agree on.
        f"http://{host}{path}",
        f"https://{host}{path}",
        f"http://{host}:80{path}",
        f"https://{host}:443{path}",
        f"http://{host}.{path}",
        f"http://{host.upper()}{path}",
        f"http://{v4}{path}",
        f"http://[{v6}]{path}",
        f"http://{host}{path}?q=1#frag",
        f"http://{host}/a/../{path.lstrip('/')}",
    ]
    # Ports: every decimal-digit script, fullwidth, underscores, signs, spaces, hex.
    for spelled in port_spellings(80):
        cases.append(f"http://{host}:{spelled}{path}")
    for spelled in ("\uff18\uff10", "8_0", "\u0668\u0660"):
        cases.append(f"http://{v4}:{spelled}{path}")
        cases.append(f"http://[{v6}]:{spelled}{path}")
    for spelled in ("\uff14\uff14\uff13", "4_43", "\u0664\u0664\u0663"):
        cases.append(f"https://{host}:{spelled}{path}")
    cases += [f"http://{host}:8080{path}", f"http://{host}:0{path}", f"http://{host}:65536{path}"]
    # Schemes: mixed case, missing slashes, others.
    cases += [
        f"HTTP://{host}{path}",
        f"Http://{host}{path}",
        f"hTtPs://{host}{path}",
        f"http:/{host}{path}",
        f"http:{host}{path}",
        f"http:\\\\{host}{path}",
        f"ftp://{host}{path}",
        f"file://{host}/etc/passwd",
        f" http://{host}{path}",
        f"http ://{host}{path}",
        f"//{host}{path}",
        f"{host}{path}",
    ]
    # Host names: IDN, confusables, full stops, case, trailing dots.
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in label)
    cases += [
        f"http://b\u00fccher.{rest}{path}",
        f"http://xn--bcher-kva.{rest}{path}",
        f"http://{fullwidth}.{rest}{path}",
        f"http://{label}\u3002{rest}{path}",
        f"http://{label}\uff0e{rest}{path}",
        f"http://{label}\uff61{rest}{path}",
        f"http://{label}\u00ad.{rest}{path}",  # soft hyphen
        f"http://{label}\u200b.{rest}{path}",  # zero-width space
        f"http://\u212a{label[1:]}.{rest}{path}",  # Kelvin sign K
        f"http://{host}..{path}",
        f"http://.{host}{path}",
        f"http://{host}\u0000{path}",
        f"http://{host}\t{path}",
        f"http://{host}\n{path}",
        f"http://{label} .{rest}{path}",
    ]
    # Userinfo, even empty; the authority ends at the first "/", "?" or "#".
    cases += [
        f"http://user@{host}{path}",
        f"http://@{host}{path}",
        f"http://user:pw@{host}{path}",
        f"http://{host}@ungranted.lab.example{path}",
        f"http://{host}:80@ungranted.lab.example{path}",
        f"http://ungranted.lab.example#@{host}{path}",
        f"http://ungranted.lab.example?@{host}{path}",
    ]
    # Backslashes and percent-encoding.
    cases += [
        f"http://{host}\\@ungranted.lab.example{path}",
        f"http://{host}\\{path.lstrip('/')}",
        f"http://{label}%2e{rest}{path}",
        f"http://%{ord(label[0]):02x}{host[1:]}{path}",
        f"http://{host}%00{path}",
        f"http://{host}%2f{path}",
        f"http://{v4}%2f{path}",
        f"http://{host}{path}%2e%2e/",
    ]
    # IPv6: zone ids, mapped and compatible forms, unbracketed.
    cases += [
        f"http://[{v6}%25eth0]{path}",
        f"http://[{v6}%eth0]{path}",
        "http://[fe80::1%25lo]/plain",
        f"http://[::ffff:{v4}]{path}",
        f"http://[::{v4}]{path}",
        f"http://{v6}{path}",
        f"http://[{v6.upper()}]{path}",
    ]
    # Legacy numeric hosts: one number, octal, hex, short forms.
    a, b, c, d = (int(part) for part in v4.split("."))
    number = (a << 24) | (b << 16) | (c << 8) | d
    cases += [
        f"http://{number}{path}",
        f"http://0x{number:08x}{path}",
        f"http://0{a:o}.{b}.{c}.0{d:o}{path}",
        f"http://0x{a:x}.{b}.{c}.{d}{path}",
        f"http://{a}.{(b << 16) | (c << 8) | d}{path}",
        f"http://{a}.{b}.{(c << 8) | d}{path}",
        f"http://{v4}.{path}",
        f"http://{_in_script(v4[:1], chr(0xFF10))}{v4[1:]}{path}",
    ]
    return list(dict.fromkeys(cases))
