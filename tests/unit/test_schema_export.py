"""Exported JSON Schemas accept what the parser accepts, per version."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema

from judgeflow import workload
from schemas.export import export_json_schemas


def test_export_and_validate_samples(tmp_path: Path) -> None:
    files = {p.name: json.loads(p.read_text()) for p in export_json_schemas(tmp_path)}
    assert {
        "judge_output-1.0.json",
        "judge_output-2.0.json",
        "judge_output-2.1.json",
        "claim_check-1.0.json",
        "rubric_version-1.0.json",
    } <= set(files)
    d = workload.judge_output(random.Random(1), workload.stable_id("r", 1), "gpt-4o", with_flag=True)
    jsonschema.validate(d, files["judge_output-2.1.json"])
    jsonschema.validate(workload.as_version_2_0(d), files["judge_output-2.0.json"])
    jsonschema.validate(workload.as_version_1_0(d), files["judge_output-1.0.json"])
    jsonschema.validate(workload.claim_check(random.Random(1), "c"), files["claim_check-1.0.json"])
    bad = {**d, "overall_score": "72"}
    try:
        jsonschema.validate(bad, files["judge_output-2.1.json"])
        raise AssertionError("string score accepted")
    except jsonschema.ValidationError:
        pass
