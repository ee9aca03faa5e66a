"""The desk's refusals: a machine-readable code and its HTTP status (DESIGN decision 14)."""

from __future__ import annotations

STATUS = {
    "INVALID_REQUEST": 400,
    "NO_REVIEWER": 401,
    "NOT_YOUR_LEASE": 403,
    "UNKNOWN_LEASE": 404,
    "LEASE_EXPIRED": 409,
    "ALREADY_REVIEWED": 409,
    "BLIND_FIRST": 409,
    "NOTE_REQUIRED": 422,
    "INVALID_VERDICT": 422,
    "BROKER_UNAVAILABLE": 503,
}
"""Every error the desk's API answers with, and its HTTP status (DESIGN decision 14)."""


class DeskError(Exception):
    """A refusal the API returns as `{code, message}` with the code's status; nothing was published."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = STATUS[code]
        self.message = message
