"""fio job file: seed 004's clone of an application, one job per unit and direction.

File-level models get, per traced file, a read job and a write job (seed 004, Figure 2);
block-level models get, per stream, a read job and a write job on one shared target whose
zoned random distribution carries the stream's spatial locality. (fio 3.33 does not parse
a separate zoned list per direction inside one job, so the directions are separate jobs,
which also makes each direction's rate exact.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..source import atomic_output
from .base import Exporter, ExportOptions
from .features import OP_NAMES, READ, Job, Unit, Workload, one_line, percentages, workload

if TYPE_CHECKING:
    from ..model import Model

LOST = (
    "the order of requests (the model's transitions between address ranges) beyond "
    "the per-job random/sequential share",
    "re-references by LRU stack distance (fio draws offsets afresh; the model's block reuse "
    "is lost)",
    "inter-arrival distributions per transition: fio paces each job at a steady rate",
    "activity fluctuation (the model's per-window intensity); fio runs at the mean rate",
    "the interleaving of directions and streams in time",
)


class FioJob(Exporter):
    name = "fio"
    about = "fio job file: per file (or stream) a read and a write job (seed 004)"
    suffix = ".fio"

    def write(self, model: Model, path: Path, options: ExportOptions) -> str:
        w = workload(model, options.seed, options.max_jobs, options.size)
        text = job_file(w, model, options)
        with atomic_output(path) as tmp:
            tmp.write_text(text)
        jobs = sum(len(u.jobs) for u in w.units)
        return f"{jobs} fio jobs on {len(w.units)} {'files' if w.file_level else 'streams'}"


def job_file(w: Workload, model: Model, options: ExportOptions) -> str:
    direct = options.direct if options.direct is not None else not w.file_level
    lines = _header(w, model, options)
    lines += [
        "[global]",
        f"ioengine={options.ioengine}",
        f"direct={int(direct)}",
        "time_based=1",
        f"runtime={options.runtime_s}",
        "randrepeat=1",
        f"randseed={options.seed}",
        "norandommap=1",
        "fallocate=none",
        "",
    ]
    for i, unit in enumerate(w.units):
        for job in unit.jobs:
            lines += _job_section(i, unit, job, w, options)
    return "\n".join(lines) + "\n"


def _header(w: Workload, model: Model, options: ExportOptions) -> list[str]:
    source = one_line(model.doc.get("source", {}).get("path", "?"))
    kind = "per file" if w.file_level else "per stream"
    rate = (
        f"{w.requests / w.span_s * options.intensity:,.2f} IOPS in all"
        if w.timed
        else "untimed model: no rate, each job issues as fast as it can"
    )
    out = [
        f"; iotwin export fio: model of {source}",
        f"; {w.requests:,} requests over {w.span_s:,.1f} s, {rate} (intensity {options.intensity:g})",
        f"; {kind}: a read job and a write job (seed 004, Figure 2); each job's features are",
        f"; measured on the model's synthetic trace (seed {options.seed}, original length)",
        "; rate= is bytes/s (IOPS x mean request size): fio's rate_iops would count the",
        ";   smallest size of a bssplit, not the mean",
    ]
    if w.file_level:
        dirs = sorted({str((Path(options.directory) / u.target).parent) for u in w.units})
        out.append("; fio creates the files but not their directories; first run")
        out.append(";   mkdir -p " + " ".join(one_line(d) for d in dirs))
    if w.pooled:
        out.append(f"; the {w.pooled} least busy streams/files are pooled into one unit")
    out.append("; What fio cannot express of this model:")
    out += [f";   - {item}" for item in LOST]
    out += [
        "; For an exact replay of the model's requests and timing use",
        ";   iotwin export fio-iolog MODEL -o run.iolog",
        ";   fio --name=replay --read_iolog=run.iolog --replay_redirect=TARGET",
        "",
    ]
    return out


def _job_section(i: int, unit: Unit, job: Job, w: Workload, options: ExportOptions) -> list[str]:
    name = f"u{i}-{OP_NAMES[job.op]}"
    sizes = sorted(job.sizes)
    pct = percentages([job.sizes[s] for s in sizes])
    split = ":".join(f"{s}/{p}" for s, p in zip(sizes, pct, strict=True) if p)
    # the mean of the split as written (whole percentages), which is what fio draws from
    split_mean = sum(s * p for s, p in zip(sizes, pct, strict=True)) / 100
    random_pct = round(job.random * 100)
    mode = ("rand" if random_pct else "") + ("read" if job.op == READ else "write")
    out = [
        f"; {one_line(unit.name)}: {OP_NAMES[job.op]}s, {job.requests:,} requests, "
        f"mean size {job.mean_size:,.0f} B, {job.random:.1%} random",
        f"[{name}]",
        f"filename={_fio_path(options.directory, unit.target)}",
        f"filesize={max(unit.size, max(sizes))}",
        f"rw={mode}",
        f"bssplit={split}" if len(sizes) > 1 else f"bs={sizes[0]}",
    ]
    if 0 < random_pct < 100:
        out.append(f"percentage_random={random_pct}")
    if job.iops is not None:
        iops = job.iops * options.intensity
        out.append(f"; {iops:,.3f} IOPS, mean gap {1e9 / iops / 1e6:,.3f} ms between requests")
        out.append(f"rate={max(1, round(iops * split_mean))}")
    if job.zones and random_pct:
        out.append(f"random_distribution=zoned:{_zoned(job.zones)}")
    if job.fsyncs:
        out.append(f"fsync={job.writes_per_fsync}")
    out.append("")
    return out


def _zoned(zones: list[tuple[float, float, float]]) -> str:
    """fio's zoned list: whole access percentages (summing to 100), size percentages with up
    to 4 decimals; the last zone's size takes the rounding so sizes sum to 100."""
    access = percentages([z[2] for z in zones])
    sizes = [round((hi - lo) * 100, 4) for lo, hi, _ in zones]
    sizes[-1] = round(100 - sum(sizes[:-1]), 4)
    return ":".join(f"{a}/{s:g}" for a, s in zip(access, sizes, strict=True))


def _fio_path(directory: str, name: str) -> str:
    """fio splits filename= on ':'; escape it."""
    return str(Path(directory) / name).replace(":", "\\:")
