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


_VARIANT = {c: format(int(c, 16) & 0x3 | 0x8, "x") for c in "0123456789abcdef"}
"""The RFC 4122 variant bits (10xx) set in the hex digit that holds them."""


def event_id(step: str, *identity: object) -> str:
    name = step + "|" + "|".join(map(str, identity))
    h = sha1(_NAMESPACE_BYTES + name.encode()).hexdigest()
    # Version 5 is the 13th hex digit; the variant, the top bits of the 17th.
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"
