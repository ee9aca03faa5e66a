"""Least-privilege Postgres roles for one read-model schema (DESIGN decision 15).

`judgeflow migrate --roles` runs this as an administrator (a superuser, or a role with CREATEROLE that owns the
schema). It creates, once, and grants, every time (it is idempotent):

- `judgeflow_owner`, NOLOGIN: owns the schema and every object in it. Migrations run under `SET ROLE` to it,
  so new tables are its too. No process logs in as it, so no process can disable or drop the raw tables'
  triggers: only an owner can.
- `judgeflow_projector`: reads and inserts everywhere it projects; UPDATE and DELETE only on read models, never
  on the insert-only (raw) tables; no TRUNCATE anywhere; nothing on the desk's leases.
- `judgeflow_analyst`: SELECT on the views and the projected tables, not on `raw_events` (the event log's
  bytes); no write.
- `judgeflow_desk`: SELECT on what the review desk shows, and its lease table (SELECT, INSERT, UPDATE); it
  never writes a read model (its reviews are events).

The login roles get a password from `JUDGEFLOW_<ROLE>_PASSWORD` or `..._PASSWORD_FILE` (e.g.
`JUDGEFLOW_PROJECTOR_PASSWORD_FILE`) when one is set; otherwise authentication is whatever `pg_hba.conf` says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psycopg
from psycopg import sql

OWNER = "judgeflow_owner"
PROJECTOR = "judgeflow_projector"
ANALYST = "judgeflow_analyst"
DESK = "judgeflow_desk"
LOGINS = (PROJECTOR, ANALYST, DESK)

HIDDEN_FROM_ANALYSTS = ("raw_events",)
DESK_READS = (
    "review_items",
    "run_review_items",
    "checks",
    "claim_checks",
    "reviews",
    "run_reviews",
    "evaluation_reconciled_revisions",
    "judge_outputs",
)
DESK_WRITES = ("review_leases",)
MIGRATION_BOOKS = ("_yoyo_migration", "_yoyo_log", "_yoyo_version", "yoyo_lock")
"""yoyo's own tables: the owner's; the projector reads `_yoyo_migration` to see that nothing is pending."""


@dataclass(frozen=True)
class RolesApplied:
    schema: str
    created: list[str]
    insert_only: list[str]
    """The raw tables (insert-only triggers): the projector may only read and insert them."""
    objects_owned: int


PASSWORD_ENV = {
    PROJECTOR: "JUDGEFLOW_PROJECTOR_PASSWORD",
    ANALYST: "JUDGEFLOW_ANALYST_PASSWORD",
    DESK: "JUDGEFLOW_DESK_PASSWORD",
}
"""Where each login role's password comes from (or from the file `<NAME>_FILE` names)."""


def password_for(role: str) -> str | None:
    """The role's password from its variable, or from the file `<variable>_FILE` names (without the final
    newline); None when neither is set."""
    name = PASSWORD_ENV[role]
    path = os.environ.get(name + "_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read().rstrip("\n")
    return os.environ.get(name) or None


def owner_exists(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [OWNER]).fetchone() is not None


def apply_roles(conn: psycopg.Connection, schema: str) -> RolesApplied:
    """Create the roles if missing, hand every object of `schema` to the owner, and set the grants, in one
    transaction (a failure changes nothing)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('judgeflow roles'))")  # two runs at once take turns
        created = _create_roles(conn)
        owned = _hand_to_owner(conn, schema)
        insert_only = _insert_only(conn, schema)
        grant_all(conn, schema, insert_only)
    return RolesApplied(schema, created, insert_only, owned)


def _create_roles(conn: psycopg.Connection) -> list[str]:
    created = []
    for role in (OWNER, *LOGINS):
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone() is None:
            login = sql.SQL("NOLOGIN" if role == OWNER else "LOGIN")
            conn.execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(role), login))
            created.append(role)
        secret = password_for(role) if role != OWNER else None
        if secret is not None:
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(secret)))
    # The administrator becomes a member of the owner, so that it can hand objects over and migrate as it.
    conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(OWNER)))
    return created


def _hand_to_owner(conn: psycopg.Connection, schema: str) -> int:
    owner = sql.Identifier(OWNER)
    conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(sql.Identifier(schema), owner))
    kinds = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "S": "SEQUENCE"}
    rows = conn.execute(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = ANY(%s) AND pg_get_userbyid(c.relowner) <> %s "
        "AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'a'))",
        [schema, list(kinds), OWNER],
    ).fetchall()
    for name, kind in rows:
        conn.execute(
            sql.SQL("ALTER {} {}.{} OWNER TO {}").format(
                sql.SQL(kinds[kind]), sql.Identifier(schema), sql.Identifier(name), owner
            )
        )
    functions = conn.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = %s AND pg_get_userbyid(p.proowner) <> %s",
        [schema, OWNER],
    ).fetchall()
    for (signature,) in functions:
        conn.execute(sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(sql.SQL(signature), owner))
    return len(rows) + len(functions)


def _insert_only(conn: psycopg.Connection, schema: str) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND t.tgname = 'insert_only' "
        "ORDER BY 1",
        [schema],
    ).fetchall()
    return [name for (name,) in rows]


def _relations(conn: psycopg.Connection, schema: str) -> list[tuple[str, bool]]:
    """(name, is a table) for every table and view of `schema`: views are only ever read (a simple view is
    updatable, and writes through it would run with the owner's rights)."""
    rows = conn.execute(
        "SELECT c.relname, c.relkind IN ('r', 'p') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1",
        [schema],
    ).fetchall()
    return [(name, bool(table)) for name, table in rows]


def grant_all(conn: psycopg.Connection, schema: str, insert_only: list[str]) -> None:
    """Revoke what anyone but the owner holds in `schema`, then grant each login role what it needs."""
    s = sql.Identifier(schema)
    logins = sql.SQL(", ").join(sql.Identifier(r) for r in LOGINS)

    def on(name: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(s, sql.Identifier(name))

    def grant(privileges: str, table: str, role: str) -> None:
        conn.execute(sql.SQL("GRANT {} ON {} TO {}").format(sql.SQL(privileges), on(table), sql.Identifier(role)))

    conn.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC, {}").format(s, logins))
    conn.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM PUBLIC, {}").format(s, logins))
    conn.execute(sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM PUBLIC, {}").format(s, logins))
    conn.execute(sql.SQL("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {} FROM PUBLIC, {}").format(s, logins))
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, logins))
    conn.execute(sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(s, logins))
    projector = sql.Identifier(PROJECTOR)
    conn.execute(sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(s, projector))
    for table, writable in _relations(conn, schema):
        if table in MIGRATION_BOOKS:
            if table == "_yoyo_migration":
                grant("SELECT", table, PROJECTOR)
            continue
        if not writable:
            grant("SELECT", table, PROJECTOR)
        elif table not in DESK_WRITES:
            grant("SELECT, INSERT" if table in insert_only else "SELECT, INSERT, UPDATE, DELETE", table, PROJECTOR)
        if table not in HIDDEN_FROM_ANALYSTS:
            grant("SELECT", table, ANALYST)
        if table in DESK_READS:
            grant("SELECT", table, DESK)
        if table in DESK_WRITES:
            grant("SELECT, INSERT, UPDATE", table, DESK)
