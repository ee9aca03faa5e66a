"""Apply the numbered SQL files in `migrations/` with yoyo-migrations.

yoyo records what it applied (its `_yoyo_migration` table, per schema) and
takes a lock, so concurrent `judgeflow migrate` runs are safe. Every read
model lives in one schema (default `judgeflow`), which is what lets a
rebuild build a fresh schema beside it and swap it in.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from psycopg import sql

MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"
DEFAULT_SCHEMA = "judgeflow"
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_RE.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    return schema


def yoyo_url(database_url: str, schema: str) -> str:
    url = re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", database_url)
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def migrate(database_url: str, schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Create `schema` if needed and apply pending migrations; return their ids."""
    from yoyo import get_backend, read_migrations

    check_schema_name(schema)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    backend = get_backend(yoyo_url(database_url, schema))
    migrations = read_migrations(str(MIGRATIONS))
    with backend.lock():
        pending = backend.to_apply(migrations)
        backend.apply_migrations(pending)
    return [m.id for m in pending]


def connect(database_url: str, schema: str = DEFAULT_SCHEMA, **kwargs: object) -> psycopg.Connection:
    """A connection whose search_path is the read-model schema."""
    check_schema_name(schema)
    return psycopg.connect(database_url, options=f"-c search_path={schema}", **kwargs)  # type: ignore[arg-type]
