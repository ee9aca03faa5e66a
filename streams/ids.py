"""Deterministic event ids (DESIGN decision 9): uuid5 of input identity and step.

A redelivered input re-emits the same ids, so every consumer drops duplicates.
"""

from __future__ import annotations

import uuid

NAMESPACE = uuid.UUID("0d9a3b7e-2f6c-5e41-9b8a-5c3f1e7d2a64")


def event_id(step: str, *identity: object) -> str:
    return str(uuid.uuid5(NAMESPACE, step + "|" + "|".join(str(p) for p in identity)))
