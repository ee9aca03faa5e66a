"""Security (reliability scenario 9): hostile strings stored verbatim and shown
escaped, SQL only ever parameterized, secrets kept out of logs, TLS settings
passed through to Postgres."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from bench.accounting import sha
from judgeflow import workload
from judgeflow.dashboard import report_html, summary
from judgeflow.services.ports import free_port
from tests.conftest import RELIABILITY
from tests.reliability.scenario import Scenario
from tests.support import REPO

HOSTILE = [
    "'); DROP TABLE judge_outputs; --",
    "<script>alert('x')</script><img src=x onerror=alert(1)>",
    'quote " backslash \\ percent %s %(x)s {0}',
    "control \x01\x07\x1b[31m red \x7f and tab\t and newline\n",
    "bidi \u202eevil\u202c, emoji 🤖, combining e\u0301",
]


@pytest.mark.integration
def test_hostile_strings_are_stored_verbatim_and_rendered_escaped(
    kafka_bootstrap: str, database_url: str, tmp_path: Path
) -> None:
    sc = Scenario(kafka_bootstrap, database_url, tmp_path, seed=909, runs=2, claims=0, invalid=0)
    records = sc.workload()
    rng = random.Random(9)
    text = "\n".join(HOSTILE)
    final = []
    for topic, key, value in records:  # the same strings in every judge output's free text
        if topic == sc.names.judge_outputs:
            doc = json.loads(value)
            doc["primary_weakness"] = text
            doc["lane_scores"][0]["dimension_scores"][0]["reasoning"] = text
            value = json.dumps(doc).encode()
        final.append((topic, key, value))
    outputs = [r for r in final if r[0] == sc.names.judge_outputs]
    for i, hostile in enumerate(HOSTILE):
        claim_id = f"{sc.prefix}hostile-{i}"
        doc = workload.claim_check(rng, claim_id)
        doc.update(reason=hostile, passage_quote=hostile, passage=hostile, claim_text=hostile, source_id=hostile)
        sc.pub.checks.add((claim_id, doc["judge_id"]))
        final.append((sc.names.checks, claim_id.encode(), json.dumps(doc).encode()))
    sc.claims = len(HOSTILE)
    sc.pub.records = Counter((topic, sha(value)) for topic, _, value in final)
    with sc.worker() as worker, sc.projector() as projector:
        sc.send(final)
        sc.wait_accounted(180, worker, projector)
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={sc.schema}") as conn:
        stored = {r[0] for r in conn.execute("SELECT reason FROM claim_checks").fetchall()}
        assert stored == set(HOSTILE)  # verbatim, control characters included
        assert conn.execute("SELECT count(*) FROM judge_outputs WHERE primary_weakness = %s", [text]).fetchone() == (
            len(outputs),)  # fmt: skip
        assert conn.execute("SELECT count(*) FROM judge_dimension_scores WHERE reasoning = %s",
                            [text]).fetchone() == (len(outputs),)  # fmt: skip
        page = report_html(summary(conn))
    assert "<script>alert('x')</script>" not in page and "onerror=alert(1)>" not in page
    RELIABILITY["9 hostile strings"] = sc.verdict("9 hostile strings", None)


SQL_CALLS = {"execute", "executemany", "copy"}
ALLOWED_DYNAMIC = {("projections/store.py", "_insert"), ("projections/store.py", "_copy")}
"""Where SQL text is built at all: identifiers from the module's own constant
table, never a value (values always go as parameters)."""


def test_sql_is_parameterized_everywhere() -> None:
    offenders = []
    for path in sorted(REPO.glob("*/*.py")):
        rel = str(path.relative_to(REPO))
        if rel.split("/")[0] not in ("projections", "judgeflow", "streams", "schemas", "bench"):
            continue
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in SQL_CALLS and node.args):  # fmt: skip
                    continue
                sql = node.args[0]
                dynamic = isinstance(sql, ast.JoinedStr) or (
                    isinstance(sql, ast.BinOp) and isinstance(sql.op, ast.Mod | ast.Add)
                )
                if dynamic and (rel, func.name) not in ALLOWED_DYNAMIC:
                    offenders.append(f"{rel}:{node.lineno} in {func.name}")
    assert not offenders, f"SQL built from strings (use parameters or psycopg.sql): {offenders}"


def test_secrets_stay_out_of_logs_and_errors() -> None:
    secret = "hunter2-do-not-log"
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "judge",
        "KAFKA_SASL_PASSWORD": secret,
        "DATABASE_URL": f"postgresql://judge:{secret}@127.0.0.1:{port}/db",
    }
    for args in (["worker"], ["migrate"], ["report"]):
        done = subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=120)  # fmt: skip
        assert done.returncode != 0  # nothing answers on that port
        assert secret not in done.stdout + done.stderr, args


def test_secrets_from_files_and_the_new_secrets_stay_out_of_logs_and_errors(tmp_path: Path) -> None:
    """The same with the secrets in files (`*_FILE`), the roles' passwords (`migrate --roles`), a users file
    made from standard input, and the desk's sign-in failing: no secret in any output."""
    secret = "hunter3-do-not-log-either"
    port = free_port()
    url, password = tmp_path / "database_url", tmp_path / "sasl_password"
    url.write_text(f"postgresql://judge:{secret}@127.0.0.1:{port}/db\n")
    password.write_text(secret + "\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "judge",
        "KAFKA_SASL_PASSWORD_FILE": str(password),
        "DATABASE_URL_FILE": str(url),
        "JUDGEFLOW_PROJECTOR_PASSWORD": secret,
        "JUDGEFLOW_DESK_PASSWORD_FILE": str(password),
    }
    users = tmp_path / "users.txt"
    runs: list[tuple[list[str], str | None]] = [
        (["worker"], None),
        (["migrate", "--roles"], None),
        (["report"], None),
        (["users", "add", "ana", "--file", str(users), "--password-stdin"], secret + "\n"),
        (["review", "--users", str(users), "--as", "ana"], None),  # refused: the options conflict
    ]
    for args, given in runs:
        done = subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=120, input=given)  # fmt: skip
        assert secret not in done.stdout + done.stderr, args
        assert (done.returncode == 0) == (args[0] == "users"), (args, done.stderr)
    assert secret not in users.read_text() and users.read_text().startswith("ana:$argon2id$")


@pytest.mark.integration
def test_postgres_tls_settings_pass_through_database_url(database_url: str) -> None:
    """libpq's TLS parameters in DATABASE_URL reach the connection: asking the
    (TLS-less) test server for `sslmode=require` must fail with its TLS error."""
    sep = "&" if "?" in database_url else "?"
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"{database_url}{sep}sslmode=require"}
    done = subprocess.run([sys.executable, "-m", "judgeflow.cli", "migrate"], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "SSL" in done.stdout + done.stderr
