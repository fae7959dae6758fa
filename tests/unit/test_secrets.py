"""Stored client secrets (catalog/security/secrets.py): every hash form verifies its secret and only
its secret, including the scrypt form older floe versions stored. The token endpoint itself is in
tests/api/test_token_endpoint.py."""

from __future__ import annotations

import base64
import hashlib
import secrets

from catalog.security import secrets as forms


def legacy_scrypt_hash(secret: str) -> str:
    """The only form floe stored before secret hashes had schemes beside scrypt."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=2**14, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${2**14}$8$1${b64(salt).decode()}${b64(digest).decode()}"


def test_secret_hash_forms() -> None:
    """Every stored form verifies its secret and only its secret; malformed hashes never verify."""
    secret = forms.new_client_secret()
    legacy = legacy_scrypt_hash(secret)
    for stored in (
        forms.hash_secret(secret),
        forms.upgraded_hash(secret),
        forms.hash_password(secret, n=2**10),
        legacy,
    ):
        assert forms.verify_secret(secret, stored), stored
        assert not forms.verify_secret(secret + "x", stored), stored
        assert forms.is_slow(stored) == stored.startswith("scrypt$")
    assert forms.is_upgradable(legacy)
    assert not forms.is_upgradable(forms.hash_password(secret, n=2**10))
    assert forms.predates_versions(legacy)
    assert forms.predates_versions(forms.upgraded_hash(secret))
    assert not forms.predates_versions(forms.hash_secret(secret))
    assert not forms.predates_versions(forms.hash_password(secret, n=2**10))
    assert forms.secret_version(forms.hash_secret(secret)) != forms.secret_version(forms.hash_secret("other"))
    for malformed in ("", "hmac-sha256$", "hmac-sha256$!!", "scrypt$x$8$1$a$b", "md5$abc", "scrypt$1$2"):
        assert not forms.verify_secret(secret, malformed)
    assert not forms.verify_secret("\udcff", forms.hash_secret(secret))
