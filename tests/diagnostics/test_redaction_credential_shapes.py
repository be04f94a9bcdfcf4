"""Credential shapes that ``redact_text`` removes (get_last_exception, read_source,
search_code, probe_url), beyond ``name=value`` secrets.

Capability URLs (whoever holds the URL holds the right): Slack/Discord webhooks, Telegram
bot tokens, Azure SAS ``sig=``, S3/GCS presigned ``X-Amz-Signature`` / ``X-Goog-Signature``;
a key inside a connection string assigned to an innocent name (Azure ``AccountKey=``);
Django's own generated ``SECRET_KEY`` shape (``django-insecure-…``); npm's ``_auth=``;
positional passwords of ``sqlcmd -P`` and ``htpasswd -b``.  Each line below carries the
secret part named in ``secret``; after redaction it is gone.
"""

from __future__ import annotations

import pytest

from django_webfetch.diagnostics.paths import redact_text

CASES = [
    (
        "posting to https://hooks.slack.com/services/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",
        "Qx7pLm2Zr9Kd4Wv8Ns1Tb3Yh",
    ),
    (
        "POST https://discord.com/api/webhooks/123456789012345678/Qx7pLm2Zr9Kd4Wv8Ns1Tb3YhQx7pLm2Zr9",
        "Qx7pLm2Zr9Kd4Wv8Ns1Tb3YhQx7pLm2Zr9",
    ),
    (
        "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    ),
    (
        "download https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r&sig=Zm9vYmFyYmF6cXV4MTIz%3D",
        "Zm9vYmFyYmF6cXV4MTIz",
    ),
    (
        "url=https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef",
    ),
    (
        "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=fedcba9876543210fedcba",
        "fedcba9876543210fedcba",
    ),
    (
        "conn = DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0c2VjcmV0c2Vj;EndpointSuffix=core.windows.net",  # noqa: E501
        "c2VjcmV0c2VjcmV0c2Vj",
    ),
    (
        "{'KEYRING': 'django-insecure-k3#9x!v2m@q8z$w7r^t6y&u5i*o4p'}",
        "k3#9x!v2m@q8z$w7r^t6y&u5i*o4p",
    ),
    ("//registry.npmjs.org/:_auth=YWRtaW46aHVudGVyMjI=", "YWRtaW46aHVudGVyMjI="),
    ("sqlcmd -S db -U sa -P Hunter22xyz", "Hunter22xyz"),
    ("htpasswd -b /etc/nginx/htpasswd admin Hunter22xyz", "Hunter22xyz"),
]


@pytest.mark.parametrize(("line", "secret"), CASES, ids=[c[1][:12] for c in CASES])
def test_the_credential_is_redacted(line, secret):
    assert secret not in redact_text(line)
