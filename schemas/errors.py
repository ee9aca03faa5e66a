"""Machine-readable contract errors.

Every way an event can fail the contract ends in one exception type,
`ContractError`, whose `codes` are SCREAMING_SNAKE_CASE strings that a
dead-letter consumer can count and filter on without parsing prose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorDetail:
    """One violation: a code, where it happened, and a human message."""

    code: str
    loc: tuple[str | int, ...] = ()
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "loc": ".".join(str(p) for p in self.loc), "message": self.message}


@dataclass(frozen=True)
class ContractWarning(ErrorDetail):
    """A finding that never rejects an event (stored and shown, never dropped)."""


class ContractError(ValueError):
    """An event that does not satisfy the judgeflow contract.

    `codes` lists each distinct code once, in order of first appearance;
    `errors` holds every violation with its location.
    """

    def __init__(self, errors: list[ErrorDetail]):
        if not errors:
            raise ValueError("ContractError needs at least one error")
        self.errors: list[ErrorDetail] = list(errors)
        self.codes: list[str] = list(dict.fromkeys(e.code for e in self.errors))
        super().__init__(self._summary())

    @classmethod
    def single(cls, code: str, message: str, loc: tuple[str | int, ...] = ()) -> ContractError:
        return cls([ErrorDetail(code=code, loc=loc, message=message)])

    def _summary(self) -> str:
        head = "; ".join(
            f"{e.code} at {'.'.join(str(p) for p in e.loc) or '<root>'}: {e.message}" for e in self.errors[:5]
        )
        more = f" (+{len(self.errors) - 5} more)" if len(self.errors) > 5 else ""
        return head + more

    def to_dict(self) -> dict[str, Any]:
        return {"codes": self.codes, "errors": [e.to_dict() for e in self.errors]}


class RubricRefusal(ContractError):
    """A well-formed event its rubric refuses: `event` is what was parsed, for a caller that must act on whose
    it was (a refused judge output counts as its judge's failure in the run)."""

    def __init__(self, errors: list[ErrorDetail], event: Any):
        super().__init__(errors)
        self.event = event
