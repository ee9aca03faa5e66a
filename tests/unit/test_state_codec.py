"""The tables' codec writes Faust's JSON bytes, and an encoded key costs its own length in memory."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path
from typing import Any

from faust.serializers import codecs
from hypothesis import given
from hypothesis import strategies as st

from streams.state_codec import STATE_CODEC

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(json_values)
def test_the_bytes_are_fausts_json_and_read_back(value: Any) -> None:
    encoded = STATE_CODEC.dumps(value)
    assert encoded == codecs.get_codec("json").dumps(value)
    assert STATE_CODEC.loads(encoded) == value


KEYS = 1_000


def _traced_bytes_per_key(encode: Any) -> float:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [encode(f"claim-{i:07d}") for i in range(KEYS)]
        assert len(kept) == KEYS
        return (tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(kept)) / KEYS
    finally:
        tracemalloc.stop()


def test_the_keys_a_rocksdb_worker_indexes_cost_their_own_length(tmp_path: Path) -> None:
    """Faust's RocksDB store keeps up to 1,000 encoded keys per table in its key index. Bytes straight from
    orjson (3.12+) would each hold a buffer of at least 4 KiB."""
    from streams.app import WorkerOptions, build_app

    app = build_app(WorkerOptions(bootstrap_servers="127.0.0.1:9", store="rocksdb://", data_dir=str(tmp_path)))
    stores = [table.data for table in app.tables.values()]
    # The store encodes with the table's codecs, and so does the changelog (`Table.send_changelog`).
    assert stores and all(s.key_serializer is STATE_CODEC and s.value_serializer is STATE_CODEC for s in stores)
    assert all(t.key_serializer is STATE_CODEC for t in app.tables.values())
    per_key = _traced_bytes_per_key(stores[0]._encode_key)
    assert per_key < 100, f"{per_key:.0f} bytes per indexed key of {len(STATE_CODEC.dumps('claim-0000000'))}"
