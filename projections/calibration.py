"""Calibration from human reviews: reliability per judge, overturns per route reason, threshold suggestions.

Pure functions over plain rows (no database in the math); `load` reads the rows of one rubric with psycopg.
A claim belongs to a rubric through its checks' `rubric_version_id` (`None`: checks without one). The human
verdict of a claim is its latest review (view `latest_reviews`). Checks refused at the edge have no
`claim_checks` row and therefore no rubric: they are not counted here.

Threshold suggestions replay first-judge verdicts through `streams.routing.route` itself, with candidate
policies from a grid: the routing rules are never restated here. They only suggest; nothing here writes a
rubric.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from projections.review_figures import wilson
from schemas.rubric import RoutingPolicy, ScoreRange
from streams.routing import route

NO_RUBRIC = "none"
DEFAULT_BINS = 10
DEFAULT_STEP = 0.05
DEFAULT_MAX_HUMAN_SHARE = 0.15
DEFAULT_MAX_SECOND_SHARE = 0.30
DEFAULT_MAX_OVERTURN = 0.10
DECIDED = ("pass", "fail")
MIN_SAMPLE = 30
"""Reviews each part of a done route needs before its overturn rate is estimated (`DoneEstimate`)."""


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge's check on a reviewed claim, with the human's verdict."""

    judge_id: str
    verdict: str
    confidence: float
    human: str

    @property
    def agrees(self) -> bool:
        return self.verdict == self.human


@dataclass(frozen=True)
class RoutedClaim:
    """A claim's first-judge check, its routing history and its human verdict (None: not reviewed).

    Has the attributes `route()` reads (claim_id, verdict, score, confidence), so it is replayed as is."""

    claim_id: str
    verdict: str
    score: float | None
    confidence: float
    route: str | None = None
    reason: str | None = None
    final_verdict: str | None = None
    final_route: str | None = None
    final_reason: str | None = None
    human: str | None = None
    audit: str | None = None
    """The verdict of the claim's audit review (a claim the pipeline routed done, in the audit sample)."""


@dataclass(frozen=True)
class DoneEstimate:
    """The overturn rate of the claims a policy sends straight to done, from samples that are unbiased for them.

    Two parts: the claims the pipeline itself routed done, estimated from the audit sample (a uniform sample of
    the done route, `projections.review_items`); and the claims it routed to people, estimated from their
    reviews (every one of them is queued). Claims still waiting for a second judge are in neither (`pending`).
    The rate weighs each part by its claims, and so does its interval, with each part's 95 % Wilson bounds
    (conservative). Unknown (None) while a part that has claims has fewer than `MIN_SAMPLE` reviews: the
    reviewed claims of the current policy say nothing about the ones it sent to done unreviewed."""

    from_done: int = 0
    audited: int = 0
    audit_overturned: int = 0
    from_people: int = 0
    reviewed: int = 0
    overturned: int = 0
    pending: int = 0

    def _parts(self) -> list[tuple[int, int, int]]:
        return [
            (self.from_done, self.audited, self.audit_overturned),
            (self.from_people, self.reviewed, self.overturned),
        ]

    @property
    def known(self) -> bool:
        return all(n == 0 or sampled >= MIN_SAMPLE for n, sampled, _ in self._parts())

    @property
    def rate(self) -> float | None:
        total = self.from_done + self.from_people
        if not total or not self.known:
            return None
        return sum(n * k / sampled for n, sampled, k in self._parts() if n) / total

    @property
    def interval(self) -> tuple[float | None, float | None]:
        total = self.from_done + self.from_people
        if self.rate is None:
            return None, None
        bounds = [(n, wilson(k, sampled)) for n, sampled, k in self._parts() if n]
        low = sum(n * (b[0] or 0.0) for n, b in bounds) / total
        high = sum(n * (b[1] or 0.0) for n, b in bounds) / total
        return low, high

    def why_unknown(self) -> str:
        parts = []
        if self.from_done and self.audited < MIN_SAMPLE:
            parts.append(f"{self.audited} audit review(s) of the {self.from_done} claims the pipeline routed done")
        if self.from_people and self.reviewed < MIN_SAMPLE:
            parts.append(f"{self.reviewed} review(s) of the {self.from_people} claims it routed to people")
        return "; ".join(parts) + f" ({MIN_SAMPLE} needed)"


@dataclass(frozen=True)
class Bin:
    """Confidence bin [lower, upper) (the last one closed): count, mean confidence, share agreeing with humans."""

    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


@dataclass(frozen=True)
class JudgeReliability:
    judge_id: str
    count: int
    accuracy: float
    mean_confidence: float
    ece: float
    bins: list[Bin]


@dataclass(frozen=True)
class ReasonOverturn:
    """Reviewed claims by the reason of their final routing decision.

    `overturn_rate` = overturned / decided, where decided claims are those whose pipeline verdict (the final
    decision's verdict) was pass or fail; an `unclear` pipeline verdict has nothing to overturn and counts in
    `resolved` when the human gave pass or fail."""

    reason: str
    route: str
    reviewed: int
    decided: int
    overturned: int
    resolved: int

    @property
    def overturn_rate(self) -> float | None:
        return self.overturned / self.decided if self.decided else None


@dataclass(frozen=True)
class Replay:
    """One policy replayed: first routes of every routed claim; overturns among the reviewed ones it sends to done."""

    policy: RoutingPolicy
    claims: int
    human: int
    second_judge: int
    done: int
    reviewed_done: int
    overturned_done: int
    estimate: DoneEstimate = DoneEstimate()

    @property
    def human_share(self) -> float:
        return self.human / self.claims if self.claims else 0.0

    @property
    def second_share(self) -> float:
        return self.second_judge / self.claims if self.claims else 0.0

    @property
    def overturn_rate(self) -> float | None:
        """The estimated share of the claims this policy sends straight to done whose human verdict would differ
        from the first judge's (`DoneEstimate`); None when unknown or when it sends nothing to done."""
        return self.estimate.rate

    @property
    def eligible(self) -> bool:
        """Whether calibration may suggest this policy: it sends nothing to done, or what it sends has a known
        overturn rate (claims still waiting for a second judge are assumed like the rest, and counted)."""
        return self.done == 0 or (self.estimate.known and self.estimate.from_done + self.estimate.from_people > 0)


@dataclass(frozen=True)
class Targets:
    max_human_share: float = DEFAULT_MAX_HUMAN_SHARE
    max_overturn: float = DEFAULT_MAX_OVERTURN
    max_second_share: float = DEFAULT_MAX_SECOND_SHARE

    def excess(self, r: Replay) -> float:
        """How far `r` is from meeting every target (0: meets them all). An undefined overturn rate meets its
        target: no reviewed claim would have gone to done unreviewed."""
        return (
            max(0.0, r.human_share - self.max_human_share)
            + max(0.0, (r.overturn_rate or 0.0) - self.max_overturn)
            + max(0.0, r.second_share - self.max_second_share)
        )


@dataclass(frozen=True)
class Suggestion:
    current: Replay
    best: Replay | None
    """None when every candidate would send to done claims whose overturn rate is unknown."""
    meets_targets: bool
    candidates: int
    targets: Targets


@dataclass(frozen=True)
class Calibration:
    rubric: str
    rubric_name: str | None
    policy: RoutingPolicy
    reviewed_claims: int
    judges: list[JudgeReliability]
    overturns: list[ReasonOverturn]
    suggestion: Suggestion | None
    notes: list[str] = field(default_factory=list)


def reliability_bins(points: Iterable[tuple[float, bool]], bins: int = DEFAULT_BINS) -> list[Bin]:
    """`bins` equal-width confidence bins over [0, 1]; a confidence of exactly 1 falls in the last bin."""
    if bins < 1:
        raise ValueError("bins must be >= 1")
    counts, conf_sums, hits = [0] * bins, [0.0] * bins, [0] * bins
    for confidence, correct in points:
        i = min(int(confidence * bins), bins - 1)
        counts[i] += 1
        conf_sums[i] += confidence
        hits[i] += bool(correct)
    return [
        Bin(
            lower=i / bins,
            upper=(i + 1) / bins,
            count=counts[i],
            mean_confidence=conf_sums[i] / counts[i] if counts[i] else None,
            accuracy=hits[i] / counts[i] if counts[i] else None,
        )
        for i in range(bins)
    ]


def expected_calibration_error(bins: Sequence[Bin]) -> float | None:
    """ECE as in Guo et al. (2017): sum over non-empty bins of (count / n) * |accuracy - mean confidence|.

    Lies in [0, 1]; 0 when every bin's agreement equals its mean confidence. None when there are no points."""
    n = sum(b.count for b in bins)
    if n == 0:
        return None
    return sum(b.count / n * abs((b.accuracy or 0.0) - (b.mean_confidence or 0.0)) for b in bins if b.count)


def judge_reliability(verdicts: Iterable[JudgeVerdict], bins: int = DEFAULT_BINS) -> list[JudgeReliability]:
    """One reliability table and ECE per judge: does a judge that says 0.9 agree with humans 90% of the time?"""
    by_judge: dict[str, list[JudgeVerdict]] = defaultdict(list)
    for v in verdicts:
        by_judge[v.judge_id].append(v)
    out = []
    for judge, vs in sorted(by_judge.items()):
        table = reliability_bins(((v.confidence, v.agrees) for v in vs), bins)
        out.append(
            JudgeReliability(
                judge_id=judge,
                count=len(vs),
                accuracy=sum(v.agrees for v in vs) / len(vs),
                mean_confidence=sum(v.confidence for v in vs) / len(vs),
                ece=expected_calibration_error(table) or 0.0,
                bins=table,
            )
        )
    return out


def overturns_by_reason(claims: Iterable[RoutedClaim]) -> list[ReasonOverturn]:
    """Reviewed claims grouped by (final reason, final route); most reviewed first."""
    groups: dict[tuple[str, str], list[RoutedClaim]] = defaultdict(list)
    for c in claims:
        if c.human is None:
            continue
        groups[(c.final_reason or c.reason or "not routed", c.final_route or c.route or "pending")].append(c)
    rows = []
    for (reason, to), cs in groups.items():
        decided = [c for c in cs if (c.final_verdict or c.verdict) in DECIDED]
        rows.append(
            ReasonOverturn(
                reason=reason,
                route=to,
                reviewed=len(cs),
                decided=len(decided),
                overturned=sum(c.human != (c.final_verdict or c.verdict) for c in decided),
                resolved=sum(c.human in DECIDED for c in cs if (c.final_verdict or c.verdict) not in DECIDED),
            )
        )
    return sorted(rows, key=lambda r: (-r.reviewed, r.reason, r.route))


def hits(decided: str, c: RoutedClaim) -> list[int]:
    """The counters a claim a policy routes `decided` adds to (`replay` and `replay_grid` alike)."""
    if decided != "done":
        return [HUMAN] if decided == "human_review" else [SECOND]
    out = [DONE]
    if c.human is not None:
        out += [REVIEWED_DONE, OVERTURNED_DONE] if c.human != c.verdict else [REVIEWED_DONE]
    if c.final_route == "done":
        out.append(FROM_DONE)
        if c.audit is not None:
            out += [AUDITED, AUDIT_OVERTURNED] if c.audit != c.verdict else [AUDITED]
    elif c.final_route == "human_review":
        out.append(FROM_PEOPLE)
        if c.human is not None:
            out += [PEOPLE_REVIEWED, PEOPLE_OVERTURNED] if c.human != c.verdict else [PEOPLE_REVIEWED]
    else:
        out.append(PENDING)
    return out


def _replay_of(policy: RoutingPolicy, claims: int, n: Sequence[int]) -> Replay:
    return Replay(policy=policy, claims=claims, human=n[HUMAN], second_judge=n[SECOND], done=n[DONE],
                  reviewed_done=n[REVIEWED_DONE], overturned_done=n[OVERTURNED_DONE],
                  estimate=DoneEstimate(*(n[i] for i in ESTIMATE_COUNTERS)))  # fmt: skip


def replay(claims: Sequence[RoutedClaim], policy: RoutingPolicy) -> Replay:
    """Route every claim's first-judge check with `policy` through the real `route()`."""
    n = [0] * COUNTERS
    for c in claims:
        decided = route(c, policy).route
        for h in hits(decided, c):
            n[h] += 1
    return _replay_of(policy, len(claims), n)


def _axis(current: float, step: float, scale: ScoreRange) -> list[float]:
    """Grid values inside the rubric's score range, plus the current value (so the current policy is a candidate)."""
    n = math.floor((scale.max - scale.min) / step + 1e-9)
    values = {round(scale.min + i * step, 6) for i in range(n + 1)} | {round(scale.max, 6), current}
    return sorted(values)


@dataclass(frozen=True)
class Grid:
    """Candidate thresholds: every (pass_score, floor, border) of the axes with border <= pass_score; the
    spot-sample rate is the current policy's."""

    passes: list[float]
    floors: list[float]
    borders: list[float]
    spot_sample_rate: float

    @classmethod
    def around(cls, current: RoutingPolicy, step: float = DEFAULT_STEP, scale: ScoreRange | None = None) -> Grid:
        if not 0 < step <= 1:
            raise ValueError("step must be in (0, 1]")
        scale = scale or ScoreRange()
        return cls(
            passes=_axis(current.pass_score, step, scale),
            floors=_axis(current.floor, step, scale),
            borders=_axis(current.border, step, scale),
            spot_sample_rate=current.spot_sample_rate,
        )

    def policy(self, pass_score: float, floor: float, border: float) -> RoutingPolicy:
        return RoutingPolicy(pass_score=pass_score, floor=floor, border=border, spot_sample_rate=self.spot_sample_rate)

    def policies(self) -> list[RoutingPolicy]:
        return [self.policy(p, f, b) for p, f, b in itertools.product(self.passes, self.floors, self.borders) if b <= p]


def _runs(values: list[float], xs: tuple[float, ...]) -> list[tuple[int, int]]:
    """Index runs [lo, hi] of the sorted `values` over which each x in `xs` compares the same way (<, =, >)."""
    out: list[tuple[int, int]] = []
    last: tuple[int, ...] | None = None
    for i, v in enumerate(values):
        key = tuple((x > v) - (x < v) for x in xs)
        if key == last:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
            last = key
    return out


HUMAN, SECOND, DONE, REVIEWED_DONE, OVERTURNED_DONE = range(5)
FROM_DONE, AUDITED, AUDIT_OVERTURNED, FROM_PEOPLE, PEOPLE_REVIEWED, PEOPLE_OVERTURNED, PENDING = range(5, 12)
ESTIMATE_COUNTERS = (FROM_DONE, AUDITED, AUDIT_OVERTURNED, FROM_PEOPLE, PEOPLE_REVIEWED, PEOPLE_OVERTURNED, PENDING)
COUNTERS = 12


def replay_grid(claims: Sequence[RoutedClaim], grid: Grid) -> list[Replay]:
    """`replay` for every candidate of `grid`, without routing every claim once per candidate.

    `route()` reads a policy's thresholds only by comparing them with the check's score and confidence, so
    all thresholds on one side of (or equal to) those two numbers route a claim alike: each claim is routed
    once per such box of candidates (at most 5 x 5 x 5), with a real `route()` call and a real
    `RoutingPolicy`, and its outcome added to the whole box (3-D difference arrays, summed at the end).
    tests/unit/test_calibration.py checks the result equals `replay` candidate by candidate."""
    P, F, B = grid.passes, grid.floors, grid.borders
    sf, sb = (len(F) + 1) * (len(B) + 1), len(B) + 1
    diff = [[0] * ((len(P) + 1) * sf) for _ in range(COUNTERS)]
    policies: dict[tuple[float, float, float], RoutingPolicy] = {}

    def add(counter: list[int], p: tuple[int, int], f: tuple[int, int], b: tuple[int, int]) -> None:
        for i, si in ((p[0], 1), (p[1] + 1, -1)):
            for j, sj in ((f[0], 1), (f[1] + 1, -1)):
                for k, sk in ((b[0], 1), (b[1] + 1, -1)):
                    counter[i * sf + j * sb + k] += si * sj * sk

    for c in claims:
        xs = tuple(x for x in (c.score, c.confidence) if x is not None)
        b_runs = _runs(B, xs)
        for p_run in _runs(P, xs):
            for f_run in _runs(F, xs):
                for b_run in b_runs:
                    p, f, b = P[p_run[1]], F[f_run[0]], B[b_run[0]]
                    if b > p:
                        continue  # no valid policy in this box (border must be <= pass_score)
                    policy = policies.get((p, f, b))
                    if policy is None:
                        policy = policies[(p, f, b)] = grid.policy(p, f, b)
                    decided = route(c, policy).route
                    for h in hits(decided, c):
                        add(diff[h], p_run, f_run, b_run)
    for counter in diff:  # prefix sums along each axis turn the differences into counts
        for i in range(len(P) + 1):
            for j in range(len(F) + 1):
                base = i * sf + j * sb
                for k in range(1, len(B) + 1):
                    counter[base + k] += counter[base + k - 1]
        for i in range(len(P) + 1):
            for j in range(1, len(F) + 1):
                for k in range(len(B) + 1):
                    counter[i * sf + j * sb + k] += counter[i * sf + (j - 1) * sb + k]
        for i in range(1, len(P) + 1):
            for j in range(sf):
                counter[i * sf + j] += counter[(i - 1) * sf + j]
    out = []
    for i, p in enumerate(P):
        for j, f in enumerate(F):
            for k, b in enumerate(B):
                if b > p:
                    continue
                at = i * sf + j * sb + k
                policy = policies.get((p, f, b)) or grid.policy(p, f, b)
                out.append(_replay_of(policy, len(claims), [counter[at] for counter in diff]))
    return out


def _distance(a: RoutingPolicy, b: RoutingPolicy) -> float:
    return abs(a.pass_score - b.pass_score) + abs(a.floor - b.floor) + abs(a.border - b.border)


def suggest_thresholds(
    claims: Sequence[RoutedClaim],
    current: RoutingPolicy,
    targets: Targets | None = None,
    step: float = DEFAULT_STEP,
    scale: ScoreRange | None = None,
) -> Suggestion | None:
    """Replay every candidate policy; only those whose done route's overturn rate is known (or that send nothing
    to done) may be suggested. Among them, those meeting every target: the lowest human share (then the lowest
    overturn rate, the lowest second-judge share, the one closest to the current thresholds). If none meets
    them all, the one with the smallest total excess over the targets, by the same tie-breaks; if none may be
    suggested, or the pick sends nothing to done and still misses the targets, no pick (`best` None). The
    figures reported come from `replay` itself.

    None when there is nothing to replay."""
    if not claims:
        return None
    targets = targets or Targets()
    replays = replay_grid(claims, Grid.around(current, step, scale))
    now = replay(claims, current)
    eligible = [r for r in replays if r.eligible]
    if not eligible:
        return Suggestion(current=now, best=None, meets_targets=False, candidates=len(replays), targets=targets)
    best = min(
        eligible,
        key=lambda r: (
            targets.excess(r),
            r.human_share,
            r.overturn_rate or 0.0,
            r.second_share,
            _distance(r.policy, current),
            (r.policy.pass_score, r.policy.floor, r.policy.border),
        ),
    )
    best = replay(claims, best.policy)
    meets = targets.excess(best) == 0.0
    if not meets and best.done == 0:  # everything to people, and still off target: not a suggestion
        return Suggestion(current=now, best=None, meets_targets=False, candidates=len(replays), targets=targets)
    return Suggestion(current=now, best=best, meets_targets=meets, candidates=len(replays), targets=targets)


def calibrate(
    rubric: str,
    rubric_name: str | None,
    policy: RoutingPolicy,
    verdicts: Sequence[JudgeVerdict],
    claims: Sequence[RoutedClaim],
    *,
    bins: int = DEFAULT_BINS,
    targets: Targets | None = None,
    step: float = DEFAULT_STEP,
    scale: ScoreRange | None = None,
) -> Calibration:
    """Every figure for one rubric."""
    reviewed = sum(c.human is not None for c in claims)
    notes = []
    if rubric_name is None and rubric != NO_RUBRIC:
        notes.append("the rubric itself is not in the read models: its routing policy is taken as the default")
    return Calibration(
        rubric=rubric,
        rubric_name=rubric_name,
        policy=policy,
        reviewed_claims=reviewed,
        judges=judge_reliability(verdicts, bins),
        overturns=overturns_by_reason(claims),
        suggestion=suggest_thresholds(claims, policy, targets, step, scale) if reviewed else None,
        notes=notes,
    )


def parse_rubric_arg(value: str) -> str | None:
    """`none` (checks without a rubric) -> None; otherwise the rubric_version_id as a canonical UUID string."""
    if value.strip().lower() == NO_RUBRIC:
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise ValueError(f"--rubric must be a rubric_version_id (a UUID) or {NO_RUBRIC!r}, not {value!r}") from None


RUBRIC_FILTER = "((%(rubric)s::uuid IS NULL AND c.rubric_version_id IS NULL) OR c.rubric_version_id = %(rubric)s::uuid)"
VERDICTS_QUERY = f"""
SELECT c.judge_id, c.verdict, c.confidence, r.final_verdict
FROM claim_checks c JOIN latest_reviews r USING (claim_id)
WHERE {RUBRIC_FILTER} ORDER BY c.claim_id, c.judge_id"""
CLAIMS_QUERY = f"""
SELECT k.claim_id, k.verdict, k.score, k.confidence, k.route, k.route_reason, k.final_verdict, k.final_route,
       k.final_reason, r.final_verdict, a.final_verdict
FROM checks k JOIN claim_checks c ON c.claim_id = k.claim_id AND c.judge_id = k.judge_id
LEFT JOIN latest_reviews r ON r.claim_id = k.claim_id
LEFT JOIN (SELECT DISTINCT ON (claim_id) claim_id, final_verdict FROM reviews WHERE source = 'audit'
           ORDER BY claim_id, created_at, review_id) a ON a.claim_id = k.claim_id
WHERE k.route IS NOT NULL AND {RUBRIC_FILTER} ORDER BY k.claim_id"""
RUBRICS_QUERY = """
SELECT coalesce(c.rubric_version_id::text, 'none'), min(rb.name), count(DISTINCT c.claim_id)
FROM claim_checks c JOIN latest_reviews r USING (claim_id) LEFT JOIN rubrics rb ON rb.id = c.rubric_version_id
GROUP BY 1 ORDER BY 3 DESC, 1"""


@dataclass(frozen=True)
class Loaded:
    rubric: str
    rubric_name: str | None
    policy: RoutingPolicy
    scale: ScoreRange
    verdicts: list[JudgeVerdict]
    claims: list[RoutedClaim]


def load(conn: psycopg.Connection, rubric: str | None) -> Loaded:
    """The rows of one rubric (None: checks without one) and its routing policy (the default for none)."""
    params: dict[str, Any] = {"rubric": rubric}
    verdicts = [JudgeVerdict(j, v, float(conf), h) for j, v, conf, h in conn.execute(VERDICTS_QUERY, params)]
    claims = [
        RoutedClaim(
            claim_id=cid,
            verdict=v,
            score=None if s is None else float(s),
            confidence=float(conf),
            route=rt,
            reason=why,
            final_verdict=fv,
            final_route=fr,
            final_reason=fw,
            human=h,
            audit=a,
        )
        for cid, v, s, conf, rt, why, fv, fr, fw, h, a in conn.execute(CLAIMS_QUERY, params)
    ]
    name, policy, scale = None, RoutingPolicy(), ScoreRange()
    if rubric is not None:
        row = conn.execute("SELECT name, doc FROM rubrics WHERE id = %s::uuid", (rubric,)).fetchone()
        if row is not None and row[1] is not None:
            name = row[0]
            policy = RoutingPolicy.model_validate(row[1].get("routing") or {})
            scale = ScoreRange.model_validate(row[1].get("claim_score_range") or {})
    return Loaded(rubric or NO_RUBRIC, name, policy, scale, verdicts, claims)


def reviewed_rubrics(conn: psycopg.Connection) -> list[tuple[str, str | None, int]]:
    """(rubric id or 'none', name, reviewed claims) for every rubric with a reviewed check, most reviewed first."""
    return [(str(r), n, int(k)) for r, n, k in conn.execute(RUBRICS_QUERY)]
