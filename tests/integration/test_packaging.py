"""The wheel carries its SQL migrations, and a missing or empty folder is an error.

The integration tests build the wheel from exactly what the Dockerfile copies,
install it into a fresh venv in a temp folder and run that venv's
`judgeflow migrate` from the temp folder: nothing from the checkout can help.

Why the fresh venv sees its dependencies through a `.pth` line and not
`--system-site-packages`: the "system" of a venv created from this venv's
python is the base interpreter, which has none of them. A `.pth` path line
naming this venv's site-packages adds them without network or install time,
and `.pth` files inside a directory added that way are not executed, so this
venv's editable install of the checkout stays out. The wheel is built with
`--no-build-isolation` for the same reason: the venv's setuptools (dev extra)
builds it offline.

The first tests (not marked integration) need no services.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from projections.migrate import MIGRATIONS, MigrationsNotFound, migrate, migration_files

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the guard comes first
REPO_SQL = sorted(p.name for p in (ROOT / "migrations").glob("*.sql"))


def test_empty_migrations_folder_raises_before_touching_the_database(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("not a migration")
    with pytest.raises(MigrationsNotFound, match="no .sql files"):
        migrate(NOWHERE, "judgeflow", migrations=tmp_path)


def test_missing_migrations_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(MigrationsNotFound, match="no migrations folder"):
        migrate(NOWHERE, "judgeflow", migrations=tmp_path / "absent")


def test_package_resource_is_the_top_level_migrations_folder() -> None:
    assert REPO_SQL, "migrations/ holds no SQL files"
    assert migration_files(MIGRATIONS) == REPO_SQL


def _dockerfile_sources() -> list[str]:
    """The paths the Dockerfile's build stage copies (its `COPY src... dest` lines, not `--from`)."""
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = shlex.split(line)
        if words[:1] == ["COPY"] and not any(w.startswith("--") for w in words):
            sources += words[1:-1]
    return sources


def _run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


class Installed:
    def __init__(self, root: Path, wheel: Path, venv: Path, site: Path) -> None:
        self.root, self.wheel, self.venv, self.site = root, wheel, venv, site

    def judgeflow(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUDGEFLOW_", "DATABASE_URL"))}
        return _run([str(self.venv / "bin" / "judgeflow"), *args], cwd=self.root, env={**base, **env})


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel-install")
    src = root / "src"
    src.mkdir()
    for name in _dockerfile_sources():
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                  "-w", str(root / "dist"), str(src)], cwd=root)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (root / "dist").glob("judgeflow-*.whl")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                 str(wheel)], cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=root).stdout.strip())  # fmt: skip
    (site / "zz_shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield Installed(root, wheel, venv, site)


def _tables(database_url: str, schema: str) -> set[str]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_name NOT LIKE %s",
            (schema, r"\_yoyo%"),
        ).fetchall()
    return {r[0] for r in rows if not r[0].startswith("yoyo")}


@pytest.mark.integration
def test_wheel_lists_every_migration(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        shipped = sorted(Path(n).name for n in whl.namelist() if n.startswith("projections/migrations/"))
    assert shipped == REPO_SQL


@pytest.mark.integration
def test_installed_wheel_migrates_outside_the_checkout(installed: Installed, database_url: str) -> None:
    where = _run([str(installed.venv / "bin" / "python"), "-c",
                  "import judgeflow, projections.migrate as m; print(judgeflow.__file__); print(m.MIGRATIONS)"],
                 cwd=installed.root)  # fmt: skip
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(installed.site), f"imported from outside the wheel: {line}"

    schema = "wheel_install"
    done = installed.judgeflow("migrate", "--schema", schema, DATABASE_URL=database_url)
    assert done.returncode == 0, done.stderr
    assert f"applied {len(REPO_SQL)} migration(s) to schema {schema}" in done.stdout

    migrate(database_url, "wheel_reference")  # the same migrations, from the checkout
    expected = _tables(database_url, "wheel_reference")
    assert {"raw_events", "judge_outputs", "claim_checks"} <= expected
    assert _tables(database_url, schema) == expected

    again = installed.judgeflow("migrate", "--schema", schema, DATABASE_URL=database_url)
    assert again.returncode == 0, again.stderr
    assert "applied 0 migration(s)" in again.stdout


@pytest.mark.integration
def test_install_without_migrations_fails_loudly(installed: Installed, database_url: str) -> None:
    folder = installed.site / "projections" / "migrations"
    hidden = installed.root / "hidden-migrations"
    shutil.move(folder, hidden)
    try:
        done = installed.judgeflow("migrate", "--schema", "wheel_missing", DATABASE_URL=database_url)
        assert done.returncode != 0, (done.stdout, done.stderr)
        assert "no migrations folder" in done.stderr and "applied" not in done.stdout, done.stderr
        folder.mkdir()
        for args in (["migrate", "--schema", "wheel_empty"], ["projector", "--schema", "wheel_empty"]):
            done = installed.judgeflow(*args, DATABASE_URL=database_url, KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1")
            assert done.returncode != 0, (args, done.stdout, done.stderr)
            assert "holds no .sql files" in done.stderr, (args, done.stderr)
            assert "applied" not in done.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.move(hidden, folder)
    assert _tables(database_url, "wheel_missing") == set()
    assert _tables(database_url, "wheel_empty") == set()
