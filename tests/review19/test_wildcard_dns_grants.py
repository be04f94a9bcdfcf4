"""Finding: the wildcard-DNS refusal is a short name list; other services that answer any
name with the address written in it pass, and a ``*.`` grant under one is a grant of every
public address (issue 19 item 9's class, by another name).

``1u.ms`` (``1.2.3.4.1u.ms``), ``rbndr.us`` (``01020304.05060708.rbndr.us``) and
``nip.direct`` answer every name under them with the address the name spells, exactly as
``nip.io`` / ``sslip.io`` do, which are refused.
"""

from __future__ import annotations

import pytest

from django_webfetch.plugins.manifest import ManifestError, parse_egress_entry


@pytest.mark.parametrize("entry", ["*.1u.ms", "*.rbndr.us", "*.nip.direct"])
def test_a_suffix_grant_under_a_wildcard_dns_service_is_refused(entry):
    with pytest.raises(ManifestError) as info:
        parse_egress_entry(entry)
    assert info.value.reason in ("egress_wildcard_dns", "egress_public_suffix")
