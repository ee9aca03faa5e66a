"""Who is reviewing: the desk records no review without a named reviewer (no anonymous write, ever).

Three ways to know, and nothing else:
- a fixed name (`judgeflow review --as NAME`), only on a loopback bind: whoever can reach a loopback port is
  already on the machine;
- a trusted proxy's header (`X-Forwarded-User`, as oauth2-proxy sets it), accepted only from the proxy
  addresses listed (`--trusted-proxy`); from any other peer the header is ignored;
- the signed-in user (`--users FILE`, `judgeflow.web_auth`).
Any other bind refuses to start without the proxy mode or sign-in.
"""

from __future__ import annotations

from dataclasses import dataclass

from judgeflow.desk.errors import DeskError
from judgeflow.web_auth import USER_HEADER, is_loopback

__all__ = ["USER_HEADER", "ReviewerIdentity", "check_name", "is_loopback"]

MAX_NAME = 200


def check_name(name: str) -> str:
    """A reviewer's name as recorded: 1 to 200 printable characters, no surrounding blanks."""
    clean = name.strip()
    if not clean or len(clean) > MAX_NAME or not clean.isprintable():
        raise ValueError(f"reviewer name {name!r}: 1 to {MAX_NAME} printable characters")
    return clean


@dataclass(frozen=True)
class ReviewerIdentity:
    fixed: str | None = None
    trusted_proxies: frozenset[str] = frozenset()
    signed_in: bool = False
    """The reviewer is the user signed in at the desk's own login page (and nobody else)."""

    def check_bind(self, host: str) -> None:
        """Refuse a bind that would let anyone write under the fixed name, or with no identity at all."""
        if self.fixed is None and not self.trusted_proxies and not self.signed_in:
            raise ValueError(
                "the desk needs a reviewer: --as NAME (loopback only), --trusted-proxy ADDRESS or --users FILE"
            )
        if not is_loopback(host) and not self.trusted_proxies and not self.signed_in:
            raise ValueError(
                f"refusing to serve the review desk on {host} without authentication: bind to 127.0.0.1, sign "
                "reviewers in with --users FILE, or put it behind an authenticating proxy named with --trusted-proxy"
            )
        if not is_loopback(host) and self.fixed is not None:
            raise ValueError(f"--as names every reviewer: loopback only (not {host})")

    def of(self, peer: str | None, header: str | None, user: str | None = None) -> str:
        """The reviewer of one request (`user`: who signed in, if anyone), or NO_REVIEWER."""
        if self.signed_in:
            if user is None:
                raise DeskError("NO_REVIEWER", "sign in first")
            return user
        if header is not None and peer in self.trusted_proxies:
            try:
                return check_name(header)
            except ValueError as exc:
                raise DeskError("NO_REVIEWER", str(exc)) from None
        if self.fixed is not None and peer is not None and is_loopback(peer):
            return self.fixed
        raise DeskError("NO_REVIEWER", "this request names no reviewer the desk trusts")
