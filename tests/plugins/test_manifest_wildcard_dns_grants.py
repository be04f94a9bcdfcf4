"""A plugin's ``*.`` egress grant under a wildcard-DNS service is refused.

Services such as ``1u.ms`` (``1.2.3.4.1u.ms``), ``rbndr.us``
(``01020304.05060708.rbndr.us``) and ``nip.direct`` answer every name under them with the
address the name spells, as ``nip.io`` / ``sslip.io`` do: a ``*.`` grant under one would be
a grant of every public address.
"""

from __future__ import annotations

import pytest

from django_webfetch.plugins.manifest import ManifestError, parse_egress_entry


@pytest.mark.parametrize("entry", ["*.1u.ms", "*.rbndr.us", "*.nip.direct"])
def test_a_suffix_grant_under_a_wildcard_dns_service_is_refused(entry):
    with pytest.raises(ManifestError) as info:
        parse_egress_entry(entry)
    assert info.value.reason in ("egress_wildcard_dns", "egress_public_suffix")
