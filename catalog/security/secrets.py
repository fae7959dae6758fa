"""API key credentials: generation, hashing, constant-time verification.

A secret is shown once, when its key is created or rotated; only its hash is stored, in one of these forms:

- `hmac-sha256$<digest>`: a secret floe generated (`new_client_secret`, 256 random bits), hashed with
  HMAC-SHA256 under a fixed key (domain separation only). A fast hash is safe here, unlike for
  passwords: slow, salted hashes exist because people pick guessable passwords, so an attacker holding
  the hashes tries likely candidates first. A uniformly random 256-bit secret has no likely candidates;
  finding it from its hash takes ~2^255 tries at any speed, and no two secrets share a precomputed table,
  so salt and work factor add nothing. Checking one costs microseconds, so the token endpoint stays cheap.
- `hmac-sha256$<digest>$from-scrypt`: the same, written when a secret stored by an older floe (scrypt)
  was first used; the marker says the secret predates token secret versions (see `predates_versions`).
- `scrypt$N$r$p$salt$hash$operator`: a secret an operator chose (`FLOE_ADMIN_CLIENT_SECRET`), which may
  be guessable, so it keeps a slow salted hash. Verify it off the event loop (`is_slow`).
- `scrypt$N$r$p$salt$hash`: every secret of older floe versions; still verifies (slowly).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# scrypt cost: ~50-80 ms per check on one core; only for operator-chosen and legacy secrets.
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
_MAXMEM = 64 * 1024 * 1024

FAST = "hmac-sha256"
SLOW = "scrypt"
_FROM_SCRYPT = "from-scrypt"
_OPERATOR = "operator"
# Not a secret: the HMAC key only separates these digests from any other SHA-256 use (see above).
_FAST_KEY = b"floe api key secret v1"


def new_client_id() -> str:
    return "floe_" + secrets.token_hex(8)


def new_client_secret() -> str:
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret_digest(secret: str) -> bytes:
    """HMAC-SHA256 of the secret: what the fast form stores."""
    # surrogatepass: a form may decode to lone surrogates; that secret is wrong, not an error.
    return hmac.new(_FAST_KEY, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


def hash_secret(secret: str) -> str:
    """The fast form, for secrets floe generated (deterministic: no salt needed, see the module doc)."""
    return f"{FAST}${_b64(secret_digest(secret))}"


def upgraded_hash(secret: str) -> str:
    """The fast form of a verified secret that an older floe stored with scrypt."""
    return f"{hash_secret(secret)}${_FROM_SCRYPT}"


def hash_password(secret: str, *, n: int = SCRYPT_N) -> str:
    """The slow form (salted scrypt), for secrets a person chose. CPU-heavy: not on the event loop."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=n, r=SCRYPT_R, p=SCRYPT_P, maxmem=_MAXMEM, dklen=32)
    return f"{SLOW}${n}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}${_OPERATOR}"


def is_slow(stored: str) -> bool:
    """Whether checking against `stored` runs scrypt (tens of milliseconds of CPU)."""
    return stored.startswith(SLOW + "$")


def is_upgradable(stored: str) -> bool:
    """A scrypt hash of an older floe version, whose secret floe generated: worth the fast form."""
    return is_slow(stored) and len(stored.split("$")) == 6


def predates_versions(stored: str) -> bool:
    """Whether the secret behind `stored` was set by an older floe, whose tokens carry no secret version."""
    parts = stored.split("$")
    return (parts[0] == SLOW and len(parts) == 6) or (parts[0] == FAST and parts[2:] == [_FROM_SCRYPT])


def secret_version(stored: str) -> str:
    """A short fingerprint of the stored hash, carried in tokens: a rotated secret changes it, which ends
    the tokens issued for the old one. It reveals nothing of the secret (a hash of a hash)."""
    digest = hashlib.sha256(b"floe secret version\0" + stored.encode()).digest()
    return base64.urlsafe_b64encode(digest[:9]).decode()


def verify_secret(secret: str, stored: str) -> bool:
    """Constant-time comparison of `secret` against a stored hash (False for a malformed hash).

    Fast for `hmac-sha256` hashes; runs scrypt for `scrypt` ones (`is_slow`)."""
    try:
        parts = stored.split("$")
        if parts[0] == FAST and len(parts) in (2, 3):
            return hmac.compare_digest(secret_digest(secret), base64.b64decode(parts[1]))
        if parts[0] != SLOW or len(parts) not in (6, 7):
            return False
        _, n, r, p, salt, digest = parts[:6]
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_MAXMEM,
            dklen=len(expected),
        )
    except (ValueError, TypeError, IndexError):
        return False
    return hmac.compare_digest(actual, expected)


# A hash of a random secret: unknown client ids are checked against it so that a wrong id and a wrong
# secret (of a key with a generated secret) take the same time.
DUMMY_HASH = hash_secret(new_client_secret())
