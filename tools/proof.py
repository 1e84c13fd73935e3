"""The server's proof that it wrote the server record (``tools.remote``, ``tools.http_guard``).

A module of its own: the CLI checks the proof before it sends anything, and importing the guard
for one HMAC would load the key store and the note modules behind it (issue 25).
"""

from __future__ import annotations

import hmac


def proof_of(secret: str, nonce: str) -> str:
    """The server's answer to a nonce: HMAC-SHA256 under the record secret, domain-separated
    so that the proof is never a value the secret is used for elsewhere."""
    return hmac.new(secret.encode(), b"amem-server-proof\x00" + nonce.encode(), "sha256").hexdigest()
