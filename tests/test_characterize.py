"""`iotwin characterize`: hand-computed small traces, the shared real traces, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from reference import canonical
from typer.testing import CliRunner

import iotwin
from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.formats import get_format

S = 1_000_000_000

# Ten requests of three streams, ten seconds apart (the same trace as the Rust unit tests):
#  i  stream op offset  size  end     jump in stream       global: continues prev end?
#  0  1      W  0       4096  4096    first                first -> run 1
#  1  2      R  8192    4096  12288   first                4096 != 8192 -> run 2
#  2  1      W  4096    4096  8192    4096-4096 = 0 seq    12288 != 4096 -> run 3
#  3  1      W  8192    4096  12288   8192-8192 = 0 seq    8192 == 8192 -> continues
#  4  2      R  0       512   512     0-12288 backward     12288 != 0 -> run 4
#  5  3      R  40960   8192  49152   first                512 != 40960 -> run 5
#  6  2      R  512     512   1024    512-512 = 0 seq      49152 != 512 -> run 6
#  7  1      W  45056   4096  49152   45056-12288 = +32768 1024 != 45056 -> run 7
#  8  3      R  49152   1024  50176   49152-49152 = 0 seq  49152 == 49152 -> continues
#  9  2      R  100000  512   100512  100000-1024 = +98976 50176 != 100000 -> run 8
HAND_ROWS = [
    (1, 1, 0, 4096),
    (2, 0, 8192, 4096),
    (1, 1, 4096, 4096),
    (1, 1, 8192, 4096),
    (2, 0, 0, 512),
    (3, 0, 40960, 8192),
    (2, 0, 512, 512),
    (1, 1, 45056, 4096),
    (3, 0, 49152, 1024),
    (2, 0, 100000, 512),
]


def hand_trace() -> iotwin.Trace:
    df = canonical(HAND_ROWS, [i * 10 * S for i in range(10)])
    return iotwin.Trace(df, iotwin.TraceMeta(streams={1: "log", 2: "reader", 3: "scan"}))


def test_hand_trace_whole() -> None:
    r = iotwin.characterize(hand_trace())
    assert r["requests"] == 10
    assert r["read_fraction"] == 0.6  # streams 2 and 3 read: 4 + 2
    assert r["sequential_fraction"] == 0.4  # i = 2, 3, 6, 8
    assert r["mean_size_bytes"] == 3123.2  # (5*4096 + 3*512 + 8192 + 1024) / 10
    assert r["span_s"] == 90.0
    assert r["mean_interarrival_s"] == 10.0
    assert r["iops"] == pytest.approx(10 / 90)
    assert r["mean_latency_s"] is None  # no latency column
    # 7 jumps (10 requests - 3 first ones): backward i4; sequential i2,3,6,8; forward i7,9
    assert r["jumps"] == pytest.approx({"backward": 1 / 7, "sequential": 4 / 7, "forward": 2 / 7})
    # other streams' requests between successive ones: stream 1: (0,2) 1, (2,3) 0, (3,7) 3;
    # stream 2: (1,4) 2, (4,6) 1, (6,9) 2; stream 3: (5,8) 2 -> 11 over 7 pairs
    assert r["interference_frequency"] == pytest.approx(11 / 7)
    assert r["run_count"] == 10 / 8  # 8 global runs (table above)
    # detangled runs: stream 1 breaks at i7 (2 runs), stream 2 at i4, i9 (3), stream 3 (1)
    assert r["detangled_run_count"] == pytest.approx(10 / 6)
    # relaxed (0 <= jump <= 64 KiB continues): stream 1 one run (+32768 ok), stream 2 breaks
    # at -12288 and +98976 (3 runs), stream 3 one run -> 5
    assert r["relaxed_detangled_run_count"] == 2.0
    # capacity = max end = 100512; quarters start at 25128, 50256, 75384: offsets 0, 8192,
    # 4096, 8192, 0, 512 in the first, 40960, 45056, 49152 in the second, 100000 in the last
    assert r["capacity_bytes"] == 100_512 and not r["capacity_known"]
    assert r["spatial_locality"] == pytest.approx([0.6, 0.3, 0.0, 0.1])
    # 512-byte blocks per request: 8, 8, 8, 8, 1, 16, 1, 8, 2 (49152..50175 -> 96, 97),
    # 2 (100000..100511 -> 195, 196) = 62; unique: 0-23, 80-97, 195-196 = 24 + 18 + 2 = 44;
    # 4 KiB pages: 0, 1, 2, 10, 11, 12, 24 = 7
    assert r["requested_blocks_512"] == 62
    assert r["footprint_blocks_512"] == 44
    assert r["footprint_blocks_4k"] == 7
    # 90 s is under ten 30-minute windows: ten 9 s windows with one request each
    assert r["fluctuation"]["window_s"] == 9.0
    assert r["fluctuation"]["rates"] == pytest.approx([1 / 9] * 10)
    assert r["fluctuation"]["cv"] == pytest.approx(0.0, abs=1e-12)
    sizes = r["size_distribution"]
    assert sizes["top"][:2] == [
        {"size_bytes": 4096, "share": 0.5},
        {"size_bytes": 512, "share": 0.3},
    ]
    assert {b["min_bytes"]: b["count"] for b in sizes["log2_histogram"]} == {
        512: 3,
        1024: 1,
        4096: 5,
        8192: 1,
    }
    # jumps -12288 in [-16383, -8192], 0 x4, 32768 in [32768, 65535], 98976 in [65536, 131071]
    assert [(b["bucket"], b["min"], b["max"], b["count"]) for b in r["jump_histogram"]] == [
        (-14, -16383, -8192, 1),
        (0, 0, 0, 4),
        (16, 32768, 65535, 1),
        (17, 65536, 131071, 1),
    ]


def test_hand_trace_streams() -> None:
    r = iotwin.characterize(hand_trace())
    by_name = {s["name"]: s for s in r["streams"]}
    assert [s["name"] for s in r["streams"]] == ["log", "reader", "scan"]  # by weight
    log, reader, scan = by_name["log"], by_name["reader"], by_name["scan"]
    assert (log["weight"], reader["weight"], scan["weight"]) == (0.4, 0.4, 0.2)
    # stream 1: i0, 2, 3, 7 at 0, 20, 30, 70 s; two sequential, one +32768 jump
    assert log["sequential_fraction"] == 0.5
    assert log["jumps"] == pytest.approx({"backward": 0, "sequential": 2 / 3, "forward": 1 / 3})
    assert log["span_s"] == 70.0 and log["iops"] == pytest.approx(4 / 70)
    assert log["interference_frequency"] == pytest.approx(4 / 3)
    # global runs started by stream 1: i0, i2, i7
    assert log["run_count"] == pytest.approx(4 / 3)
    assert (log["detangled_run_count"], log["relaxed_detangled_run_count"]) == (2.0, 4.0)
    assert log["spatial_locality"] == pytest.approx([0.75, 0.25, 0, 0])
    assert (log["footprint_blocks_512"], log["footprint_blocks_4k"]) == (32, 4)
    # stream 2: i1, 4, 6, 9; jumps -12288, 0, +98976
    assert reader["read_fraction"] == 1.0 and reader["sequential_fraction"] == 0.25
    assert reader["interference_frequency"] == pytest.approx(5 / 3)
    assert reader["run_count"] == 1.0  # each of its requests starts a global run
    assert reader["relaxed_detangled_run_count"] == pytest.approx(4 / 3)
    assert reader["spatial_locality"] == pytest.approx([0.75, 0, 0, 0.25])
    # sectors 16-23, 0, 1, 195-196; pages 2, 0, 24
    assert (reader["footprint_blocks_512"], reader["footprint_blocks_4k"]) == (12, 3)
    # stream 3: i5, 8 at 50 and 80 s, one sequential continuation that is also global
    assert scan["mean_interarrival_s"] == 30.0 and scan["run_count"] == 2.0
    assert (scan["footprint_blocks_512"], scan["footprint_blocks_4k"]) == (18, 3)
    # k of the ten equal windows active at the same rate: cv = sqrt(10 / k - 1)
    assert log["fluctuation_cv"] == pytest.approx(math.sqrt(1.5))
    assert scan["fluctuation_cv"] == pytest.approx(2.0)
    # stream 1 only writes and all its jumps are within 64 KiB: a log; weight 0.4 and 0.4
    # are >= the mean 1/3, 0.2 is not; cv >= 0.5 is high fluctuation
    assert log["type"] == "log/high-intensity/high-fluctuation"
    assert reader["type"] == "data/high-intensity/high-fluctuation"
    assert scan["type"] == "data/low-intensity/high-fluctuation"
    assert r["classification_thresholds"]["high_intensity_min_weight"] == pytest.approx(1 / 3)


def test_locality_levels_and_known_capacity() -> None:
    trace = hand_trace()
    trace.meta.capacity = 1 << 20  # 1 MiB: 16 ranges of 64 KiB at level 2
    r = iotwin.characterize(trace, levels=2, fanout=4)
    shares = r["spatial_locality"]
    assert len(shares) == 16 and r["capacity_known"]
    # all offsets below 64 KiB except 100000 (range 1)
    assert shares[0] == pytest.approx(0.9) and shares[1] == pytest.approx(0.1)


def test_fluctuation_windows() -> None:
    # requests at 0, 1, 2, 3, 50, 100 s in 10 s windows: counts 4,0,0,0,0,1,0,0,0,1, rates
    # 0.4, 0.1, 0.1 and zeros: mean 0.06, population std 0.12, cv 2
    ts = [t * S for t in (0, 1, 2, 3, 50, 100)]
    df = canonical([(0, 0, 0, 512)] * 6, ts)
    r = iotwin.characterize(iotwin.Trace(df, iotwin.TraceMeta()), window_s=10)
    f = r["fluctuation"]
    assert f["window_s"] == 10.0
    assert f["rates"] == pytest.approx([0.4, 0, 0, 0, 0, 0.1, 0, 0, 0, 0.1])
    assert f["cv"] == pytest.approx(2.0)


def test_relaxed_threshold_parameter() -> None:
    # with a 16 KiB threshold stream 1's +32768 jump breaks its relaxed run too: 6 runs
    r = iotwin.characterize(hand_trace(), relaxed_threshold=16384)
    assert r["relaxed_detangled_run_count"] == pytest.approx(10 / 6)


@pytest.mark.parametrize("requests", [0, 1])
def test_tiny_traces_have_no_time_metrics(requests: int) -> None:
    df = canonical(HAND_ROWS[:requests], [0] * requests)
    r = iotwin.characterize(iotwin.Trace(df, iotwin.TraceMeta()))
    assert r["requests"] == requests
    for key in ("span_s", "mean_interarrival_s", "iops"):
        assert r[key] is None
    assert r["fluctuation"] == {"window_s": None, "rates": None, "cv": None}
    assert r["interference_frequency"] is None  # no stream has two requests
    assert len(r["streams"]) == requests


def test_untimed_trace() -> None:
    df = canonical(HAND_ROWS, [0] * 10)
    r = iotwin.characterize(iotwin.Trace(df, iotwin.TraceMeta(timed=False)))
    assert r["timed"] is False
    assert (r["span_s"], r["iops"], r["fluctuation"]["cv"]) == (None, None, None)
    assert r["sequential_fraction"] == 0.4
    assert r["streams"][0]["type"] == "log/high-intensity"  # no fluctuation part


def test_bad_parameters() -> None:
    with pytest.raises(IotwinError, match="levels"):
        iotwin.characterize(hand_trace(), levels=0)
    with pytest.raises(IotwinError, match="at most"):
        iotwin.characterize(hand_trace(), levels=9, fanout=4)
    with pytest.raises(IotwinError, match="windows"):
        iotwin.characterize(hand_trace(), window_s=1e-9)


# The shared real traces and their independently computed reference figures
# (../shared/traces/README.md). Values are given as strings: the value must round to them.
REFERENCE = [
    ("cloudPhysicsIO.vscsi", "vscsi", None,
     dict(requests=113_872, read="0.41252", seq="0.25957", size="36936.02", span="7200.09",
          streams=1, locality=[".2199", ".2355", ".5375", ".0071"])),
    ("msr_hm0_excerpt.csv", "msr", None,
     dict(requests=1000, read="0.508", seq="0.039", size="9689.6", span="127.233",
          streams=1, locality=[".455", ".069", ".027", ".449"])),
    ("tencent_cbs_excerpt.csv.bz2", "tencent", "volume",
     dict(requests=50_000, read="0.49042", seq="0.07542", size="30367.85", span="1",
          streams=2038, locality=[".9691", ".0250", ".0051", ".0007"])),
    ("tpcc_small.disksim", "disksim", "device",
     dict(requests=6999, read="0.62595", seq="0.01243", size="8532.46", span="0.13649",
          streams=16, locality=[".1237", ".3823", ".3308", ".1632"])),
    # ARC paper, Table III: P3 has 3,912,296 requested and 762,543 unique 512-byte pages.
    ("arc_P3.lis.zst", "arc", None, dict(requested_512=3_912_296, unique_512=762_543)),
]  # fmt: skip


def rounds_to(value: float, reference: str) -> bool:
    decimals = len(reference.split(".")[1]) if "." in reference else 0
    return round(value, decimals) == float(reference)


@pytest.mark.parametrize(
    ("name", "fmt", "stream_by", "ref"), REFERENCE, ids=[r[0] for r in REFERENCE]
)
def test_reference_figures(
    traces: Path, name: str, fmt: str, stream_by: str | None, ref: dict
) -> None:
    try:
        get_format(fmt)
    except IotwinError:
        pytest.skip(f"format {fmt} is not registered on this branch yet")
    r = iotwin.characterize(traces / name, format=fmt, opts=iotwin.ReadOptions(stream_by=stream_by))
    if "requests" in ref:
        assert r["requests"] == ref["requests"]
        assert r["stream_count"] == ref["streams"]
        assert rounds_to(r["read_fraction"], ref["read"])
        assert rounds_to(r["sequential_fraction"], ref["seq"])
        assert rounds_to(r["mean_size_bytes"], ref["size"])
        assert rounds_to(r["span_s"], ref["span"])
        for share, want in zip(r["spatial_locality"], ref["locality"], strict=True):
            assert rounds_to(share, want), (r["spatial_locality"], ref["locality"])
        assert sum(s["weight"] for s in r["streams"]) == pytest.approx(1.0)
    if "requested_512" in ref:
        assert r["requested_blocks_512"] == ref["requested_512"]
        assert r["footprint_blocks_512"] == ref["unique_512"]
        assert r["timed"] is False and r["iops"] is None


def test_single_stream_trace_has_no_interference(traces: Path) -> None:
    r = iotwin.characterize(traces / "msr_hm0_excerpt.csv")
    assert r["interference_frequency"] == 0.0
    assert r["run_count"] == r["detangled_run_count"]  # one stream: the same runs
    assert r["mean_latency_s"] is not None and r["mean_latency_s"] > 0


# ------------------------------------------------------------------------------- CLI

JSON_KEYS = {
    "requests", "read_fraction", "sequential_fraction", "mean_size_bytes",
    "mean_interarrival_s", "span_s", "iops", "spatial_locality", "footprint_blocks_4k",
    "jumps", "interference_frequency", "run_count", "detangled_run_count",
    "relaxed_detangled_run_count",
}  # fmt: skip
EXTRA_KEYS = {
    "mean_latency_s", "size_distribution", "fluctuation", "jump_histogram",
    "footprint_blocks_512", "requested_blocks_512", "timed", "capacity_bytes",
    "classification_thresholds", "streams",
}  # fmt: skip


def write_parquet(tmp_path: Path, rows: list, ts: list[int], timed: bool) -> Path:
    path = tmp_path / "t.parquet"
    iotwin.write_trace(iotwin.Trace(canonical(rows, ts), iotwin.TraceMeta(timed=timed)), path)
    return path


def test_cli_json_keys(tmp_path: Path) -> None:
    path = write_parquet(tmp_path, HAND_ROWS, [i * 10 * S for i in range(10)], True)
    result = CliRunner().invoke(app, ["characterize", str(path), "--json", "--window", "9s"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert set(r) >= JSON_KEYS | EXTRA_KEYS
    assert set(r["jumps"]) == {"backward", "sequential", "forward"}
    for stream in r["streams"]:
        assert JSON_KEYS | {"stream", "name", "weight", "type"} <= set(stream)
    assert r["sequential_fraction"] == 0.4 and r["fluctuation"]["window_s"] == 9.0


def test_cli_table_on_raw_trace(traces: Path) -> None:
    result = CliRunner().invoke(
        app, ["characterize", str(traces / "msr_hm0_excerpt.csv")], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "0.455 0.069 0.027 0.449" in result.output  # whole-trace locality
    assert "hm_0" in result.output and "high fluctuation = CV" in result.output


@pytest.mark.parametrize("requests", [0, 1])
def test_cli_untimed_tiny_trace(tmp_path: Path, requests: int) -> None:
    path = write_parquet(tmp_path, HAND_ROWS[:requests], [0] * requests, False)
    result = CliRunner().invoke(app, ["characterize", str(path), "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert (r["requests"], r["span_s"], r["iops"], r["mean_interarrival_s"]) == (
        requests, None, None, None,
    )  # fmt: skip
    table = CliRunner().invoke(app, ["characterize", str(path)], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "IOPS" in table.output and "n/a" in table.output


def test_cli_bad_option_is_one_line(tmp_path: Path) -> None:
    path = write_parquet(tmp_path, HAND_ROWS, [i * S for i in range(10)], True)
    for args in (["--levels", "0"], ["--window", "soon"]):
        proc = subprocess.run(
            [sys.executable, "-m", "iotwin.cli", "characterize", str(path), *args],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2
        assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr


def test_row_groups_count_as_one_column(traces: Path, tmp_path: Path) -> None:
    """A Parquet trace's row groups are characterized chunk by chunk, without joining them
    first; the figures are those of the trace in one piece, also with chunks that differ
    between columns."""
    whole = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    path = tmp_path / "groups.parquet"
    whole.df.write_parquet(path, row_group_size=97, metadata=whole.meta.to_kv())
    grouped = iotwin.load_trace(path)
    assert grouped._df.get_column("offset").n_chunks() > 3  # still the row groups
    expected = iotwin.characterize(whole)
    assert iotwin.characterize(grouped) == expected
    assert grouped._chunked  # characterize did not join the chunks
    assert grouped.df.get_column("offset").n_chunks() == 1  # the first use of df does
    flat = whole.df.rechunk()
    mixed = pl.concat([flat.head(400), flat.slice(400)], rechunk=False).with_columns(
        flat.get_column("size")
    )
    assert mixed.get_column("offset").n_chunks() == 2
    assert mixed.get_column("size").n_chunks() == 1
    assert iotwin.characterize(iotwin.Trace(mixed, whole.meta)) == expected


@pytest.mark.parametrize(
    ("name", "stream_by", "batched"),
    [
        ("arc_P3.lis.zst", None, True),
        ("cloudPhysicsIO.vscsi", None, False),
        ("tencent_cbs_excerpt.csv.bz2", "volume", False),
    ],
)
def test_parquet_in_batches_counts_as_whole(
    traces: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    stream_by: str | None,
    batched: bool,
) -> None:
    """A canonical file whose metadata records its extent (ingest writes it) is counted a
    batch at a time, to the same figures as the trace loaded whole; one whose recorded extent
    is wrong, or whose footprint needs the ranges rather than the bitmaps (cloudPhysics: 0.4
    requests per bitmap word; Tencent: 2,038 volumes over 5 TB), is loaded whole instead."""
    from iotwin.characterize import _count_batches
    from iotwin.formats import ReadOptions
    from iotwin.trace import extent_of, read_meta, set_parquet_metadata

    monkeypatch.setattr(sys.modules["iotwin.characterize"], "BATCHED_MIN_ROWS", 1)
    ingested = tmp_path / "ingested.parquet"
    iotwin.ingest(traces / name, ingested, opts=ReadOptions(stream_by=stream_by))
    trace = iotwin.load_trace(ingested)
    assert read_meta(ingested, extent=True).extent == extent_of(trace.df)
    assert read_meta(ingested, extent=True).extent["rows"] == trace.df.height
    # many batches: row groups of 7,777 rows, the metadata kept
    path = tmp_path / "groups.parquet"
    trace.df.write_parquet(path, row_group_size=7_777, metadata=pl.read_parquet_metadata(ingested))
    expected = iotwin.characterize(trace, levels=2)
    streamed = _count_batches(path, None, 16, 1800.0, 65536)
    assert (streamed is not None) == batched
    assert iotwin.characterize(path, levels=2) == expected
    # an extent one byte wider than the rows: counted whole, the same figures
    wrong = dict(
        read_meta(path, extent=True).extent,
        max_end=read_meta(path, extent=True).extent["max_end"] + 1,
    )
    set_parquet_metadata(path, {"iotwin.extent": json.dumps(wrong)})
    assert _count_batches(path, None, 16, 1800.0, 65536) is None
    assert iotwin.characterize(path, levels=2) == expected


def test_written_traces_record_their_extent(traces: Path, tmp_path: Path) -> None:
    trace = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    path = tmp_path / "msr.parquet"
    iotwin.write_trace(trace, path)
    from iotwin.trace import read_meta

    df = trace.df
    end = (df["offset"] + df["size"].cast(pl.UInt64)).max()
    assert read_meta(path, extent=True).extent == {
        "rows": 1000,
        "first_ts": df["ts_ns"].min(),
        "last_ts": df["ts_ns"].max(),
        "max_stream": 0,
        "min_offset": df["offset"].min(),
        "max_end": end,
    }
