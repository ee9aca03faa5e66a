"""The base model every contract derives from: strict, immutable, Zod-like."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Contract(BaseModel):
    """Strict parsing (no "72" -> 72, no "true" -> True), no NaN/Infinity,
    unknown fields ignored like Zod's default (the raw event keeps them)."""

    model_config = ConfigDict(
        strict=True,
        extra="ignore",
        frozen=True,
        allow_inf_nan=False,
        validate_default=False,
    )
