"""bench/engine: the I/O engine side by side with fio 3.33, in one run, on the same file.

(a) timing: one schedule of 4 KiB random reads at a fixed rate (10k, 50k, 100k requests/s,
    3 s each) run by `iotwin run` and, exported with `iotwin export fio-iolog`, replayed by
    fio (--read_iolog, io_uring, iodepth 64, --replay_redirect) on a page-cached file in
    /dev/shm. Achieved rate vs target: iotwin's from its recorded issue times, fio's from its
    JSON (completed ios / job runtime). Goals: iotwin within 0.5% of the target rate and
    p99 lateness <= 50 us at 50k/s; a smaller rate error than fio at every rate.
(b) capacity: closed loop, 4 KiB random reads, io_uring, iodepth 32, one worker, buffered
    (/dev/shm) and O_DIRECT (a regular file): IOPS and CPU time per request (getrusage of
    the child, net of a start-up run of the same command). Goal: >= 1.0x fio's IOPS.
Each measurement is a fresh process. Usage: python bench/engine/run.py [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import BENCH, paired_ratios, write_section

from iotwin import engine as eng
from iotwin.model import Model, fit
from iotwin.trace import Trace, TraceMeta, read_parquet_trace

FIO = "/usr/bin/fio"
IOTWIN = str(Path(sys.executable).parent / "iotwin")
SIZE = 1 << 30
BASE_RATE = 10_000.0
RATES = (10_000, 50_000, 100_000)
SECONDS = 3
CAPACITY_SECONDS = 5


def fixed_rate_model(rate: float, n: int = 20_000, reref: bool = True) -> Model:
    """Reads of 4 KiB, uniformly random over SIZE, exactly `rate` per second (as
    tests/test_engine.py builds its fixed-rate model)."""
    rng = np.random.default_rng(1)
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(n, dtype=np.int64) * round(1e9 / rate),
            "stream": np.zeros(n, dtype=np.uint32),
            "op": np.zeros(n, dtype=np.uint8),
            "offset": (rng.integers(0, SIZE // 4096, n) * 4096).astype(np.uint64),
            "size": np.full(n, 4096, dtype=np.uint32),
        }
    )
    return fit(Trace(df, TraceMeta(capacity=SIZE)), levels=2, iat="fixed", reref=reref)


@dataclass
class Child:
    stdout: str
    wall_s: float
    cpu_s: float


def run_child(cmd: list[str]) -> Child:
    """Runs `cmd` in a fresh process; its CPU time (user + system, its children included)
    comes from wait4's rusage."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read() if p.stderr else ""
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {err[-2000:]}")
        out.seek(0)
        return Child(out.read(), wall, ru.ru_utime + ru.ru_stime)


def fio_job(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{") :])["jobs"][0]


# -- (a) timing --------------------------------------------------------------------------


def iotwin_timed(model: Path, target: Path, rate: int, work: Path) -> dict:
    n = rate * SECONDS
    rec, res = work / f"rec{rate}.parquet", work / f"r{rate}.json"
    run_child([IOTWIN, "run", str(model), "--target", str(target), "--requests", str(n),
               "--intensity", str(rate / BASE_RATE), "--buffered", "--record", str(rec),
               "--json", str(res)])  # fmt: skip
    issue = np.sort(read_parquet_trace(rec).df["ts_ns"].to_numpy())
    late = json.loads(res.read_text())["total"]["lateness_ns"]
    achieved = (len(issue) - 1) / (issue[-1] / 1e9)
    return {"done": len(issue), "rate": achieved, "p50_us": late["p50"] / 1e3,
            "p99_us": late["p99"] / 1e3}  # fmt: skip


def fio_timed(model: Path, target: Path, rate: int, work: Path) -> dict:
    n = rate * SECONDS
    log = work / f"fio{rate}.iolog"
    run_child([IOTWIN, "export", "fio-iolog", str(model), "-o", str(log), "--requests", str(n),
               "--intensity", str(rate / BASE_RATE), "--buffered"])  # fmt: skip
    out = run_child([FIO, "--name=replay", f"--read_iolog={log}", f"--replay_redirect={target}",
                     "--ioengine=io_uring", "--iodepth=64", "--output-format=json"])  # fmt: skip
    job = fio_job(out.stdout)
    done = job["read"]["total_ios"]
    return {"done": done, "rate": done / (job["job_runtime"] / 1e3)}


def timing(model: Path, target: Path, work: Path) -> tuple[str, bool]:
    rows, ok = [], True
    for rate in RATES:
        it = iotwin_timed(model, target, rate, work)
        fi = fio_timed(model, target, rate, work)
        e_it, e_fi = abs(it["rate"] / rate - 1), abs(fi["rate"] / rate - 1)
        ok &= e_it <= 0.005 and e_it < e_fi
        if rate == 50_000:
            ok &= it["p99_us"] <= 50
        row = (f"| {rate:,}/s | {it['rate']:,.0f} ({e_it:.2%}) | {it['p50_us']:.1f} / "
               f"{it['p99_us']:.1f} µs | {fi['rate']:,.0f} ({e_fi:.2%}) | "
               f"{it['done']:,} / {fi['done']:,} of {rate * SECONDS:,} |")  # fmt: skip
        print(row, flush=True)
        rows.append(row)
    head = ("| target | iotwin rate (error) | iotwin lateness p50 / p99 | fio rate (error) | "
            "completed iotwin / fio |\n|---|---|---|---|---|\n")  # fmt: skip
    return head + "\n".join(rows), ok


# -- (b) capacity ------------------------------------------------------------------------


def iotwin_closed(model: Path, target: Path, direct: bool, work: Path) -> dict:
    flag = "--direct" if direct else "--buffered"
    res = work / "closed.json"

    def cmd(*extra: str) -> list[str]:
        return [IOTWIN, "run", str(model), "--target", str(target), "--mode", "closed",
                "--iodepth", "32", flag, "--json", str(res), *extra]  # fmt: skip

    # start-up (interpreter, imports, model) measured alone, then taken off the CPU time
    start = run_child(cmd("--requests", "32"))
    out = run_child(cmd("--duration", str(CAPACITY_SECONDS)))
    r = json.loads(res.read_text())
    n = r["total"]["requests"]
    return {"iops": r["iops"], "cpu_us": (out.cpu_s - start.cpu_s) / n * 1e6}


def fio_closed(target: Path, direct: bool, force_async: bool = False) -> dict:
    """fio's default `invalidate=1` drops the file's cached pages before the job, which turns
    a page-cache run into disk reads (160k IOPS on ext4 here), so the cache is kept."""
    out = run_child([FIO, "--name=cap", f"--filename={target}", "--rw=randread", "--bs=4k",
                     "--iodepth=32", "--ioengine=io_uring", "--numjobs=1", "--time_based",
                     f"--runtime={CAPACITY_SECONDS}", f"--direct={int(direct)}",
                     f"--force_async={int(force_async)}", "--invalidate=0",
                     f"--size={SIZE}", "--output-format=json"])  # fmt: skip
    job = fio_job(out.stdout)
    n = job["read"]["total_ios"]
    return {"iops": job["read"]["iops"], "cpu_us": out.cpu_s / n * 1e6}


CAPACITY_REPEATS = 7


def best(runs: list[dict]) -> dict:
    """The run with the most IOPS. Closed-loop page-cache reads on 2 cores swing by up to 2x
    from run to run for fio and iotwin alike (where the scheduler puts the submitting thread
    and the io-wq worker), so each side gets the same number of tries, alternated."""
    return max(runs, key=lambda r: r["iops"])


def warm(target: Path) -> None:
    """Reads the file through once so a buffered run finds every page cached."""
    with target.open("rb", buffering=0) as f:
        buf = bytearray(1 << 20)
        while f.readinto(buf):
            pass


def capacity(models: dict[str, Path], files: dict[str, Path], work: Path) -> tuple[str, bool]:
    """fio against the model fitted as fio's randread is (no re-references), the goal's
    comparison, and against iotwin's default model (re-references on) for the record. On
    page-cache files iotwin's closed loop hands reads to io-wq workers at once (IOSQE_ASYNC),
    so fio doing the same (`--force_async=1`) is measured beside fio's default. The goal is
    judged on the median of the paired ratios (one per round); the best tries are shown too."""
    rows, ok = [], True
    for label, (target, direct) in files.items():
        tries: dict[str, list[dict]] = {"fio": [], "fio async": [], **{n: [] for n in models}}
        for _ in range(CAPACITY_REPEATS):
            if not direct:
                warm(target)
            tries["fio"].append(fio_closed(target, direct))
            if not direct:
                tries["fio async"].append(fio_closed(target, direct, force_async=True))
            for name, model in models.items():
                tries[name].append(iotwin_closed(model, target, direct, work))
        fi = best(tries["fio"])
        fa = best(tries["fio async"]) if tries["fio async"] else None
        kilo = lambda runs: ", ".join(f"{r['iops'] / 1e3:,.0f}k" for r in runs)  # noqa: E731
        for name in models:
            it = best(tries[name])
            paired = paired_ratios(tries[name], tries["fio"], "iops")
            med = statistics.median(paired)
            if name == GOAL_MODEL:
                ok &= med >= 1.0
            vs_async = f"{it['iops'] / fa['iops']:.2f}x ({fa['iops']:,.0f})" if fa else "n/a"
            row = (f"| {label} | {name} | {it['iops']:,.0f} | {fi['iops']:,.0f} | "
                   f"{it['iops'] / fi['iops']:.2f}x | **{med:.2f}x** ({min(paired):.2f}-"
                   f"{max(paired):.2f}) | {vs_async} | {it['cpu_us']:.2f} / {fi['cpu_us']:.2f} µs | "
                   f"{kilo(tries[name])} / {kilo(tries['fio'])} |")  # fmt: skip
            print(row, flush=True)
            rows.append(row)
    head = ("| file | iotwin model | iotwin IOPS (best) | fio IOPS (best) | best / best | "
            "paired iotwin / fio, median (range) | iotwin / fio --force_async=1 | "
            "CPU per request iotwin / fio | every try iotwin / fio |\n"
            "|---|---|---|---|---|---|---|---|---|\n")  # fmt: skip
    return head + "\n".join(rows), ok


GOAL_MODEL = "random reads (--no-reref, as fio's randread)"


def direct_file() -> Path | None:
    """A 1 GiB regular file on a filesystem that takes O_DIRECT (tmpfs does not)."""
    for d in (Path("/tmp"), BENCH / "data"):
        d.mkdir(exist_ok=True)
        path = d / "iotwin-bench-engine.bin"
        eng.prepare_file(path, SIZE, SIZE)
        if eng.supports_direct(path):
            return path
        path.unlink()
    return None


def fs_type(path: Path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    above = [(m, t) for m, t in mounts if path.resolve().is_relative_to(m)]
    return max(above, key=lambda mt: len(mt[0]))[1] if above else "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    if not Path(FIO).exists() or shutil.which("iotwin", path=str(Path(IOTWIN).parent)) is None:
        sys.exit(f"needs {FIO} and {IOTWIN}")
    shm = Path("/dev/shm/iotwin-bench-engine.bin")
    print(f"preparing {shm} and a 1 GiB O_DIRECT file ...", flush=True)
    eng.prepare_file(shm, SIZE, SIZE)
    files = {"buffered (/dev/shm, tmpfs)": (shm, False)}
    direct = direct_file()
    if direct is not None:
        where = f"{fs_type(direct)} in {direct.parent}"
        files[f"buffered (page cache, {where})"] = (direct, False)
        files[f"O_DIRECT ({where})"] = (direct, True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = work / "fixed.json"
        fixed_rate_model(BASE_RATE).save(model)
        plain = work / "fixed-noreref.json"
        fixed_rate_model(BASE_RATE, reref=False).save(plain)
        t_table, t_ok = timing(model, shm, work)
        models = {GOAL_MODEL: plain, "default (re-references on)": model}
        c_table, c_ok = capacity(models, files, work)
    for target, _ in files.values():
        target.unlink(missing_ok=True)
    body = (
        "`python bench/engine/run.py`: iotwin and fio 3.33 on the same files, each run a "
        "fresh process.\n\n"
        f"(a) Timing: one schedule of 4 KiB random reads at a fixed rate, {SECONDS} s each, "
        "on a 1 GiB page-cached file in /dev/shm; fio replays the exported iolog "
        "(`--read_iolog`, io_uring, iodepth 64, `--replay_redirect`). Rates: iotwin's from "
        "its recorded issue times, fio's from its JSON (completed ios / job runtime). Goals: "
        "iotwin within 0.5% of the target and p99 lateness <= 50 µs at 50k/s; a smaller "
        f"rate error than fio at every rate: **{'met' if t_ok else 'missed'}**.\n\n"
        + t_table
        + "\n\n(b) Capacity: closed loop, 4 KiB random reads, io_uring, iodepth 32, one "
        f"worker, {CAPACITY_SECONDS} s, {CAPACITY_REPEATS} rounds, each running every side "
        "once (fio, fio --force_async=1 on page-cache files, then iotwin); runs swing by up "
        "to 2x with where the scheduler puts the submitting thread and the io-wq worker, so "
        "the goal is judged on the median of the paired ratios (iotwin over fio within a "
        "round), with the best tries beside. Page-cache files are read through before each "
        "round and fio keeps their pages (`--invalidate=0`; by default it drops them, and "
        "its 'buffered' run on ext4 reads the disk at 160k IOPS). tmpfs refuses non-blocking "
        "reads, so there every read goes to an io-wq worker for either tool. CPU per request "
        "from the child's rusage (iotwin's net of a start-up run of the same command). "
        "fio's randread has no block reuse; its faithful model is fitted with --no-reref. "
        "The default model also keeps each stream's LRU history for re-references, which "
        "the sampling pays per request. On page-cache files iotwin's closed loop flags reads "
        "IOSQE_ASYNC (straight to io-wq), keeps its engine thread (which also samples) on "
        "one CPU and one io-wq worker per other CPU, and polls for completions; fio reads "
        "inline first by default, and `--force_async=1` is shown beside. O_DIRECT reads are "
        "bound by the virtio disk (fio: 209k IOPS at iodepth 32, 232k at 128). "
        "Goal: >= 1.0x fio's IOPS (paired median, on every file): "
        f"**{'met' if c_ok else 'missed'}**.\n\n" + c_table
    )
    print(body)
    if args.write_results:
        write_section("engine", body)


if __name__ == "__main__":
    main()
