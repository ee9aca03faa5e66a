"""The review desk's pure parts: who may review, the audit pick, the review contract's versions, the refusals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgeflow.desk.leases import STATUS, DeskError, check_verdict, review_id_for
from judgeflow.desk.reviewer import ReviewerIdentity, check_name, is_loopback
from projections.review_items import ReviewSample, review_pick
from schemas import parse_human_review
from schemas.errors import ContractError

SEED_003_REVIEW = {
    "schema_version": "1.0",
    "review_id": "7d1a4c1e-2f3b-5c6d-8e9f-0a1b2c3d4e5f",
    "claim_id": "claim-1",
    "reviewer": "ana",
    "final_verdict": "fail",
    "notes": None,
    "created_at": "2026-03-31T12:00:00Z",
}


def test_a_fixed_name_is_for_loopback_only_and_any_other_bind_needs_a_trusted_proxy() -> None:
    ReviewerIdentity("ana").check_bind("127.0.0.1")
    ReviewerIdentity("ana").check_bind("::1")
    for host in ("0.0.0.0", "10.1.2.3", "desk.example.org"):
        with pytest.raises(ValueError, match="authentication|loopback"):
            ReviewerIdentity("ana").check_bind(host)
    with pytest.raises(ValueError, match="needs a reviewer"):
        ReviewerIdentity().check_bind("127.0.0.1")
    ReviewerIdentity(trusted_proxies=frozenset({"10.0.0.5"})).check_bind("0.0.0.0")
    with pytest.raises(ValueError, match="loopback only"):
        ReviewerIdentity("ana", frozenset({"10.0.0.5"})).check_bind("0.0.0.0")


def test_the_header_counts_only_from_a_trusted_proxy() -> None:
    who = ReviewerIdentity(trusted_proxies=frozenset({"10.0.0.5"}))
    assert who.of("10.0.0.5", "ben") == "ben"
    for peer, header in (("10.0.0.6", "ben"), ("127.0.0.1", "ben"), ("10.0.0.5", None), (None, "ben")):
        with pytest.raises(DeskError) as refused:
            who.of(peer, header)
        assert refused.value.code == "NO_REVIEWER" and refused.value.status == 401
    with pytest.raises(DeskError):
        who.of("10.0.0.5", "   ")
    fixed = ReviewerIdentity("ana")
    assert fixed.of("127.0.0.1", "mallory") == "ana"  # an untrusted header never renames the reviewer
    with pytest.raises(DeskError):
        fixed.of("10.0.0.6", None)


def test_names_and_verdicts() -> None:
    assert check_name("  ana ") == "ana" and is_loopback("localhost") and not is_loopback("example.org")
    for bad in ("", "   ", "a\nb", "x" * 201):
        with pytest.raises(ValueError):
            check_name(bad)
    assert [check_verdict(v) for v in ("pass", "fail", "unclear")] == ["pass", "fail", "unclear"]
    for bad in ("PASS", None, 1, "maybe"):
        with pytest.raises(DeskError) as refused:
            check_verdict(bad)
        assert refused.value.code == "INVALID_VERDICT"
    assert set(STATUS) == {"INVALID_REQUEST", "NO_REVIEWER", "NOT_YOUR_LEASE", "UNKNOWN_LEASE", "LEASE_EXPIRED",
                           "ALREADY_REVIEWED", "BLIND_FIRST", "NOTE_REQUIRED", "INVALID_VERDICT",
                           "BROKER_UNAVAILABLE"}  # fmt: skip


def test_one_lease_is_one_review_id() -> None:
    assert review_id_for("a0b1c2d3-0000-4000-8000-000000000001") == review_id_for(
        "a0b1c2d3-0000-4000-8000-000000000001"
    )
    assert review_id_for("a0b1c2d3-0000-4000-8000-000000000001") != review_id_for(
        "a0b1c2d3-0000-4000-8000-000000000002"
    )


@given(st.text(min_size=1, max_size=40))
def test_a_pick_is_a_fraction_and_the_same_every_time(claim_id: str) -> None:
    for purpose in ("audit", "overlap"):
        place = review_pick(purpose, claim_id)
        assert 0 <= place < 1 and place == review_pick(purpose, claim_id)


def test_the_audit_share_picks_about_its_share_and_the_two_picks_are_independent() -> None:
    ids = [f"claim-{i}" for i in range(20_000)]
    sample = ReviewSample(audit_share=0.02, overlap_share=0.1)
    audited = [c for c in ids if sample.audited(c)]
    assert 0.017 < len(audited) / len(ids) < 0.023
    both = sum(sample.wanted(c) == 2 for c in audited) / len(audited)
    assert 0.07 < both < 0.13  # the overlap pick does not care whether a claim was audited
    with pytest.raises(ValueError):
        ReviewSample(audit_share=1.5)


def test_a_seed_003_review_is_read_as_1_1_with_the_desk_fields_null() -> None:
    review = parse_human_review(json.dumps(SEED_003_REVIEW))
    assert review.schema_version == "1.1"
    assert (review.review_seconds, review.blind_verdict, review.source, review.lease_id) == (None, None, None, None)
    desk = {**SEED_003_REVIEW, "schema_version": "1.1", "review_seconds": 42.0, "blind_verdict": "pass",
            "source": "audit", "lease_id": "9b2f4c1e-2f3b-4c6d-8e9f-0a1b2c3d4e5f"}  # fmt: skip
    assert parse_human_review(json.dumps(desk)).source == "audit"
    for field, bad in (("source", "random"), ("blind_verdict", "PASS"), ("review_seconds", -1), ("lease_id", "x")):
        with pytest.raises(ContractError):
            parse_human_review(json.dumps({**desk, field: bad}))
    with pytest.raises(ContractError):
        parse_human_review(json.dumps({**SEED_003_REVIEW, "schema_version": "2.0"}))
