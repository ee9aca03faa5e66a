"""judgeflow's versioned event contracts (pydantic v2, strict).

Import from here; the submodules are an implementation detail.
"""

from schemas.claim_check import ClaimCheck
from schemas.decoding import MAX_PAYLOAD_BYTES
from schemas.errors import ContractError, ContractWarning, ErrorDetail
from schemas.events import (
    ContradictionDetail,
    EvaluationRunStarted,
    HumanReview,
    InvalidEvent,
    ReconciliationResult,
    ReconciliationRevision,
    RoutingDecision,
    RunReview,
    StaleWorkAlert,
)
from schemas.judge_output import (
    DimensionScore,
    EvidenceRef,
    Flag,
    IntegrityAdjustment,
    JudgeOutput,
    LaneScore,
    TelemetrySummary,
)
from schemas.parse import (
    Parsed,
    check_against_rubric,
    check_claim_against_rubric,
    names_run,
    parse_claim_check,
    parse_evaluation_run,
    parse_human_review,
    parse_judge_output,
    parse_review,
    parse_rubric,
    parse_run_review,
    validate_claim_check,
    validate_judge_output,
)
from schemas.rubric import DimensionSpec, LaneSpec, RoutingPolicy, RubricVersion, ScoreBand, ScoreRange

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "ClaimCheck",
    "ContractError",
    "ContractWarning",
    "ContradictionDetail",
    "DimensionScore",
    "DimensionSpec",
    "ErrorDetail",
    "EvaluationRunStarted",
    "EvidenceRef",
    "Flag",
    "HumanReview",
    "RunReview",
    "IntegrityAdjustment",
    "InvalidEvent",
    "JudgeOutput",
    "LaneScore",
    "LaneSpec",
    "Parsed",
    "ReconciliationResult",
    "ReconciliationRevision",
    "RoutingDecision",
    "StaleWorkAlert",
    "RoutingPolicy",
    "RubricVersion",
    "ScoreBand",
    "ScoreRange",
    "TelemetrySummary",
    "check_against_rubric",
    "check_claim_against_rubric",
    "parse_claim_check",
    "parse_evaluation_run",
    "parse_human_review",
    "parse_run_review",
    "parse_review",
    "names_run",
    "parse_judge_output",
    "parse_rubric",
    "validate_claim_check",
    "validate_judge_output",
]
