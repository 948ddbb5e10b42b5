"""MSR Cambridge CSV: the shared excerpt of hm_0 and hand-made malformed files."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import iotwin
from iotwin.formats import detect


def test_reads_shared_excerpt(traces: Path) -> None:
    trace = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    df = trace.df
    assert detect(traces / "msr_hm0_excerpt.csv").name == "msr"
    assert df.height == 1000
    assert trace.meta.streams == {0: "hm_0"}
    # first record: 128166385295514663,hm,0,Write,9056014336,2048,2833
    first = df.row(0, named=True)
    assert first == {
        "ts_ns": 0,
        "stream": 0,
        "op": 1,
        "offset": 9056014336,
        "size": 2048,
        "latency_ns": 283300,
    }
    # second record 215 ticks later
    assert df["ts_ns"][1] == 21500
    assert df["op"].eq(0).sum() == 508  # read fraction 0.508 (reference figure)
    assert df["ts_ns"].is_sorted()


def test_ingest_round_trip(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "hm0.parquet"
    result = iotwin.ingest(traces / "msr_hm0_excerpt.csv", out)
    assert (result.requests, result.streams, result.format) == (1000, 1, "msr")
    again = iotwin.load_trace(out)
    assert again.meta.format == "msr" and again.meta.streams == {0: "hm_0"}
    assert again.df.equals(iotwin.load_trace(traces / "msr_hm0_excerpt.csv").df)
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind
    # standard Parquet that pyarrow reads too; every column but latency required
    table = pq.read_table(out)
    assert pl.from_arrow(table).equals(again.df)
    assert [f.name for f in table.schema if f.nullable] == ["latency_ns"]


BAD = (
    "128166385295514663,hm,0,Write,9056014336,2048,2833\n"
    "128166385295514878,hm,0,Write,11855351808,512,2617\n"
    "128166385295515175,hm,0,Wrte,5548077056,4096,2320\n"
    "128166385301451520,hm,0,Read,3163095040,4x96,3438\n"
    "128166385301453920,hm,0,Write,3154132992,4096,1037\n"
)


def test_malformed_record_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "msr")
    assert (err.value.location, err.value.field) == ("line 3", "Type")
    assert str(src) in str(err.value)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]  # nothing half written


def test_lines_short_of_fields_throughout_name_the_first(tmp_path: Path) -> None:
    """A file whose lines all lack fields (polars' scanner gives up on it) still gets the
    line and the first missing field, not the scanner's schema error."""
    src = tmp_path / "short.csv"
    src.write_text("128166372003061629,hm,0\n128166372003061630,hm,0\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "msr")
    assert (err.value.location, err.value.field) == ("line 1", "Type")
    assert list(tmp_path.iterdir()) == [src]


def test_damaged_compressed_input_is_named(traces: Path, tmp_path: Path) -> None:
    """A compressed trace cut short, or not what its magic bytes say, is an error naming the
    file (a cut bz2 ended in click's bare "Aborted.", a bad gzip in a traceback)."""
    import bz2

    cut = tmp_path / "cut.csv.bz2"
    whole = bz2.compress((traces / "msr_hm0_excerpt.csv").read_bytes())
    cut.write_bytes(whole[: len(whole) // 2])
    fake = tmp_path / "fake.csv.gz"
    fake.write_bytes(b"\x1f\x8b not gzip at all")
    for src, kind in ((cut, "bz2"), (fake, "gzip")):
        with pytest.raises(iotwin.IotwinError) as err:
            iotwin.ingest(src, tmp_path / "out.parquet", "msr")
        assert str(err.value).startswith(f"{src}: the {kind} data is damaged or cut short")
    assert not (tmp_path / "out.parquet").exists()


def test_skip_bad_counts_and_reports(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    result = iotwin.ingest(src, tmp_path / "out.parquet", "msr", iotwin.ReadOptions(skip_bad=True))
    assert result.requests == 3 and result.skipped == 2
    assert "line 3: field 'Type'" in result.skipped_examples[0]
    assert "line 4: field 'Size'" in result.skipped_examples[1]
    df = pl.read_parquet(tmp_path / "out.parquet")
    assert df["size"].to_list() == [2048, 512, 4096]
    assert iotwin.load_trace(tmp_path / "out.parquet").meta.skipped == 2


def test_ingest_sorts_out_of_order_records(tmp_path: Path) -> None:
    """Records out of time order are sorted stably, times counted from the earliest; the
    file has the streamed files' encodings (required columns, times delta-encoded)."""
    src = tmp_path / "late.csv"
    src.write_text(
        "128166385295514663,hm,0,Write,4096,512,10\n"
        "128166385295514600,hm,1,Read,8192,1024,20\n"  # 63 ticks before the first line
        "128166385295514663,hm,0,Read,0,4096,30\n"  # the first line's time: stays after it
    )
    out = tmp_path / "late.parquet"
    result = iotwin.ingest(src, out, "msr")
    assert (result.requests, result.streams) == (3, 2)
    df = pl.read_parquet(out)
    assert df["ts_ns"].to_list() == [0, 6300, 6300]
    assert df["offset"].to_list() == [8192, 4096, 0]
    assert df["latency_ns"].to_list() == [2000, 1000, 3000]
    schema = pq.read_schema(out)
    assert [f.name for f in schema if f.nullable] == ["latency_ns"]
    column = pq.ParquetFile(out).metadata.row_group(0).column(0)
    assert "DELTA_BINARY_PACKED" in column.encodings
    assert iotwin.load_trace(out).meta.streams == {0: "hm_0", 1: "hm_1"}


def test_batch_checks_list_streams_by_counting_and_by_unique() -> None:
    """Row groups list their stream ids by counting when the ids span little, else by unique;
    their extents merge into the trace's."""
    from iotwin.ingest import _BatchChecks

    def group(ts: list[int], stream: list[int], offset: list[int], size: list[int]):
        return pl.DataFrame(
            {"ts_ns": ts, "stream": stream, "offset": offset, "size": size},
            schema_overrides={"stream": pl.UInt32, "offset": pl.UInt64, "size": pl.UInt32},
        )

    checks = _BatchChecks()
    checks.update(group([1, 2, 3, 4], [7, 3, 7, 9], [4096, 512, 0, 8192], [512, 512, 4096, 1024]))
    checks.update(group([5, 6], [4, 4], [1 << 40, 100], [4096, 0]))
    checks.update(group([7, 8], [2, 4_000_000_000], [7, 9], [1, 1]))
    assert checks.streams == {2, 3, 4, 7, 9, 4_000_000_000}
    assert checks.requests == 8 and checks.ordered and checks.nulls == 0
    assert checks.extent == {
        "rows": 8,
        "first_ts": 1,
        "last_ts": 8,
        "max_stream": 4_000_000_000,
        "min_offset": 0,
        "max_end": (1 << 40) + 4096,
    }


def test_prefetch_holds_at_most_its_budget() -> None:
    """Ingest's read-ahead is bounded in rows, not batches: the producer waits while the
    batches not yet taken would pass the budget (one batch always passes, however large)."""
    import threading
    import time

    from iotwin.source import prefetched

    sizes = [300, 300, 300, 900, 100, 100, 100, 100, 2500, 50]
    made: list[int] = []
    lock = threading.Lock()

    def produce():
        for n in sizes:
            with lock:
                made.append(n)
            yield n

    waiting = []
    taken = 0
    for n in prefetched(produce(), size=lambda n: n, budget=1000):
        time.sleep(0.02)  # a slow consumer: the producer runs ahead as far as it may
        taken += n
        with lock:
            # made but not yet taken: the batches in the queue and the one the producer holds
            waiting.append(sum(made) - taken)
    assert sum(made) == taken == sum(sizes)
    # without the budget all 10 would wait at once; with it, the queue holds <= 1000 and the
    # producer one more batch (the largest being 2,500)
    assert max(waiting) <= 1000 + 2500
    assert waiting[0] <= 1000 + 900
