"""The review desk as a reviewer meets it: headless Chromium (Debian's, through Playwright) on `judgeflow review`,
against a real worker, projector, Kafka and Postgres. Two reviewers in two browser contexts never see the same
item; the judges' verdicts are not in the page until the reviewer chose; the keyboard does everything; an
overturn needs a note; a submit becomes a row in Postgres and moves the overturn rate; judge text is text."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from judgeflow import workload
from judgeflow.web_auth import add_user
from tests.conftest import ARTIFACTS as ARTIFACT_PATHS
from tests.integration.test_dashboard import ARTIFACTS, BROWSER_ARGS, CHROMIUM
from tests.scaffold import Pipeline
from tests.support import judgeflow_server, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HOSTILE = "<img src=x onerror=\"document.title='owned'\">"


@contextmanager
def review_desk(p: Pipeline, reviewer: str) -> Iterator[str]:
    """`judgeflow review --as REVIEWER` on the pipeline's topics and schema, until it answers."""
    env = {"DATABASE_URL": p.database_url, "KAFKA_BOOTSTRAP_SERVERS": p.bootstrap, "JUDGEFLOW_TOPIC_PREFIX": p.prefix}
    with judgeflow_server(["review", "--as", reviewer, "--schema", p.schema], env, "the review desk") as base:
        yield base


def routed_claims(p: Pipeline) -> list[str]:
    """Three claims the policy sends to people: one as the workload makes it, one whose quote is not in its
    passage, one whose judge wrote markup."""
    rng = random.Random(5)
    docs = [workload.claim_check(rng, f"{p.prefix}c{i}", verdict="fail", score=0.1, confidence=0.3) for i in range(3)]
    for i, doc in enumerate(docs):
        doc["checked_at"] = f"2026-11-30T22:0{i}:00Z"  # the queue's order
    docs[1]["passage_quote"] = "revenue fell 40% in the fourth quarter"
    docs[2]["reason"] = f"The passage contradicts it. {HOSTILE}"
    p.send((p.names.checks, d["claim_id"].encode(), json.dumps(d).encode()) for d in docs)
    return [d["claim_id"] for d in docs]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_a_reviewer_works_the_queue_blind_first_with_the_keyboard(pipeline: Pipeline) -> None:
    from playwright.sync_api import expect, sync_playwright

    p = pipeline
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):
        claims = routed_claims(p)
        p.wait_projected(None, 120, "3 review items",
                         also=lambda: p.count("SELECT count(*) FROM review_items WHERE open") == 3)  # fmt: skip
        with review_desk(p, "ana") as ana, review_desk(p, "ben") as ben, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            a = browser.new_context(viewport={"width": 1200, "height": 1000}).new_page()
            b = browser.new_context().new_page()
            a.goto(ana)
            expect(a.locator("#claim-id")).to_have_text(claims[0])
            b.goto(ben)
            expect(b.locator("#claim-id")).to_have_text(claims[1])  # never the item ana holds
            # ben's claim: its quote is not in the passage, and the page says so
            expect(b.locator("#quote-warning")).to_be_visible()
            expect(a.locator("#quote-warning")).to_be_hidden()
            expect(a.locator("#passage mark")).to_have_text("revenue grew 12% in the third quarter")
            # blind first: nothing of the judges' verdicts, scores or confidences is in ana's page
            expect(a.locator("#verdicts")).to_be_hidden()
            assert a.locator("#judges").inner_text() == "" and "fail" not in a.locator("main").inner_text()
            a.keyboard.press("?")
            expect(a.locator("#help")).to_be_visible()
            a.keyboard.press("?")
            a.keyboard.press("p")  # blind: pass
            expect(a.locator("#verdicts")).to_be_visible()
            expect(a.locator("#judges")).to_contain_text("fail")
            expect(a.locator("#decided")).to_have_text("fail")
            a.keyboard.press("Enter")  # final pass overturns the judge's fail: a note is required
            expect(a.locator("#message")).to_contain_text("NOTE_REQUIRED")
            a.locator("#note").fill("The passage supports the figure.")
            a.screenshot(path=str(ARTIFACTS / "review-desk.png"), full_page=True)
            a.locator("#note").press("Control+Enter")
            expect(a.locator("#claim-id")).to_have_text(claims[2])  # the next item: ben still holds claims[1]
            # judge text is text: the markup is shown, not run
            expect(a.locator("#reasons")).to_contain_text(HOSTILE)
            assert a.locator("#reasons img").count() == 0 and a.title() != "owned"
            b.keyboard.press("s")  # ben skips; nothing else is free for him
            expect(b.locator("#empty")).to_be_visible()
            browser.close()
        ARTIFACT_PATHS["review desk screenshot"] = str(ARTIFACTS / "review-desk.png")
        reviewed = "SELECT count(*) FROM reviews WHERE reviewer = 'ana' AND blind_verdict = 'pass' " \
                   "AND final_verdict = 'pass' AND source = 'routed' AND notes IS NOT NULL"  # fmt: skip
        p.wait_projected(None, 60, "ana's review in Postgres", also=lambda: p.count(reviewed) == 1)
        with p.connect() as conn:
            rate = conn.execute("SELECT reviewed, overturned FROM review_overturns WHERE source = 'routed'").fetchone()
            left = conn.execute("SELECT claim_id FROM review_items WHERE open ORDER BY claim_id").fetchall()
        assert rate == (1, 1)
        assert [c for (c,) in left] == claims[1:]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_a_reviewer_scores_a_run_blind_then_sees_the_judges_scores(pipeline: Pipeline) -> None:
    """An evaluation run routed to people, at the page: lanes and the judges' words first, no score; the
    reviewer's scores typed and sent with Enter; then the judges' scores; a changed overall needs a note."""
    from playwright.sync_api import expect, sync_playwright

    from tests.integration.test_review_desk import runs_to_people

    p = pipeline
    with p.worker(), p.projector():
        [run_id] = runs_to_people(p, 1, seed=31)
        p.wait_projected(None, 120, "the run's review item",
                         also=lambda: p.count("SELECT count(*) FROM run_review_items WHERE open") == 1)  # fmt: skip
        with review_desk(p, "ana") as ana, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            a = browser.new_context(viewport={"width": 1200, "height": 1000}).new_page()
            a.goto(ana)
            expect(a.locator("#run-id")).to_have_text(run_id)
            expect(a.locator("#item")).to_be_hidden()
            expect(a.locator("#run-scores")).to_be_hidden()
            assert a.locator("#run-judges").inner_text() == ""
            lanes = a.locator("#lanes input")
            assert lanes.count() >= 1
            for i in range(lanes.count()):
                lanes.nth(i).fill("40")
            a.locator("#overall").fill("40")
            a.locator("#overall").press("Enter")  # blind scores sent: the judges' are shown
            expect(a.locator("#run-scores")).to_be_visible()
            expect(a.locator("#run-judges .judge")).to_have_count(3)
            reconciled = int(a.locator("#reconciled").inner_text())
            a.locator("#overall").fill(str(40 if reconciled != 40 else 41))
            a.locator("#overall").press("Enter")  # an overall other than the reconciled one: a note first
            expect(a.locator("#run-message")).to_contain_text("NOTE_REQUIRED")
            a.locator("#run-note").fill("Two of the judges cite a test that never ran.")
            a.locator("#run-note").press("Control+Enter")
            expect(a.locator("#empty")).to_be_visible()
            browser.close()
        reviewed = "SELECT count(*) FROM run_reviews WHERE reviewer = 'ana' AND blind_overall_score = 40 " \
                   "AND notes IS NOT NULL AND source = 'routed'"  # fmt: skip
        p.wait_projected(None, 60, "ana's run review in Postgres", also=lambda: p.count(reviewed) == 1)
        assert p.count("SELECT count(*) FROM run_review_items WHERE open") == 0


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_a_reviewer_signs_in_at_the_desk_and_reviews_as_herself(pipeline: Pipeline, tmp_path: Path) -> None:
    """`judgeflow review --users FILE`: the page sends a browser without a session to the sign-in form; a wrong
    password stays there with a message; the right one opens the desk, whose review is recorded as hers."""
    from playwright.sync_api import expect, sync_playwright

    p = pipeline
    users = tmp_path / "reviewers.txt"
    add_user(users, "ana", "a long reviewer password")
    env = {"DATABASE_URL": p.database_url, "KAFKA_BOOTSTRAP_SERVERS": p.bootstrap, "JUDGEFLOW_TOPIC_PREFIX": p.prefix}
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):
        [claim, second, _] = routed_claims(p)
        p.wait_projected(None, 120, "3 review items",
                         also=lambda: p.count("SELECT count(*) FROM review_items WHERE open") == 3)  # fmt: skip
        command = ["review", "--users", str(users), "--schema", p.schema]
        with judgeflow_server(command, env, "the review desk") as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            page = browser.new_context().new_page()
            page.goto(base)
            expect(page).to_have_url(base.rstrip("/") + "/login")
            page.fill("input[name=user]", "ana")
            page.fill("input[name=password]", "not her password")
            page.click("button[type=submit]")
            expect(page.locator("#message")).to_contain_text("Wrong name or password")
            page.fill("input[name=user]", "ana")
            page.fill("input[name=password]", "a long reviewer password")
            page.click("button[type=submit]")
            expect(page.locator("#claim-id")).to_have_text(claim)
            expect(page.locator("#reviewer")).to_have_text("ana")
            page.keyboard.press("f")  # blind: fail, the judge's verdict too
            expect(page.locator("#verdicts")).to_be_visible()
            page.keyboard.press("Enter")
            expect(page.locator("#claim-id")).to_have_text(second)  # recorded: the next item is shown
            page.click("#sign-out")
            expect(page).to_have_url(base.rstrip("/") + "/login")
            browser.close()
        p.wait_projected(None, 60, "ana's review", also=lambda: p.count("SELECT count(*) FROM reviews") == 1)
        with p.connect() as conn:
            assert conn.execute("SELECT reviewer, claim_id FROM reviews").fetchall() == [("ana", claim)]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_an_expired_lease_returns_its_item_and_its_page_says_so(pipeline: Pipeline) -> None:
    """cy opens an item on a desk whose leases last 2 s and walks away; the item goes to dan; cy's choice,
    made late, is refused with LEASE_EXPIRED on her page."""
    from playwright.sync_api import expect, sync_playwright

    p = pipeline
    env = {"DATABASE_URL": p.database_url, "KAFKA_BOOTSTRAP_SERVERS": p.bootstrap, "JUDGEFLOW_TOPIC_PREFIX": p.prefix}
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):
        [first, *_] = routed_claims(p)
        p.wait_projected(None, 120, "3 review items",
                         also=lambda: p.count("SELECT count(*) FROM review_items WHERE open") == 3)  # fmt: skip
        short = ["review", "--as", "cy", "--schema", p.schema]
        with judgeflow_server(short, {**env, "JUDGEFLOW_REVIEW_LEASE_SECONDS": "2"}, "cy's desk") as cy_desk, \
                review_desk(p, "dan") as dan_desk, sync_playwright() as pw:  # fmt: skip
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            cy = browser.new_context().new_page()
            cy.goto(cy_desk)
            expect(cy.locator("#claim-id")).to_have_text(first)
            expired = "SELECT count(*) FROM review_leases WHERE reviewer = 'cy' AND expires_at < now()"
            wait_for(lambda: p.count(expired) == 1, 30, "cy's lease to run out")
            dan = browser.new_context().new_page()
            dan.goto(dan_desk)
            expect(dan.locator("#claim-id")).to_have_text(first)  # the expired lease returned the item
            cy.keyboard.press("p")
            expect(cy.locator("#message")).to_contain_text("LEASE_EXPIRED")
            expect(cy.locator("#verdicts")).to_be_hidden()
            browser.close()
