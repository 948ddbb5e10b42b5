"""Generic CSV with a column map (--opt): units, headers, separators and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.errors import IotwinError, SkippedRecordsWarning
from iotwin.formats import FORMATS, detect

NAMED = (
    "time,host,kind,lba,bytes,lat\n"
    "10.5,web,Read,8,4096,0.25\n"
    "10.75,db,Write,16,512,1.5\n"
    "11,web,R,0,8192,2\n"
)
NAMED_MAP = {
    "ts": "time",
    "ts_unit": "s",
    "offset": "lba",
    "offset_unit": "sectors",
    "size": "bytes",
    "op": "kind",
    "stream": "host",
    "latency": "lat",
    "latency_unit": "ms",
}


def load(src: Path, **extra: str) -> iotwin.Trace:
    return iotwin.load_trace(src, "csv", iotwin.ReadOptions(extra=extra))


def test_named_columns_units_and_text_streams(tmp_path: Path) -> None:
    src = tmp_path / "named.csv"
    src.write_text(NAMED)
    trace = load(src, **NAMED_MAP)
    assert trace.df.to_dicts() == [
        {"ts_ns": 0, "stream": 0, "op": 0, "offset": 4096, "size": 4096, "latency_ns": 250_000},
        {
            "ts_ns": 250_000_000,
            "stream": 1,
            "op": 1,
            "offset": 8192,
            "size": 512,
            "latency_ns": 1_500_000,
        },
        {
            "ts_ns": 500_000_000,
            "stream": 0,
            "op": 0,
            "offset": 0,
            "size": 8192,
            "latency_ns": 2_000_000,
        },
    ]
    assert trace.meta.streams == {0: "web", 1: "db"}


def test_indices_without_header_filetime_ticks(tmp_path: Path) -> None:
    # FILETIME ticks: in ns they overflow int64, so times count from the first record.
    src = tmp_path / "ticks.txt"
    src.write_text(
        "128166385295514663;0;8;2;1\n128166385295514878;1;0;1;3\n128166385295515175;1;3;16;1\n"
    )
    trace = load(
        src,
        ts="0",
        ts_unit="ticks100ns",
        op="1",
        read="0",
        write="1",
        offset="2",
        offset_unit="4096",
        size="3",
        size_unit="sectors",
        stream="4",
        sep=";",
    )
    assert trace.df.rows() == [
        (0, 1, 0, 32768, 1024),
        (21_500, 3, 1, 0, 512),
        (51_200, 1, 1, 12288, 8192),
    ]
    assert trace.meta.streams == {1: "device 1", 3: "device 3"}


def test_runs_of_blanks_and_fractional_microseconds(tmp_path: Path) -> None:
    src = tmp_path / "blanks.txt"
    src.write_text("  5.5  R 0 4096\n7.25\tW 8   512\n")
    trace = load(src, ts="0", ts_unit="us", op="1", offset="2", size="3", sep="space")
    assert trace.df.rows() == [(0, 0, 0, 0, 4096), (1750, 0, 1, 8, 512)]


def test_never_auto_detected(tmp_path: Path) -> None:
    src = tmp_path / "named.csv"
    src.write_text(NAMED)
    assert not FORMATS["csv"].sniff(NAMED.encode(), "named.csv")
    with pytest.raises(IotwinError, match="cannot tell the trace format"):
        detect(src)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ts": "time"}, "missing column mapping offset, size, op"),
        ({**NAMED_MAP, "op": "opcode"}, "op=opcode: no such column in the header"),
        ({**NAMED_MAP, "ts_unit": "days"}, "ts_unit=days: use one of s, ms, us, ns, ticks100ns"),
        ({**NAMED_MAP, "size_unit": "pages"}, "size_unit=pages: use one of bytes"),
        ({**NAMED_MAP, "colour": "red"}, "unknown option(s) colour"),
        ({**NAMED_MAP, "sep": ";;"}, "sep=';;': use one character"),
    ],
)
def test_bad_settings_are_clear(tmp_path: Path, extra: dict[str, str], message: str) -> None:
    src = tmp_path / "named.csv"
    src.write_text(NAMED)
    with pytest.raises(IotwinError) as err:
        load(src, **extra)
    assert message in str(err.value)


def test_bad_values_name_line_and_column(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(NAMED + "12,web,Trim,0,512,1\n12.5,db,W,-1,512,1\n13,db,W,0,512,1\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "csv", iotwin.ReadOptions(extra=NAMED_MAP))
    assert (err.value.location, err.value.field) == ("line 5", "kind")
    assert "'Trim'" in err.value.message
    assert list(tmp_path.iterdir()) == [src]
    opts = iotwin.ReadOptions(skip_bad=True, extra=NAMED_MAP)
    result = iotwin.ingest(src, tmp_path / "out.parquet", "csv", opts)
    assert (result.requests, result.skipped) == (4, 2)
    assert "line 6: field 'lba': cannot use '-1'" in result.skipped_examples[1]
    assert pl.read_parquet(tmp_path / "out.parquet")["ts_ns"].to_list() == [
        0,
        250_000_000,
        500_000_000,
        2_500_000_000,
    ]


def test_header_said_absent_makes_line_one_bad(tmp_path: Path) -> None:
    src = tmp_path / "named.csv"
    src.write_text(NAMED)
    with pytest.raises(iotwin.TraceFormatError) as err:
        load(src, ts="0", op="2", offset="3", size="4", header="no")
    assert (err.value.location, err.value.field) == ("line 1", "column 0")


def test_cli_opts(tmp_path: Path) -> None:
    src = tmp_path / "named.csv"
    src.write_text(NAMED)
    out = tmp_path / "named.parquet"
    cli = [sys.executable, "-m", "iotwin.cli", "ingest", str(src), "-o", str(out), "-f", "csv"]
    opts = [a for k, v in NAMED_MAP.items() for a in ("--opt", f"{k}={v}")]
    done = subprocess.run([*cli, *opts], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert pl.read_parquet(out)["offset"].to_list() == [4096, 8192, 0]
    failed = subprocess.run([*cli, "--opt", "ts=time"], capture_output=True, text=True, check=False)
    assert failed.returncode == 2
    assert "missing column mapping offset, size, op" in failed.stderr
    assert "Traceback" not in failed.stderr


def test_whatif_reads_with_the_same_reader_options(tmp_path: Path) -> None:
    """`iotwin sim` and the what-if commands take --opt, --stream-by and --skip-bad as fit does: a generic CSV
    can only be read with its column map."""
    from typer.testing import CliRunner

    from iotwin.cli import app
    from iotwin.model import ShortTraceWarning
    from iotwin.sim import simulate

    src = tmp_path / "named.csv"
    src.write_text(NAMED + "oops\n")
    opts = [a for k, v in NAMED_MAP.items() for a in ("--opt", f"{k}={v}")]
    sim = ["sim", str(src), "-f", "csv", "--json"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        done = CliRunner().invoke(app, [*sim, *opts, "--skip-bad"])
    assert done.exit_code == 0, done.output
    # simulating the original fits no model (3 requests would warn that the model is thin)
    assert not [w for w in seen if issubclass(w.category, ShortTraceWarning)]
    # the skipped record is counted and named, not dropped silently
    skipped = [str(w.message) for w in seen if issubclass(w.category, SkippedRecordsWarning)]
    assert skipped == [
        f"skipped 1 malformed record; the first: {src}: line 5: field 'host': missing"
    ]
    doc = json.loads(done.stdout)
    read = iotwin.ReadOptions(skip_bad=True, extra=NAMED_MAP)
    with pytest.warns(SkippedRecordsWarning, match="line 5"):
        expected = simulate(iotwin.load_trace(src, "csv", read), "hdd-7200")
    assert doc["requests"] == 3 and doc["of"] == "original"
    assert doc["mean_ms"] == pytest.approx(expected.mean_ms)
    # the command line prints these errors without a traceback (test_cli_opts)
    bad = CliRunner().invoke(app, [*sim, *opts])  # the malformed last line, not skipped
    assert isinstance(bad.exception, iotwin.TraceFormatError)
    assert bad.exception.location == "line 5"
    unmapped = CliRunner().invoke(app, [*sim, "--opt", "ts=time"])
    assert isinstance(unmapped.exception, IotwinError)
    assert "missing column mapping offset, size, op" in str(unmapped.exception)
