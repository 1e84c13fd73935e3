"""``benchmarks.memory_bench``: the smaps split names each engine file's component; the build
children's sampler."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.memory_bench import BuildSampler, component, smaps_split

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


def test_the_segment_being_built_is_named_apart() -> None:
    builder = "/s/shard/temp_segments/segment_builder_sSQ0Cl/"
    assert component(builder + "vector_storage-dense/matrix.dat") == "builder:vector_storage-dense"
    assert component(builder + "payload_storage/page_0.dat") == "builder:payload_storage"
    assert component(builder + "payload_index/q1qb0dc5aqg8l6a1eccik8eg-agent_id-map/page_0.dat") \
        == "builder:payload_index:agent_id-map"


def test_the_sampler_reports_a_child_s_anonymous_memory_apart() -> None:
    # a child that holds 64 MB of heap for a second: the sampler's peak must show it as
    # anonymous memory, not file-backed
    with BuildSampler(every=0.05) as sampler:
        subprocess.run([sys.executable, "-c", "import time; x = bytearray(64 << 20); "
                        "x[::4096] = b'1' * len(x[::4096]); time.sleep(1)"], check=True)
    peak = sampler.peak()
    assert peak["children"] == 1 and peak["samples"] >= 3
    assert peak["RssAnon"] >= 64 and peak["VmHWM"] >= peak["RssAnon"]
    assert peak["RssFile"] < 64
    assert peak["smaps"]["anon"] >= 64
    assert sampler.take()["RssAnon"] >= 64 and "RssAnon" not in sampler.peak()
