"""Pure parts of the fetcher and transport: media types, bounded decoding, pin checks."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from ipaddress import ip_address

import httpx
import pytest

from django_webfetch.net import (
    FetchError,
    ResponseTooLarge,
    UnsupportedContentEncoding,
    parse_media_type,
)
from django_webfetch.net.body import BoundedDecoder as _BoundedDecoder
from django_webfetch.net.body import content_coding as _content_coding
from django_webfetch.net.guard import ResolvedDestination
from django_webfetch.net.transport import PinnedTransport, ssl_context
from django_webfetch.net.urlparse import parse_url


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text/html", ("text/html", None)),
        ("Text/HTML; Charset=UTF-8", ("text/html", "utf-8")),
        ('text/plain; charset="iso-8859-1"', ("text/plain", "iso-8859-1")),
        ("text/html; charset=", ("text/html", None)),
        ("text/html; charset=<script>", ("text/html", None)),
        ("text/html; foo=bar; charset=utf-8", ("text/html", "utf-8")),
        ("text/html; charset", ("text/html", None)),
        ("", ("", None)),
        (None, ("", None)),
        ("texthtml", ("", None)),
        ("/html", ("", None)),
        ("text/", ("", None)),
        ("text/ht ml", ("", None)),
        ("text/html<<<END", ("", None)),
        ("a/" + "b" * 63, ("", None)),
        ("a/" + "b" * 62, ("a/" + "b" * 62, None)),
        ("application/xhtml+xml", ("application/xhtml+xml", None)),
    ],
)
def test_parse_media_type(value, expected):
    assert parse_media_type(value) == expected


def _feed_all(decoder, data, chunk=64 * 1024):
    out = bytearray()
    for i in range(0, len(data), chunk):
        out += decoder.feed(data[i : i + chunk])
    out += decoder.flush()
    return bytes(out)


def test_identity_decoder_caps():
    decoder = _BoundedDecoder("identity", 10)
    assert decoder.feed(b"12345") == b"12345"
    assert decoder.flush() == b""
    with pytest.raises(ResponseTooLarge):
        decoder.feed(b"123456")


def test_gzip_roundtrip_and_concatenated_members():
    data = gzip.compress(b"hello ") + gzip.compress(b"world")
    assert _feed_all(_BoundedDecoder("gzip", 100), data, chunk=3) == b"hello world"


@pytest.mark.parametrize("raw", [False, True])
def test_deflate_zlib_and_raw(raw):
    if raw:
        obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = obj.compress(b"deflated text") + obj.flush()
    else:
        data = zlib.compress(b"deflated text")
    assert _feed_all(_BoundedDecoder("deflate", 100), data) == b"deflated text"


def test_corrupt_gzip_is_a_fetch_error():
    with pytest.raises(FetchError) as info:
        _feed_all(_BoundedDecoder("gzip", 100), b"\x1f\x8b\x08garbage-garbage")
    assert info.value.code == "fetch_error"


def test_gzip_bomb_stops_at_the_cap_with_bounded_memory():
    # 64 MiB of zeros compress to ~64 KiB; the decoder must stop at the 2 MiB cap having
    # allocated about the cap, not the inflated size.
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    block = b"\0" * (1024 * 1024)
    bomb = b"".join(compressor.compress(block) for _ in range(64)) + compressor.flush()
    cap = 2 * 1024 * 1024
    tracemalloc.start()
    try:
        decoder = _BoundedDecoder("gzip", cap)
        with pytest.raises(ResponseTooLarge):
            _feed_all(decoder, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.total <= cap + 1
    assert peak < 8 * 1024 * 1024


def test_bomb_in_one_chunk_never_inflates_past_the_cap():
    bomb = gzip.compress(b"\0" * (32 * 1024 * 1024))
    decoder = _BoundedDecoder("gzip", 1000)
    with pytest.raises(ResponseTooLarge):
        decoder.feed(bomb)
    assert decoder.total == 1001


def _response(headers):
    return httpx.Response(200, headers=headers)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, "identity"),
        ({"Content-Encoding": "identity"}, "identity"),
        ({"Content-Encoding": "GZIP"}, "gzip"),
        ({"Content-Encoding": "x-gzip"}, "gzip"),
        ({"Content-Encoding": "deflate"}, "deflate"),
        ([("Content-Encoding", "identity"), ("Content-Encoding", "gzip")], "gzip"),
    ],
)
def test_content_coding_accepted(headers, expected):
    assert _content_coding(_response(headers)) == expected


@pytest.mark.parametrize(
    "value", ["br", "zstd", "gzip, gzip", "gzip, br", "compress", "gzip,deflate"]
)
def test_content_coding_refused(value):
    with pytest.raises(UnsupportedContentEncoding):
        _content_coding(_response({"Content-Encoding": value}))


def _destination(url="http://pinned.example/", addresses=("11.0.0.10",)):
    return ResolvedDestination(
        url=parse_url(url), addresses=tuple(ip_address(a) for a in addresses)
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://other.example/",
        "https://pinned.example/",
        "http://pinned.example:8080/",
    ],
)
def test_transport_refuses_requests_for_another_destination(url):
    transport = PinnedTransport(_destination(), deadline=time.monotonic() + 5)
    with pytest.raises(FetchError) as caught:
        transport.handle_request(httpx.Request("GET", url))
    assert caught.value.failure == "connect_failed"
    transport.close()


def test_ssl_context_is_shared_and_strict():
    first = ssl_context(None)
    assert first is ssl_context(None)
    assert first.check_hostname
    assert first.minimum_version.name == "TLSv1_2"
