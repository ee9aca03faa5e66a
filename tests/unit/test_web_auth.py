"""The pages' sign-in without a server: argon2 hashes in a users file only its owner can read, the failed-login
limit on a scripted clock, and the desk's bind policy with sign-in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judgeflow.desk.errors import DeskError
from judgeflow.desk.reviewer import ReviewerIdentity
from judgeflow.web_auth import (
    FAILURE_WINDOW_SECONDS,
    FAILURES_PER_ADDRESS,
    FAILURES_PER_NAME,
    FailedLogins,
    SignIn,
    UsersFileError,
    add_user,
    load_users,
)

PASSWORD = "correct horse battery"


def test_a_user_added_signs_in_with_the_password_and_only_with_it(tmp_path: Path) -> None:
    path = tmp_path / "users.txt"
    add_user(path, "ana", PASSWORD)
    add_user(path, "ben", PASSWORD + "!")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    users = load_users(path)
    assert sorted(users) == ["ana", "ben"] and all(h.startswith("$argon2id$") for h in users.values())
    assert PASSWORD not in path.read_text()
    sign_in = SignIn(users)
    assert sign_in.verify("ana", PASSWORD)
    assert not sign_in.verify("ana", PASSWORD + "!")
    assert not sign_in.verify("nobody", PASSWORD)
    add_user(path, "ana", "another long password")  # a new password replaces the old one
    assert not SignIn(load_users(path)).verify("ana", PASSWORD)


@pytest.mark.parametrize(
    ("content", "mode", "refusal"),
    [
        ("ana:$argon2id$v=19$m=65536,t=3,p=4$x$y\n", 0o644, "open to other users"),
        ("ana:plaintext\n", 0o600, "line 1"),
        ("no separator\n", 0o600, "line 1"),
    ],
)
def test_a_users_file_open_to_others_or_malformed_is_refused(
    tmp_path: Path, content: str, mode: int, refusal: str
) -> None:
    path = tmp_path / "users.txt"
    path.write_text(content)
    os.chmod(path, mode)
    with pytest.raises(UsersFileError, match=refusal):
        load_users(path)
    with pytest.raises(UsersFileError, match="No such file"):
        load_users(tmp_path / "missing.txt")


def test_short_passwords_and_names_with_a_colon_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="12 characters"):
        add_user(tmp_path / "u", "ana", "short")
    with pytest.raises(ValueError, match="without ':'"):
        add_user(tmp_path / "u", "a:b", PASSWORD)


def test_failed_logins_block_a_name_and_an_address_until_the_window_passes() -> None:
    now = [0.0]
    limit = FailedLogins(clock=lambda: now[0])
    for _ in range(FAILURES_PER_NAME):
        assert not limit.blocked("ana", "10.0.0.1")
        limit.failed("ana", "10.0.0.1")
    assert limit.blocked("ana", "10.0.0.2")  # the name, from anywhere
    assert not limit.blocked("ben", "10.0.0.2")
    now[0] += FAILURE_WINDOW_SECONDS
    assert not limit.blocked("ana", "10.0.0.1")
    for i in range(FAILURES_PER_ADDRESS):
        limit.failed(f"user-{i}", "10.0.0.9")
    assert limit.blocked("someone-else", "10.0.0.9")  # the address, whatever the name


def test_with_sign_in_the_reviewer_is_the_signed_in_user_and_any_bind_is_allowed() -> None:
    who = ReviewerIdentity(signed_in=True)
    who.check_bind("0.0.0.0")
    assert who.of("10.1.2.3", "mallory", "ana") == "ana"  # a forged proxy header changes nothing
    with pytest.raises(DeskError) as refused:
        who.of("127.0.0.1", "mallory", None)
    assert refused.value.code == "NO_REVIEWER"
    with pytest.raises(ValueError, match="without authentication"):
        ReviewerIdentity(fixed="ana").check_bind("0.0.0.0")
