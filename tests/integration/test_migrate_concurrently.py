"""Several processes starting at once on a fresh schema (two projectors, a projector and `judgeflow
migrate`) each migrate it: every one must succeed and the schema must end up migrated once.
`CREATE SCHEMA IF NOT EXISTS` alone is not safe against a concurrent creator (a fresh-checkout run
lost a projector to `duplicate key value violates unique constraint "pg_namespace_nspname_index"`)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from psycopg import sql

from projections.migrate import migrate, migration_files

pytestmark = pytest.mark.integration
CONCURRENT = 6


@pytest.mark.parametrize("attempt", range(3))
def test_concurrent_migrations_of_a_fresh_schema_all_succeed(database_url: str, attempt: int) -> None:
    schema = f"race_{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(CONCURRENT)
    errors: list[BaseException] = []
    applied: list[list[str]] = []

    def one() -> None:
        start.wait()
        try:
            applied.append(migrate(database_url, schema))
        except BaseException as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, [repr(e) for e in errors]
        assert sorted(len(a) for a in applied)[-1] == len(migration_files())  # one of them applied everything
        assert sum(len(a) for a in applied) == len(migration_files())  # and no migration ran twice
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
