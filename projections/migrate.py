"""Apply the numbered SQL files in `migrations/` with yoyo-migrations.

The files ship inside the `projections` package (`projections/migrations`
links to the top-level folder; the wheel holds copies), so an installed
judgeflow finds them through importlib.resources wherever it runs from. A
missing or empty folder is an error: applying nothing to an empty database
and calling it success is how a broken install would go unnoticed.

yoyo records what it applied (its `_yoyo_migration` table, per schema) and
takes a lock, so concurrent `judgeflow migrate` runs are safe. Every read
model lives in one schema (default `judgeflow`), which is what lets a
rebuild build a fresh schema beside it and swap it in.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import psycopg
from psycopg import sql

from projections.roles import apply_roles, owner_exists

MIGRATIONS: Traversable = files("projections") / "migrations"
DEFAULT_SCHEMA = "judgeflow"
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_RE.match(schema):
        raise ValueError(f"invalid schema name {schema!r}")
    return schema


def yoyo_url(database_url: str, schema: str) -> str:
    url = re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", database_url)
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


class MigrationsNotFound(RuntimeError):
    """The SQL migrations are missing or empty: the install is broken, not the database up to date."""


@contextmanager
def _on_disk(root: Traversable) -> Iterator[Path]:
    """`root` as a directory yoyo can read (a copy when the package is not on a filesystem, e.g. a zip)."""
    if isinstance(root, Path):
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="judgeflow-migrations-") as tmp:
        for item in root.iterdir():
            if item.name.endswith(".sql"):
                with item.open("rb") as src, open(Path(tmp, item.name), "wb") as dst:
                    shutil.copyfileobj(src, dst)
        yield Path(tmp)


def migration_files(root: Traversable = MIGRATIONS) -> list[str]:
    """Names of the SQL migrations under `root`, sorted; raise MigrationsNotFound if there are none."""
    if not root.is_dir():
        raise MigrationsNotFound(
            f"no migrations folder at {root}: this judgeflow install is missing its SQL files "
            "(reinstall the package; in a checkout, projections/migrations must link to migrations/)"
        )
    names = sorted(item.name for item in root.iterdir() if item.name.endswith(".sql"))
    if not names:
        raise MigrationsNotFound(f"the migrations folder {root} holds no .sql files: nothing would create the schema")
    return names


def pending(database_url: str, schema: str = DEFAULT_SCHEMA, migrations: Traversable = MIGRATIONS) -> list[str] | None:
    """The migrations `schema` still lacks, read without writing anything (a least-privilege role can ask);
    None when the schema, or yoyo's table in it, does not exist or cannot be read."""
    check_schema_name(schema)
    ids = [name.removesuffix(".sql") for name in migration_files(migrations)]
    with psycopg.connect(database_url, autocommit=True) as conn:
        try:
            rows = conn.execute(
                sql.SQL("SELECT migration_id FROM {}._yoyo_migration").format(sql.Identifier(schema))
            ).fetchall()
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName, psycopg.errors.InsufficientPrivilege):
            return None
    applied = {row[0] for row in rows}
    return [i for i in ids if i not in applied]


def migrate(
    database_url: str, schema: str = DEFAULT_SCHEMA, migrations: Traversable = MIGRATIONS, *, roles: bool = False
) -> list[str]:
    """Create `schema` if needed and apply pending migrations; return their ids.

    Checks the migrations exist before touching the database, so a broken
    install fails with MigrationsNotFound instead of reporting zero applied.
    With `roles`, or once the least-privilege roles exist (`projections.roles`), every object is then handed
    to their owner and the grants are set again, so a new table is never left to the administrator.
    """
    from yoyo import get_backend, read_migrations

    check_schema_name(schema)
    migration_files(migrations)
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        # IF NOT EXISTS does not hold against a concurrent creator (two processes starting at once both
        # pass the check, one fails on the catalog's unique index): creators of one schema take turns.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('judgeflow schema ' || %s))", [schema])
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    backend = get_backend(yoyo_url(database_url, schema))
    with _on_disk(migrations) as folder:
        found = read_migrations(str(folder))
        if not found:
            raise MigrationsNotFound(f"yoyo read no migrations from {folder}")
        with backend.lock():
            todo = backend.to_apply(found)
            backend.apply_migrations(todo)
    with psycopg.connect(database_url, autocommit=True) as conn:
        if roles or owner_exists(conn):
            apply_roles(conn, schema)
    return [m.id for m in todo]


def connect(database_url: str, schema: str = DEFAULT_SCHEMA, **kwargs: object) -> psycopg.Connection:
    """A connection whose search_path is the read-model schema."""
    check_schema_name(schema)
    return psycopg.connect(database_url, options=f"-c search_path={schema}", **kwargs)  # type: ignore[arg-type]
