"""``benchmarks.memory_bench``: the smaps split names each engine file's component."""

from __future__ import annotations

from benchmarks.memory_bench import component, smaps_split

SEG = "/s/shard/segments/0fd754e1-7cbd-4606-b534-c30f3280f8f0/"


def test_each_engine_file_is_named_by_its_component() -> None:
    assert component(SEG + "vector_storage-dense/matrix.dat") == "vector_storage-dense"
    assert component(SEG + "vector_storage-dense/quantized.data") == "quantized-dense"
    assert component(SEG + "vector_index-dense/links_compressed.bin") == "vector_index-dense"
    assert component(SEG + "payload_storage/page_0.dat") == "payload_storage"
    assert component(SEG + "payload_index/q1qb0dc5aqg8l6a1eccik8eg-agent_id-map/page_0.dat") \
        == "payload_index:agent_id-map"
    assert component(SEG + "id_tracker.mappings") == "id_tracker"
    assert component(SEG + "mutable_id_tracker.versions") == "id_tracker"
    assert component("/s/shard/wal/open-1") == "wal"
    assert component("/usr/lib/libc.so.6") is None


def test_this_process_splits_into_anonymous_and_file_memory() -> None:
    split = smaps_split()
    assert split["anon"] > 1 and split["other_file"] > 1
    assert all(value > 0 for value in split.values())
