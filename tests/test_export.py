"""Exporters: fio job files (parsed by fio and run for real), DiskSpd XML checked against
the element structure of DiskSpd's diskspd.xsd, Vdbench parameter files field by field."""

from __future__ import annotations

import configparser
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

import iotwin
from iotwin.cli import app
from iotwin.exporters import EXPORTERS, ExportOptions, exporter
from iotwin.model import Model, fit

ROOT = Path(__file__).resolve().parents[1]
CLOUD = "cloudPhysicsIO.vscsi"
CLOUD_READ_FRACTION = 46_974 / 113_872  # shared/traces/README.md: 0.41252
FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed")

TRACES = {
    "cloud": (CLOUD, None),
    "msr": ("msr_hm0_excerpt.csv", None),
    "tencent": ("tencent_cbs_excerpt.csv.bz2", "volume"),
    "tpcc": ("tpcc_small.disksim", "device"),
    "arc": ("arc_P3.lis.zst", None),
}


@pytest.fixture(scope="module")
def models(traces: Path) -> dict[str, Model]:
    out = {}
    for key, (name, stream_by) in TRACES.items():
        t = iotwin.load_trace(traces / name, opts=iotwin.ReadOptions(stream_by=stream_by))
        out[key] = fit(t, levels=2)
    out["pgbench"] = fit(iotwin.load_trace(ROOT / "samples" / "pgbench.parquet"), levels=4)
    return out


def fio_sections(path: Path) -> dict[str, dict[str, str]]:
    cp = configparser.ConfigParser(comment_prefixes=(";", "#"), interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(path)
    return {s: dict(cp[s]) for s in cp.sections()}


def split_mean(spec: str) -> float:
    pairs = [p.split("/") for p in spec.split(":")]
    assert sum(int(p) for _, p in pairs) == 100
    return sum(int(s) * int(p) for s, p in pairs) / 100


def job_iops(job: dict[str, str]) -> float:
    mean = split_mean(job["bssplit"]) if "bssplit" in job else int(job["bs"])
    return int(job["rate"]) / mean


# -- fio -----------------------------------------------------------------------------------


@needs_fio
@pytest.mark.parametrize("key", ["cloud", "msr", "tencent", "tpcc", "arc", "pgbench"])
def test_fio_parses_every_exported_job(models: dict, key: str, tmp_path: Path) -> None:
    job = tmp_path / "job.fio"
    opts = ExportOptions(directory=str(tmp_path / "data"), size=64 << 20, runtime_s=5)
    exporter("fio").write(models[key], job, opts)
    res = subprocess.run([FIO, "--parse-only", str(job)], capture_output=True, text=True)
    assert res.returncode == 0 and "dropped" not in res.stderr, res.stderr
    sections = fio_sections(job)
    jobs = {k: v for k, v in sections.items() if k != "global"}
    assert sections["global"]["time_based"] == "1" and sections["global"]["runtime"] == "5"
    assert 1 <= len(jobs) <= 2 * 64
    text = job.read_text()
    assert "fio-iolog" in text and "cannot express" in text
    for name, j in jobs.items():
        assert j["rw"] in ("read", "write", "randread", "randwrite"), name
        assert name.endswith("-read") == ("read" in j["rw"])
        if "random_distribution" in j:
            zones = [
                z.split("/") for z in j["random_distribution"].removeprefix("zoned:").split(":")
            ]
            assert sum(int(a) for a, _ in zones) == 100
            assert sum(float(s) for _, s in zones) == pytest.approx(100, abs=1e-6)
        if key == "arc":
            assert "rate" not in j  # untimed: nothing to pace by


def test_fio_job_carries_the_models_rates_and_mix(models: dict, tmp_path: Path) -> None:
    job = tmp_path / "cloud.fio"
    exporter("fio").write(models["cloud"], job, ExportOptions(size=64 << 20))
    jobs = {k: v for k, v in fio_sections(job).items() if k != "global"}
    assert sorted(jobs) == ["u0-read", "u0-write"]  # one stream: a read and a write job
    doc = models["cloud"].doc
    model_iops = doc["requests"] / (doc["span_ns"] / 1e9)
    iops = {k: job_iops(j) for k, j in jobs.items()}
    assert sum(iops.values()) == pytest.approx(model_iops, rel=0.001)
    assert iops["u0-read"] / sum(iops.values()) == pytest.approx(CLOUD_READ_FRACTION, abs=0.001)
    assert jobs["u0-read"]["filesize"] == str(64 << 20)
    assert (
        jobs["u0-read"]["rw"] == "randread"
        and 80 <= int(jobs["u0-read"]["percentage_random"]) < 100
    )
    assert fio_sections(job)["global"]["direct"] == "1"  # block-level: direct by default


@needs_fio
def test_real_fio_run_matches_the_models_read_fraction_and_iops(
    models: dict, tmp_path: Path
) -> None:
    """4 s of fio at 50x the model's rate (about 3,000 requests), buffered, on a 64 MiB file."""
    intensity = 50.0
    job = tmp_path / "cloud.fio"
    opts = ExportOptions(
        directory=str(tmp_path), size=64 << 20, runtime_s=4, direct=False, intensity=intensity
    )
    exporter("fio").write(models["cloud"], job, opts)
    res = subprocess.run(
        [FIO, "--output-format=json", str(job)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout[res.stdout.index("{") :])
    reads = sum(j["read"]["total_ios"] for j in out["jobs"])
    writes = sum(j["write"]["total_ios"] for j in out["jobs"])
    seconds = max(j["job_runtime"] for j in out["jobs"]) / 1000
    doc = models["cloud"].doc
    model_iops = doc["requests"] / (doc["span_ns"] / 1e9) * intensity
    assert abs(reads / (reads + writes) - CLOUD_READ_FRACTION) <= 0.02
    assert (reads + writes) / seconds == pytest.approx(model_iops, rel=0.10)


def test_file_level_model_gets_a_read_and_write_job_per_file(models: dict, tmp_path: Path) -> None:
    job = tmp_path / "pg.fio"
    exporter("fio").write(models["pgbench"], job, ExportOptions(directory="/srv/replica"))
    sections = fio_sections(job)
    assert sections["global"]["direct"] == "0"  # the application's buffered I/O
    jobs = [v for k, v in sections.items() if k != "global"]
    files = {j["filename"] for j in jobs}
    assert all(f.startswith("/srv/replica/") for f in files)
    wal = [j for j in jobs if re.search(r"pg_wal/[0-9A-F]{24}$", j["filename"])]
    assert wal and all(j["rw"].endswith("write") or j["rw"].endswith("read") for j in wal)
    assert any("fsync" in j for j in wal)  # the WAL is flushed
    per_file = {}
    for j in jobs:
        per_file.setdefault(j["filename"], []).append(j["rw"])
    assert all(len(v) <= 2 for v in per_file.values())


# -- DiskSpd -------------------------------------------------------------------------------

# The element structure of microsoft/diskspd XmlProfileParser/diskspd.xsd: the children each
# element may have (xs:all: each at most once) and the simple type of every leaf.
UINT, ULONG, BOOL, STR = "unsignedInt", "unsignedLong", "boolean", "string"
PROFILE = {"TimeSpans": None, "Verbose": BOOL, "Progress": UINT, "ResultFormat": ("text", "xml"),
           "ETW": None, "PrecreateFiles": None}  # fmt: skip
TIMESPAN = {"Targets": None, "Duration": UINT, "Warmup": UINT, "Cooldown": UINT,
            "RandSeed": UINT, "RandomWriteData": BOOL, "ThreadCount": UINT,
            "RequestCount": UINT, "GroupAffinity": BOOL, "Affinity": None,
            "DisableAffinity": BOOL, "CompletionRoutines": BOOL, "MeasureLatency": BOOL,
            "CalculateIopsStdDev": BOOL, "IoBucketDuration": UINT}  # fmt: skip
TARGET = {"Path": STR, "BlockSize": UINT, "StrideSize": ULONG, "InterlockedSequential": BOOL,
          "BaseFileOffset": ULONG, "SequentialScan": BOOL, "RandomAccess": BOOL,
          "TemporaryFile": BOOL, "UseLargePages": BOOL, "RequestCount": UINT, "Random": ULONG,
          "DisableAllCache": BOOL, "DisableLocalCache": BOOL, "DisableOSCache": BOOL,
          "WriteThrough": BOOL, "MemoryMappedIo": BOOL, "FlushType": None,
          "WriteBufferContent": None, "BurstSize": UINT, "ThinkTime": UINT, "Throughput": UINT,
          "ThreadsPerFile": UINT, "FileSize": ULONG, "MaxFileSize": ULONG, "WriteRatio": UINT,
          "ParallelAsyncIO": BOOL, "ThreadStride": ULONG, "IOPriority": UINT, "Weight": UINT,
          "ThreadTargets": None}  # fmt: skip


def check_simple(e: ET.Element, kind: object) -> None:
    text = (e.text or "").strip()
    if kind == UINT:
        assert text.isdigit() and int(text) < 2**32, (e.tag, text)
    elif kind == ULONG:
        assert text.isdigit() and int(text) < 2**64, (e.tag, text)
    elif kind == BOOL:
        assert text in ("true", "false", "1", "0"), (e.tag, text)
    elif isinstance(kind, tuple):
        assert text in kind, (e.tag, text)


def check_all(e: ET.Element, allowed: dict, required: set[str]) -> None:
    tags = [c.tag for c in e if isinstance(c.tag, str)]
    assert len(tags) == len(set(tags)), f"{e.tag}: repeated child in an xs:all"
    assert set(tags) <= set(allowed), set(tags) - set(allowed)
    assert required <= set(tags)
    for c in e:
        if isinstance(c.tag, str) and allowed[c.tag] is not None:
            check_simple(c, allowed[c.tag])


def validate_diskspd(root: ET.Element) -> list[ET.Element]:
    assert root.tag == "Profile"
    check_all(root, PROFILE, {"TimeSpans"})
    spans = root.find("TimeSpans")
    assert spans is not None and [c.tag for c in spans if isinstance(c.tag, str)] == ["TimeSpan"]
    span = spans.find("TimeSpan")
    check_all(span, TIMESPAN, {"Targets"})
    targets = span.find("Targets")
    children = [c for c in targets if isinstance(c.tag, str)]
    assert children and all(c.tag == "Target" for c in children)
    for t in children:
        check_all(t, TARGET, {"Path"})
    return children


@pytest.mark.parametrize("key", ["cloud", "tpcc", "arc", "pgbench"])
def test_diskspd_profile_follows_the_xsd_structure(models: dict, key: str, tmp_path: Path) -> None:
    out = tmp_path / "p.xml"
    exporter("diskspd").write(models[key], out, ExportOptions(directory=r"D:\iotwin", size=1 << 30))
    targets = validate_diskspd(ET.parse(out).getroot())
    for t in targets:
        assert t.findtext("Path").startswith("D:\\iotwin\\")
        assert (t.find("Random") is None) != (t.find("StrideSize") is None)
        assert t.findtext("WriteRatio") in ("0", "100")
    timed = key != "arc"
    assert all((t.find("Throughput") is not None) == timed for t in targets)
    assert all((t.find("Weight") is not None) != timed for t in targets)


def test_diskspd_throttles_carry_the_models_rate_and_mix(models: dict, tmp_path: Path) -> None:
    """At 100x the rate, whole bytes per millisecond lose little: the throttles add up to the
    model's IOPS and read fraction."""
    out = tmp_path / "p.xml"
    exporter("diskspd").write(models["cloud"], out, ExportOptions(intensity=100, size=1 << 30))
    targets = validate_diskspd(ET.parse(out).getroot())
    iops = [int(t.findtext("Throughput")) * 1000 / int(t.findtext("BlockSize")) for t in targets]
    reads = sum(i for i, t in zip(iops, targets, strict=True) if t.findtext("WriteRatio") == "0")
    doc = models["cloud"].doc
    assert sum(iops) == pytest.approx(doc["requests"] / (doc["span_ns"] / 1e9) * 100, rel=0.02)
    assert reads / sum(iops) == pytest.approx(CLOUD_READ_FRACTION, abs=0.01)
    assert all(t.findtext("DisableOSCache") == "true" for t in targets)


# -- Vdbench -------------------------------------------------------------------------------


def parse_vdbench(text: str) -> list[tuple[str, dict[str, str]]]:
    """Each definition line as (kind, {key: value}); values keep their parentheses."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("*"):
            continue
        fields = re.findall(r"([a-z]+)=(\([^)]*\)|[^,]+)", line)
        assert ",".join(f"{k}={v}" for k, v in fields) == line, line
        out.append((fields[0][0], dict(fields)))
    return out


@pytest.mark.parametrize("key", ["cloud", "tencent", "arc", "pgbench"])
def test_vdbench_parameter_file_field_by_field(models: dict, key: str, tmp_path: Path) -> None:
    out = tmp_path / "parm"
    exporter("vdbench").write(models[key], out, ExportOptions(directory="/data", runtime_s=30))
    defs = parse_vdbench(out.read_text())
    kinds = [k for k, _ in defs]
    assert kinds == sorted(kinds, key=["sd", "wd", "rd"].index)  # sd, then wd, then rd
    sds = {d["sd"]: d for k, d in defs if k == "sd"}
    wds = [d for k, d in defs if k == "wd"]
    (rd,) = [d for k, d in defs if k == "rd"]
    for sd in sds.values():
        assert sd["lun"].startswith("/data/") and int(sd["size"]) > 0
    skews = []
    for wd in wds:
        assert wd["sd"] in sds
        assert wd["rdpct"] in ("0", "100") and 0 <= int(wd["seekpct"]) <= 100
        x = wd["xfersize"]
        if x.startswith("("):
            v = [int(n) for n in x.strip("()").split(",")]
            assert sum(v[1::2]) == 100 and all(s > 0 for s in v[::2])
        else:
            assert int(x) > 0
        skews.append(float(wd["skew"]))
        if "range" in wd:
            lo, hi = (float(n) for n in wd["range"].strip("()").split(","))
            assert 0 <= lo < hi <= 100
    assert sum(skews) == pytest.approx(100, abs=1e-9)
    assert rd["wd"] == "wd*" and rd["elapsed"] == "30" and rd["distribution"] == "exponential"
    doc = models[key].doc
    if key == "arc":
        assert rd["iorate"] == "max"
    else:
        assert float(rd["iorate"]) == pytest.approx(
            doc["requests"] / (doc["span_ns"] / 1e9), rel=1e-3
        )
    if key == "cloud":
        reads = sum(float(w["skew"]) for w in wds if w["rdpct"] == "100")
        assert reads / 100 == pytest.approx(CLOUD_READ_FRACTION, abs=0.001)


# -- CLI -----------------------------------------------------------------------------------


def test_cli_lists_and_writes_every_exporter(models: dict, tmp_path: Path) -> None:
    model = tmp_path / "m.json"
    models["msr"].save(model)
    runner = CliRunner()
    for args in (["export", "--list"], ["export", "list"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        assert all(name in res.output for name in EXPORTERS)
    for name in ("fio", "diskspd", "vdbench"):
        out = tmp_path / f"out{EXPORTERS[name].suffix}"
        res = runner.invoke(
            app, ["export", name, str(model), "-o", str(out), "--runtime", "2m", "--dir", "/x"]
        )
        assert res.exit_code == 0, res.output
        assert out.exists() and "wrote" in res.output
    assert "runtime=120" in (tmp_path / "out.fio").read_text()
    res = runner.invoke(app, ["export", "fio", str(tmp_path / "nope.json"), "-o", "x.fio"])
    assert res.exit_code != 0 and not (tmp_path / "x.fio").exists()


def test_same_seed_same_job_file(models: dict, tmp_path: Path) -> None:
    a, b = tmp_path / "a.fio", tmp_path / "b.fio"
    for p in (a, b):
        exporter("fio").write(models["tpcc"], p, ExportOptions(seed=3))
    assert a.read_bytes() == b.read_bytes()


@needs_fio
def test_file_level_job_runs_in_fio_after_its_mkdir_line(models: dict, tmp_path: Path) -> None:
    job = tmp_path / "pg.fio"
    opts = ExportOptions(directory=str(tmp_path / "replica"), runtime_s=1, max_jobs=8)
    exporter("fio").write(models["pgbench"], job, opts)
    mkdir = next(line for line in job.read_text().splitlines() if "mkdir -p" in line)
    for d in mkdir.split("mkdir -p ", 1)[1].split():
        Path(d).mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        [FIO, "--output-format=json", str(job)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout[res.stdout.index("{") :])
    assert len(out["jobs"]) == len(fio_sections(job)) - 1
    assert sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in out["jobs"]) > 0


def test_large_models_are_measured_on_a_sample(
    models: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_SYNTH requests the features come from a sample; rates are scaled back."""
    from iotwin.exporters import features

    monkeypatch.setattr(features, "MAX_SYNTH", 20_000)
    job = tmp_path / "cloud.fio"
    exporter("fio").write(models["cloud"], job, ExportOptions(size=64 << 20))
    jobs = {k: v for k, v in fio_sections(job).items() if k != "global"}
    iops = {k: job_iops(j) for k, j in jobs.items()}
    doc = models["cloud"].doc
    assert sum(iops.values()) == pytest.approx(doc["requests"] / (doc["span_ns"] / 1e9), rel=0.01)
    # a sample of a sixth of the model, every fluctuation window shortened alike: the mix
    # is the whole run's (0.41255 against 0.41252). A prefix of the run held the first
    # windows' mix, 0.353: cloudPhysics reads almost only in two of its windows
    assert iops["u0-read"] / sum(iops.values()) == pytest.approx(CLOUD_READ_FRACTION, abs=0.002)
    assert "113,872 requests" in job.read_text()
