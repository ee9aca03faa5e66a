"""Deterministic event ids (DESIGN decision 9): uuid5 of input identity and step.

A redelivered input re-emits the same ids, so every consumer drops duplicates. The id is computed as
RFC 4122 defines uuid5 (SHA-1 of namespace and name, version and variant bits set) without building `uuid.UUID`
objects, which cost a third of a claim's routing step; a property test holds it equal to `uuid.uuid5`.
"""

from __future__ import annotations

import uuid
from hashlib import sha1

NAMESPACE = uuid.UUID("0d9a3b7e-2f6c-5e41-9b8a-5c3f1e7d2a64")
_NAMESPACE_BYTES = NAMESPACE.bytes


def event_id(step: str, *identity: object) -> str:
    name = step + "|" + "|".join(str(p) for p in identity)
    digest = bytearray(sha1(_NAMESPACE_BYTES + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
