"""The worker's RocksDB databases share one memory budget: real rocksdict databases in a temporary folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

rocksdict = pytest.importorskip("rocksdict")

from faust.stores.rocksdb import RocksDBOptions  # noqa: E402

from streams.rocksdb_memory import BoundedOptions, MemoryBudget  # noqa: E402

DATABASES = 8
WRITES = 24_000
VALUE = 200


def _fill(dbs: list, seed: int = 0) -> None:
    for i in range(WRITES):
        dbs[i % len(dbs)].put(f"claim-{seed}-{i:07d}".encode(), os.urandom(VALUE))


def _memtables(dbs: list) -> int:
    return sum(db.property_int_value("rocksdb.cur-size-all-mem-tables") for db in dbs)


def _flushes_done(dbs: list, timeout: float = 30.0) -> None:
    """Flushes run on RocksDB's own threads: wait (bounded) until none is pending or running."""
    deadline = time.monotonic() + timeout
    while any(db.property_int_value("rocksdb.mem-table-flush-pending") or
              db.property_int_value("rocksdb.num-running-flushes") for db in dbs):  # fmt: skip
        assert time.monotonic() < deadline, "RocksDB's flushes did not finish"
        time.sleep(0.01)


def _sst_files(root: Path) -> int:
    return sum(1 for _ in root.rglob("*.sst"))


def test_memtables_of_all_databases_stay_within_their_share_of_one_budget(tmp_path: Path) -> None:
    budget = MemoryBudget(8 << 20)  # memtables: 2 MiB for all eight databases
    options = BoundedOptions(budget, write_buffer_size=8 << 20, max_write_buffer_number=2)
    dbs = [options.open(tmp_path / f"table-{p}.db") for p in range(DATABASES)]
    _fill(dbs)  # ~5.5 MB of keys and values: more than the share, less than one write buffer per database
    _flushes_done(dbs)  # a soft limit: memtables being flushed still count until their flush ends
    share = budget.budget // 4
    # A soft limit (RocksDB checks it before a write, then flushes the database written): measured up to 1.32x
    # the share here, against 4.0x and no file written with Faust's own options below.
    assert _memtables(dbs) <= share * 3 // 2
    assert budget.memtable_usage() <= share * 3 // 2
    assert budget.cache_usage() <= budget.budget
    assert 0 < _sst_files(tmp_path) <= 200, "flushed to files, without a flush per write"
    for i in range(0, WRITES, 997):  # nothing lost: every key is read back, from memtable or file
        assert dbs[i % DATABASES].get(f"claim-0-{i:07d}".encode()) is not None
    for db in dbs:
        db.close()


def test_fausts_own_options_keep_the_same_writes_in_memory(tmp_path: Path) -> None:
    """The reference: per-database write buffers of the same size flush nothing, so the memtables hold it all."""
    options = RocksDBOptions(write_buffer_size=8 << 20, max_write_buffer_number=2, block_cache_size=1 << 20)
    dbs = [options.open(tmp_path / f"table-{p}.db") for p in range(DATABASES)]
    _fill(dbs)
    _flushes_done(dbs)
    assert _memtables(dbs) > 2 * (2 << 20)
    assert _sst_files(tmp_path) == 0
    for db in dbs:
        db.close()


def test_a_budget_below_one_mebibyte_is_refused() -> None:
    with pytest.raises(ValueError):
        MemoryBudget(1000)


def test_a_database_written_with_fausts_options_opens_with_the_budget(tmp_path: Path) -> None:
    """Workers upgraded in place keep their state: the files are the same format, only memory is shared."""
    path = tmp_path / "table-0.db"
    old = RocksDBOptions(write_buffer_size=1 << 20, block_cache_size=1 << 20).open(path)
    for i in range(5_000):
        old.put(f"run-{i}".encode(), f"state-{i}".encode())
    old.flush()
    old.close()
    db = BoundedOptions(MemoryBudget(4 << 20)).open(path)
    assert [db.get(f"run-{i}".encode()) for i in (0, 2_500, 4_999)] == [b"state-0", b"state-2500", b"state-4999"]
    db.close()


def test_every_table_of_a_rocksdb_worker_draws_on_one_budget_in_fausts_own_file_layout(tmp_path: Path) -> None:
    from streams.app import WorkerOptions, build_app
    from streams.rocksdb_memory import Store

    app = build_app(WorkerOptions(bootstrap_servers="127.0.0.1:9", store="rocksdb://", data_dir=str(tmp_path),
                                  rocksdb_memory_bytes=16 << 20))  # fmt: skip
    stores = [table.data for table in app.tables.values()]
    assert stores and all(isinstance(s, Store) and isinstance(s.rocksdb_options, BoundedOptions) for s in stores)
    assert len({id(s.rocksdb_options.budget) for s in stores}) == 1
    assert stores[0].rocksdb_options.budget.budget == 16 << 20
    assert {s.partition_path(0) for s in stores} == {tmp_path / "v1" / "tables" / f"{name}-0.db" for name in app.tables}
