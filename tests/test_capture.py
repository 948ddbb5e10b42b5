"""`iotwin capture`: real applications (SQLite, PostgreSQL with pgbench) run under strace."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.workloads import pgbench
from iotwin.workloads.pgbench import postgres_bindir

SQLITE_SCRIPT = """\
import sqlite3, sys
db = sys.argv[1]
con = sqlite3.connect(db)
con.execute("PRAGMA page_size = 4096")
con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
for batch in range(4):
    with con:  # one transaction per batch: journal writes and fsyncs each time
        con.executemany("INSERT INTO t (v) VALUES (?)", [("x" * 100,)] * 500)
con.close()
con = sqlite3.connect(db)  # a fresh connection reads the pages back from the file
assert con.execute("SELECT count(*), sum(length(v)) FROM t").fetchone() == (2000, 200000)
con.close()
"""
PAGE = 4096


def files_by_path(trace: iotwin.Trace) -> dict[str, dict]:
    return {f["path"]: f for f in trace.meta.files}


def ops_on(trace: iotwin.Trace, file_id: int) -> pl.DataFrame:
    return trace.df.filter(pl.col("file") == file_id)


@pytest.mark.slow
def test_capture_sqlite(tmp_path: Path) -> None:
    script = tmp_path / "load.py"
    script.write_text(SQLITE_SCRIPT)
    db = tmp_path / "app.db"
    out = tmp_path / "sqlite.parquet"
    result = iotwin.capture([sys.executable, str(script), str(db)], out)
    assert result.exit_status == 0 and not result.interrupted
    assert result.threads >= 1 and result.processes >= 1
    trace = iotwin.load_trace(out)
    assert trace.meta.format == "strace" and trace.meta.source.startswith("capture: ")
    assert result.requests == len(trace) and result.files == len(trace.meta.files)
    files = files_by_path(trace)
    db_file = files[str(db)]
    assert db_file["size"] == db.stat().st_size == PAGE * (db.stat().st_size // PAGE)
    assert db_file["extents"] is not None and sum(e[2] for e in db_file["extents"]) >= PAGE
    journal = files[str(db) + "-journal"]
    assert journal["size"] is None  # the rollback journal is deleted after each commit
    on_db, on_journal = ops_on(trace, db_file["id"]), ops_on(trace, journal["id"])
    writes = on_db.filter(pl.col("op") == 1)
    assert writes.height >= 8  # the pages of 2000 rows of 100 bytes, rewritten per commit
    assert (writes["offset"] % PAGE == 0).all() and (writes["size"] == PAGE).all()
    page_reads = on_db.filter((pl.col("op") == 0) & (pl.col("size") == PAGE))
    assert page_reads.height >= writes["offset"].n_unique() - 1
    assert (page_reads["offset"] % PAGE == 0).all()
    assert on_db.filter(pl.col("op") == 2).height >= 4  # a sync per transaction
    assert on_journal.filter(pl.col("op") == 1).height >= 4
    assert on_journal.filter(pl.col("op") == 2).height >= 4
    assert list(tmp_path.iterdir()) != [] and not list(tmp_path.glob(".sqlite.parquet.*"))


def test_command_status_is_reported_and_trace_written(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    out = tmp_path / "t.parquet"
    cmd = ["sh", "-c", f"printf 'hello' > {target}; exit 3"]
    run = subprocess.run(
        [sys.executable, "-m", "iotwin.cli", "capture", "-o", str(out), "--", *cmd],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 3, run.stderr
    assert "exit status 3" in run.stderr
    trace = iotwin.load_trace(out)
    written = trace.df.filter(pl.col("file") == files_by_path(trace)[str(target)]["id"])
    assert written.select("op", "offset", "size").rows() == [(1, 0, 5)]
    assert files_by_path(trace)[str(target)]["size"] == 5


def test_missing_strace_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no strace on this PATH
    with pytest.raises(iotwin.IotwinError, match="capture needs strace"):
        iotwin.capture(["true"], tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()


def test_keep_strace_and_missing_command(tmp_path: Path) -> None:
    log = tmp_path / "kept.strace"
    result = iotwin.capture(["cat", "/etc/hostname"], tmp_path / "t.parquet", keep_strace=log)
    assert result.strace_log == log and "/etc/hostname" in log.read_text()
    with pytest.raises(iotwin.IotwinError, match="no-such-command: command not found"):
        iotwin.capture(["no-such-command"], tmp_path / "u.parquet")
    with pytest.raises(iotwin.IotwinError, match="'volume' is not one of thread, process, file"):
        iotwin.capture(["true"], tmp_path / "v.parquet", stream_by="volume")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.strace", "t.parquet"]


# --- PostgreSQL -----------------------------------------------------------------------------

WAL_SEGMENT = 16 << 20
BLOCK = 8192


@pytest.mark.slow
def test_capture_postgres_pgbench(tmp_path: Path) -> None:
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL binaries are not installed (/usr/lib/postgresql/*/bin)")
    out = tmp_path / "pg.parquet"
    with pgbench.cluster() as c, pgbench.on_path(c.env):
        result = iotwin.capture(c.command(clients=2, seconds=5), out, stream_by="process")
        assert result.exit_status == 0, c.log()
        trace = iotwin.load_trace(out)
        files = trace.meta.files
        wal = [f for f in files if re.fullmatch(r".*/pg_wal/[0-9A-F]{24}", f["path"])]
        relations = [f for f in files if "/base/" in f["path"] and Path(f["path"]).name.isdigit()]
        assert wal and relations
        # Segments still there after the run are 16 MiB; recycled ones were renamed away.
        assert {f["size"] for f in wal} == {WAL_SEGMENT, None}
        assert all(f["extents"] for f in wal if f["size"]) and all(
            sum(e[2] for e in f["extents"]) == WAL_SEGMENT for f in wal if f["size"]
        )
        # The server is stopped: each file's recorded size is its size now (None: dropped).
        for f in wal + relations:
            path = Path(f["path"])
            assert f["size"] == (path.stat().st_size if path.exists() else None), f
        assert sum(f["size"] is not None and f["size"] % BLOCK == 0 for f in relations) >= 10
        df = trace.df
        on_wal = df.filter(pl.col("file").is_in([f["id"] for f in wal]))
        on_rel = df.filter(pl.col("file").is_in([f["id"] for f in relations]))
        assert on_wal.filter(pl.col("op") == 1).height > 100  # commits write WAL
        assert on_wal.filter(pl.col("op") == 2).height > 100  # ... and flush it
        rel_writes = on_rel.filter(pl.col("op") == 1)
        assert on_rel.filter(pl.col("op") == 0).height > 0 and rel_writes.height > 0
        assert (rel_writes["offset"] % BLOCK == 0).all() and (rel_writes["size"] % BLOCK == 0).all()
        assert df.filter(pl.col("op") == 2).height > on_wal.filter(pl.col("op") == 2).height
        # postmaster, checkpointer, background writer, WAL writer, backends, pgbench, ...
        assert result.processes >= 5 and result.threads >= result.processes
        assert len(trace.meta.streams) == result.streams >= 5
        assert all(name.startswith("pid ") for name in trace.meta.streams.values())
