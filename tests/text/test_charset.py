from __future__ import annotations

import codecs

import pytest

from django_webfetch.text.charset import decode_body, sniff_meta_charset


@pytest.mark.parametrize(
    ("body", "charset", "html", "expected"),
    [
        ("café".encode("latin-1"), "ISO-8859-1", True, "café"),
        ("café".encode(), None, False, "café"),
        (codecs.BOM_UTF8 + "café".encode(), None, True, "café"),
        (codecs.BOM_UTF16_LE + "café".encode("utf-16-le"), None, True, "café"),
        (codecs.BOM_UTF16_BE + "café".encode("utf-16-be"), None, True, "café"),
        # the header wins over the BOM; a BOM the header agrees with is dropped
        (codecs.BOM_UTF8 + "café".encode(), "utf-8", True, "café"),
        (b'<meta charset="windows-1252">caf\xe9', None, True, '<meta charset="windows-1252">café'),
        (b"<meta charset=latin1>\xe9", "no-such-charset", True, "<meta charset=latin1>é"),
        (b"<meta charset=latin1>\xe9", None, False, "<meta charset=latin1>\ufffd"),
        (b"\x80\x81", None, True, "\ufffd\ufffd"),
        (b"abc\x80", "x-user-defined", True, "abc\uf780"),
        (b"abc", "iso-2022-kr", True, "abc"),  # WHATWG "replacement": not used
    ],
)
def test_decode_body(body, charset, html, expected):
    assert decode_body(body, charset, html=html) == expected


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"<META CHARSET='Shift_JIS'>", "cp932"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=euc-kr">', "cp949"),
        (b"<meta content='text/html;charset = iso-8859-2' http-equiv=content-type>", "iso8859-2"),
        (b"<!-- <meta charset=koi8-r> --><meta charset=utf-8>", "utf-8"),
        (b"<meta charset=utf-16le>", "utf-8"),  # a meta cannot really declare UTF-16
        (b"<html><head><meta name=x><meta charset=koi8-r />", "koi8-r"),
        (b"<meta\tcharset=koi8-r", "koi8-r"),  # cut off at the end of the window
        (b"<meta charset = >", None),
        (b"<meta charset=bogus><meta charset=koi8-r>", "koi8-r"),
        (b"<meta http-equiv=refresh content='0; url=/'>", None),
        (b"<meta http-equiv=content-type content='text/html'>", None),
        (b"<meta / charset=koi8-r>", "koi8-r"),
        (b"<meta charset", None),
        (b"<meta ", None),
        (b"<!-- never closed <meta charset=koi8-r>", None),
        (b"<div", None),
        (b"no markup", None),
        (b" " * 1024 + b"<meta charset=koi8-r>", None),  # past the first 1,024 bytes
    ],
)
def test_sniff_meta_charset(head, expected):
    found = sniff_meta_charset(head)
    assert (found and found.name) == expected
