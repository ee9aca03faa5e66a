"""How the worker's tables encode their keys and states: Faust's JSON, in bytes objects of their own length.

Faust's `json` codec calls orjson when it is installed, and orjson (3.12 onwards) returns a bytes object that
keeps the whole buffer it wrote into: at least 4 KiB, whatever the length of the JSON. Faust's RocksDB store
keeps the encoded keys it last wrote or read, up to 1,000 per table (`table_key_index_size`), to know which
partition's database holds them. On the bench's memory workload those indexes grew to 2,000 keys of 4 KiB,
8 MiB, and their filling up was most of the worker's Python-side growth (bench/PROFILE.md).

This codec writes the same bytes as Faust's `json` codec and copies them into an exact-size object, a copy
of a few hundred bytes per table read or write. Changelogs and stored databases stay as they were.
"""

from __future__ import annotations

from typing import Any

from faust.serializers import codecs


class CompactJSON(codecs.json):
    """Faust's `json` codec whose output holds only its own bytes."""

    def _dumps(self, s: Any) -> bytes:
        return bytes(memoryview(super()._dumps(s)))


STATE_CODEC = CompactJSON()
"""The key and value codec of every table the worker keeps."""
