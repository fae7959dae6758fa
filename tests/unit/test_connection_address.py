"""The client address the per-address connection cap counts by (catalog/http_limits.py)."""

from __future__ import annotations

from catalog.connection_limits import address_key


def test_ipv4_addresses_count_apart() -> None:
    assert address_key("127.0.0.1") == "127.0.0.1"
    assert address_key("127.0.0.2") != address_key("127.0.0.1")


def test_an_ipv6_host_counts_by_its_64() -> None:
    # A host is commonly given a whole /64: its addresses count as one.
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("fe80::1%eth0") == "fe80::/64"


def test_an_ipv4_mapped_address_counts_as_its_ipv4_address() -> None:
    assert address_key("::ffff:10.0.0.7") == "10.0.0.7"
