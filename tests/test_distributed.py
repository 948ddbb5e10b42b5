"""Partitioned datasets fitted in partitions, in-process and on a Dask LocalCluster (issue 7).

Real shared traces are split by stream and time; the model of the partitions, merged, must be
the model `iotwin fit` makes of the whole trace: the same JSON (bar the fit's own timing),
counts exact. Errors: an unreachable scheduler, a corrupt partition file, a broken manifest.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import iotwin
from iotwin.characterize import characterize
from iotwin.cli import app
from iotwin.dataset import MANIFEST, open_dataset
from iotwin.distributed import characterize_dataset, fit_dataset
from iotwin.errors import IotwinError
from iotwin.formats import ReadOptions
from iotwin.ingest import ingest_dataset
from iotwin.model import fit

ROOT = Path(__file__).resolve().parents[1]
PGBENCH = ROOT / "samples" / "pgbench.parquet"
runner = CliRunner()
NAMES = ["cloudPhysicsIO.vscsi", "tpcc_small.disksim", "pgbench", "tencent_cbs_excerpt.csv.bz2"]
REQUESTS = {
    "cloudPhysicsIO.vscsi": 113_872,
    "tpcc_small.disksim": 6_999,
    "pgbench": 37_083,
    "tencent_cbs_excerpt.csv.bz2": 50_000,
}


def _without_timing(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "fit"}


@pytest.fixture(scope="module")
def datasets(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """cloudPhysics (one stream) cut every 10 minutes of trace time through the CLI; TPC-C
    (16 devices) every 100 requests of a device; pgbench (file-level, 20 threads); Tencent
    (2,038 volumes, rows out of time order, a whole-second clock)."""
    root = tmp_path_factory.mktemp("datasets")
    cp = root / "cloudphysics.ds"
    result = runner.invoke(
        app,
        [
            "ingest", str(traces / "cloudPhysicsIO.vscsi"), "-o", str(cp),
            "--partition-by", "stream,time", "--partition-window", "10m",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1 streams in 13 partitions" in " ".join(result.output.split())
    tpcc = root / "tpcc.ds"
    opts = ReadOptions(stream_by="device")
    ingest_dataset(traces / "tpcc_small.disksim", tpcc, opts=opts, partition_rows=100)
    pg = root / "pgbench.ds"
    ingest_dataset(PGBENCH, pg, partition_rows=500)
    tencent = root / "tencent.ds"
    volumes = ReadOptions(stream_by="volume")
    ingest_dataset(traces / "tencent_cbs_excerpt.csv.bz2", tencent, opts=volumes)
    return {
        "cloudPhysicsIO.vscsi": cp,
        "tpcc_small.disksim": tpcc,
        "pgbench": pg,
        "tencent_cbs_excerpt.csv.bz2": tencent,
    }


def _source(name: str, traces: Path) -> iotwin.Trace:
    if name == "pgbench":
        return iotwin.load_trace(PGBENCH)
    stream_by = {"tpcc_small.disksim": "device", "tencent_cbs_excerpt.csv.bz2": "volume"}.get(name)
    return iotwin.load_trace(traces / name, opts=ReadOptions(stream_by=stream_by))


def test_dataset_layout_and_manifest(datasets: dict[str, Path]) -> None:
    ds = open_dataset(datasets["cloudPhysicsIO.vscsi"])
    assert ds.requests == 113_872
    assert [p.path for p in ds.partitions[:2]] == [
        "stream=0/part-000000.parquet",
        "stream=0/part-000001.parquet",
    ]
    assert sum(p.rows for p in ds.partitions) == 113_872
    # every partition stays within its 10-minute window of trace time
    window = 600 * 10**9
    assert all(p.first_ts // window == p.last_ts // window for p in ds.partitions)
    tpcc = open_dataset(datasets["tpcc_small.disksim"])
    assert len(tpcc.stream_lengths()) == 16
    assert sum(tpcc.stream_lengths().values()) == 6_999
    assert max(p.rows for p in tpcc.partitions) == 100


@pytest.mark.parametrize("name", NAMES)
def test_dataset_reassembles_the_trace(name: str, datasets: dict[str, Path], traces: Path) -> None:
    whole = _source(name, traces)
    back = iotwin.load_trace(datasets[name])
    assert back.df.equals(whole.df)
    assert back.meta == whole.meta


@pytest.mark.parametrize("reref", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_fit_in_partitions_is_the_whole_trace_fit(
    name: str, reref: bool, datasets: dict[str, Path], traces: Path
) -> None:
    # datasets measure re-use per stream (one task per stream): pgbench's one-file fit
    # measures it across streams unless told not to (docs/model.md)
    whole = fit(_source(name, traces), reref=reref, reuse_scope="stream").doc
    parts = fit_dataset(datasets[name], reref=reref).doc
    assert _without_timing(parts) == _without_timing(whole)
    assert parts["requests"] == REQUESTS[name]
    assert sum(s["requests"] for s in parts["streams"]) == REQUESTS[name]
    if name == "tencent_cbs_excerpt.csv.bz2":
        assert parts["source"]["clock_ns"] == 10**9  # whole seconds, learnt while splitting


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of two worker processes, one thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.mark.parametrize("name", ["cloudPhysicsIO.vscsi", "tpcc_small.disksim", "pgbench"])
def test_fit_on_a_local_cluster_is_the_in_process_fit(
    name: str, datasets: dict[str, Path], client
) -> None:
    seen: list[int] = []
    on_cluster = fit_dataset(datasets[name], client=client, progress=seen.append).doc
    in_process = fit_dataset(datasets[name]).doc
    assert json.dumps(_without_timing(on_cluster)) == json.dumps(_without_timing(in_process))
    assert sum(seen) == in_process["requests"]  # progress saw every task, once


def test_fit_cli_on_local_cluster(datasets: dict[str, Path], traces: Path, tmp_path: Path) -> None:
    ds = datasets["tpcc_small.disksim"]
    out = tmp_path / "cluster.json"
    result = runner.invoke(app, ["fit", str(ds), "-o", str(out), "--cluster", "local:2"])
    assert result.exit_code == 0, result.output
    assert "6,999 requests" in result.output
    whole = tmp_path / "whole.json"
    result = runner.invoke(
        app,
        ["fit", str(traces / "tpcc_small.disksim"), "--stream-by", "device", "-o", str(whole)],
    )
    assert result.exit_code == 0, result.output
    assert _without_timing(json.loads(out.read_text())) == _without_timing(
        json.loads(whole.read_text())
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_named(datasets: dict[str, Path], tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    result = runner.invoke(
        app,
        [
            "fit", str(datasets["tpcc_small.disksim"]), "-o", str(tmp_path / "m.json"),
            "--cluster", address, "--cluster-timeout", "1",
        ],
    )  # fmt: skip
    assert result.exit_code != 0
    assert isinstance(result.exception, IotwinError)
    assert f"cannot reach the Dask scheduler at {address} within 1 s" in str(result.exception)
    assert not (tmp_path / "m.json").exists()


@pytest.fixture
def corrupt(datasets: dict[str, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the TPC-C dataset whose stream 3's second partition is garbage."""
    ds = tmp_path / "corrupt.ds"
    shutil.copytree(datasets["tpcc_small.disksim"], ds)
    bad = ds / "stream=3" / "part-000001.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 100)
    return ds, bad


def test_corrupt_partition_is_named_in_process(corrupt: tuple[Path, Path]) -> None:
    ds, bad = corrupt
    with pytest.raises(IotwinError, match="cannot read the partition") as err:
        fit_dataset(ds)
    assert str(bad) in str(err.value)


def test_corrupt_partition_is_named_on_the_cluster(corrupt: tuple[Path, Path], client) -> None:
    ds, bad = corrupt
    with pytest.raises(IotwinError, match="cannot read the partition") as err:
        fit_dataset(ds, client=client, retries=1)
    assert str(bad.resolve()) in str(err.value)


def test_partition_of_another_stream_is_refused(datasets: dict[str, Path], tmp_path: Path) -> None:
    ds = tmp_path / "swapped.ds"
    shutil.copytree(datasets["tpcc_small.disksim"], ds)
    shutil.copy(ds / "stream=1" / "part-000000.parquet", ds / "stream=0" / "part-000000.parquet")
    with pytest.raises(IotwinError, match=r"row 0: field 'stream': 1 in the partition of stream 0"):
        fit_dataset(ds, reref=False)


def test_broken_manifest_is_named(datasets: dict[str, Path], tmp_path: Path) -> None:
    ds = tmp_path / "broken.ds"
    shutil.copytree(datasets["tpcc_small.disksim"], ds)
    doc = json.loads((ds / MANIFEST).read_text())
    del doc["requests"]
    (ds / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(IotwinError, match=r"_iotwin.json: field 'requests' is missing"):
        open_dataset(ds)
    doc = json.loads((datasets["tpcc_small.disksim"] / MANIFEST).read_text())
    doc["ties"]["other"]["same"] = doc["ties"]["other"]["pairs"] + 1
    (ds / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(IotwinError, match=r"_iotwin.json: malformed field: ties: expected"):
        open_dataset(ds)
    (ds / MANIFEST).write_text("{")
    with pytest.raises(IotwinError, match=r"_iotwin.json: line 1: not valid JSON"):
        open_dataset(ds)


def test_partition_options_are_checked(traces: Path, tmp_path: Path) -> None:
    src = str(traces / "msr_hm0_excerpt.csv")
    out = str(tmp_path / "x.ds")
    for extra, message in [
        (["--partition-window", "10m"], "need --partition-by"),
        (["--partition-by", "time"], "expected 'stream' or 'stream,time'"),
        (
            ["--partition-by", "stream", "--partition-window", "1h"],
            "needs --partition-by stream,time",
        ),
        (["--partition-by", "stream", "--partition-rows", "0"], "--partition-rows must be >= 1"),
    ]:
        result = runner.invoke(app, ["ingest", src, "-o", out, *extra])
        assert result.exit_code != 0
        assert message in str(result.exception), extra
    assert not Path(out).exists()


def test_cluster_needs_a_dataset(traces: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "fit", str(traces / "msr_hm0_excerpt.csv"), "-o", str(tmp_path / "m.json"),
            "--cluster", "local:1",
        ],
    )  # fmt: skip
    assert "--cluster fits a partitioned dataset" in str(result.exception)


# -- characterize ----------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [1, 3])
@pytest.mark.parametrize("name", NAMES)
def test_characterize_in_partitions_is_the_whole_trace(
    name: str, levels: int, datasets: dict[str, Path], traces: Path
) -> None:
    whole = characterize(_source(name, traces), levels=levels, window_s=600)
    parts = characterize_dataset(datasets[name], levels=levels, window_s=600)
    assert json.dumps(parts) == json.dumps(whole)
    # counts exact, and the figures that need the whole trace's order and block union
    assert parts["requests"] == REQUESTS[name]
    if name == "tpcc_small.disksim":
        # 16 devices: interference is a property of the whole trace's interleaving
        assert parts["stream_count"] == 16
        assert parts["interference_frequency"] > 0


def test_characterize_on_a_local_cluster_is_the_in_process_one(
    datasets: dict[str, Path], client
) -> None:
    for name in ["cloudPhysicsIO.vscsi", "tpcc_small.disksim", "pgbench"]:
        ds = datasets[name]
        on_cluster = characterize_dataset(ds, levels=2, client=client)
        assert json.dumps(on_cluster) == json.dumps(characterize_dataset(ds, levels=2))


def test_characterize_cli_on_local_cluster(datasets: dict[str, Path], traces: Path) -> None:
    ds = datasets["tpcc_small.disksim"]
    result = runner.invoke(app, ["characterize", str(ds), "--json", "--cluster", "local:2"])
    assert result.exit_code == 0, result.output
    on_cluster = json.loads(result.output)
    result = runner.invoke(
        app, ["characterize", str(traces / "tpcc_small.disksim"), "--stream-by", "device", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert on_cluster == json.loads(result.output)
    assert on_cluster["requests"] == 6_999
    result = runner.invoke(app, ["characterize", str(ds)])  # tables, in-process
    assert result.exit_code == 0, result.output
    assert "6,999" in result.output


def test_characterize_corrupt_partition_is_named(corrupt: tuple[Path, Path], client) -> None:
    ds, bad = corrupt
    with pytest.raises(IotwinError, match="cannot read the partition") as err:
        characterize_dataset(ds, client=client, retries=0)
    assert str(bad.resolve()) in str(err.value)


def test_types_fit_a_dataset_loaded_whole(
    datasets: dict[str, Path], traces: Path, tmp_path: Path
) -> None:
    """--types needs every stream's characterization first: the dataset is loaded whole."""
    out = tmp_path / "types.json"
    result = runner.invoke(
        app, ["fit", str(datasets["tpcc_small.disksim"]), "-o", str(out), "--types"]
    )
    assert result.exit_code == 0, result.output
    whole = fit(_source("tpcc_small.disksim", traces), types=True).doc
    assert _without_timing(json.loads(out.read_text())) == _without_timing(whole)


def test_show_describes_a_dataset(datasets: dict[str, Path]) -> None:
    result = runner.invoke(app, ["show", str(datasets["tpcc_small.disksim"]), "--top", "3"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "6,999 requests, 16 streams, 77 partitions" in text
    assert "Largest streams (top 3)" in text


def test_empty_trace_makes_an_empty_dataset(tmp_path: Path) -> None:
    import polars as pl

    from iotwin.formats.base import CANONICAL_SCHEMA
    from iotwin.trace import Trace, TraceMeta, write_trace

    empty = Trace(pl.DataFrame(schema=CANONICAL_SCHEMA), TraceMeta(source="none", format="msr"))
    write_trace(empty, tmp_path / "empty.parquet")
    result = ingest_dataset(tmp_path / "empty.parquet", tmp_path / "empty.ds")
    assert (result.requests, result.info["partitions"]) == (0, 0)
    back = iotwin.load_trace(tmp_path / "empty.ds")
    assert back.df.schema == pl.Schema(CANONICAL_SCHEMA)
    with pytest.raises(IotwinError, match="cannot fit a model to an empty trace"):
        fit_dataset(tmp_path / "empty.ds")
    assert characterize_dataset(tmp_path / "empty.ds")["requests"] == 0
