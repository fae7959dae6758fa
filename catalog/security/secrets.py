"""API key credentials: generation, salted scrypt hashes, constant-time verification.

A secret is shown once, when its key is created or rotated; only its hash is stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# scrypt cost: ~50 ms per check on one core. Token requests are rare (once per token lifetime per
# client), and the slowness is what makes a stolen hash expensive to brute-force.
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
_MAXMEM = 64 * 1024 * 1024


def new_client_id() -> str:
    return "floe_" + secrets.token_hex(8)


def new_client_secret() -> str:
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hash_secret(secret: str, *, n: int = SCRYPT_N) -> str:
    """`scrypt$N$r$p$salt$hash`, with a fresh 16-byte salt."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=n, r=SCRYPT_R, p=SCRYPT_P, maxmem=_MAXMEM, dklen=32)
    return f"scrypt${n}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, stored: str) -> bool:
    """Constant-time comparison of `secret` against a stored hash (False for a malformed hash)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
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
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


# A hash of a random secret: unknown client ids are checked against it so that a wrong id and a wrong
# secret take the same time.
DUMMY_HASH = hash_secret(secrets.token_urlsafe(16))
