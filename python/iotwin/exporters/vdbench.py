"""Vdbench parameter file: storage definitions (sd), workload definitions (wd), one run
definition (rd) with the model's rate and exponential inter-arrival times.

Each job of the model (a unit and a direction, as for fio) is one wd: its request-size
distribution (`xfersize=(size,%,...)`), `rdpct=` 100 or 0, `seekpct=` its random share and
`skew=` its share of the run's I/O rate; block-level streams also get `range=` (the part of
the target they touch). File-level models get one sd per traced file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..source import atomic_output
from .base import Exporter, ExportOptions
from .features import OP_NAMES, READ, Job, Workload, one_line, percentages, workload

if TYPE_CHECKING:
    from ..model import Model

SKEW_SCALE = 1000  # skews have 3 decimals and sum to exactly 100


class VdbenchParm(Exporter):
    name = "vdbench"
    about = "Vdbench parameter file: sd/wd/rd, skews, exponential inter-arrival times"
    suffix = ".parm"

    def write(self, model: Model, path: Path, options: ExportOptions) -> str:
        w = workload(model, options.seed, options.max_jobs, options.size)
        text = parameter_file(w, model, options)
        with atomic_output(path) as tmp:
            tmp.write_text(text)
        wds = sum(len(u.jobs) for u in w.units)
        return f"{wds} Vdbench workloads on {len(w.units)} units"


def parameter_file(w: Workload, model: Model, options: ExportOptions) -> str:
    direct = options.direct if options.direct is not None else not w.file_level
    source = one_line(model.doc.get("source", {}).get("path", "?"))
    lines = [
        f"* iotwin export vdbench: model of {source}",
        f"* {w.requests:,} requests over {w.span_s:,.1f} s (intensity {options.intensity:g})",
        "* one wd per unit and direction; not expressed: locality finer than range=,",
        "* re-references, request order, activity fluctuation (the run is at the mean rate)",
        "* exact replay: iotwin export fio-iolog MODEL -o run.iolog",
    ]
    sd_of: dict[str, str] = {}
    for unit in w.units:
        if unit.target in sd_of:
            continue
        sd = f"sd{len(sd_of) + 1}"
        sd_of[unit.target] = sd
        flags = ",openflags=o_direct" if direct else ""
        lun = Path(options.directory) / unit.target
        lines.append(f"sd={sd},lun={lun},size={unit.size},threads=8{flags}")
    jobs = [(u, j) for u in w.units for j in u.jobs]
    skews = percentages([j.requests for _, j in jobs], 100 * SKEW_SCALE)
    for n, ((unit, job), skew) in enumerate(zip(jobs, skews, strict=True), start=1):
        lines.append(
            f"* wd{n}: {one_line(unit.name)}, {OP_NAMES[job.op]}s, {job.requests:,} requests"
        )
        parts = [
            f"wd=wd{n}",
            f"sd={sd_of[unit.target]}",
            f"xfersize={_xfersize(job)}",
            f"rdpct={100 if job.op == READ else 0}",
            f"seekpct={round(job.random * 100)}",
            f"skew={skew / SKEW_SCALE:.3f}",
        ]
        if not w.file_level and job.zones:
            lo, hi = _hull(job)
            if (lo, hi) != (0, 100):
                parts.append(f"range=({lo:g},{hi:g})")
        lines.append(",".join(parts))
    rate = f"{w.requests / w.span_s * options.intensity:.3f}" if w.timed else "max"
    lines.append(
        f"rd=rd1,wd=wd*,iorate={rate},elapsed={options.runtime_s},interval=1,"
        "distribution=exponential"
    )
    return "\n".join(lines) + "\n"


def _xfersize(job: Job) -> str:
    """`4096` for one size, else `(size,%,size,%,...)` with whole percentages summing to 100."""
    sizes = sorted(job.sizes)
    if len(sizes) == 1:
        return str(sizes[0])
    pct = percentages([job.sizes[s] for s in sizes])
    return "(" + ",".join(f"{s},{p}" for s, p in zip(sizes, pct, strict=True) if p) + ")"


def _hull(job: Job) -> tuple[float, float]:
    """The percentage range of the target between the first and last zone in use."""
    used = [z for z in job.zones if z[2] > 0]
    return round(used[0][0] * 100, 4), round(used[-1][1] * 100, 4)
