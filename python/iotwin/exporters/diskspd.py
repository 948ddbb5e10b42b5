"""DiskSpd XML profile (`diskspd -X profile.xml`), following the element structure of
DiskSpd's XmlProfileParser/diskspd.xsd: Profile / TimeSpans / TimeSpan / Targets / Target.

A DiskSpd target has one block size and is either random or sequential, so each job of the
model (a unit and a direction, as for fio) becomes one target per request size and access
kind, with the job's write ratio (0 or 100). Timed models pace every target with its own
Throughput throttle (bytes per millisecond: the target's share of the job's rate times its
block size), so the throttles carry the weights; untimed models have no rate and use one
thread whose per-target Weight is the target's share of the requests.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING

from ..source import atomic_output
from .base import Exporter, ExportOptions
from .features import OP_NAMES, WRITE, Job, Unit, Workload, one_line, workload

if TYPE_CHECKING:
    from ..model import Model

MAX_SIZES = 8  # block sizes (targets) per job and kind
WEIGHT_SCALE = 1_000_000  # untimed models: Weight = share of requests x this


class DiskSpdProfile(Exporter):
    name = "diskspd"
    about = "DiskSpd XML profile: targets with block size, random/sequential, throttle or weight"
    suffix = ".xml"

    def write(self, model: Model, path: Path, options: ExportOptions) -> str:
        w = workload(model, options.seed, options.max_jobs, options.size)
        root = profile(w, model, options)
        ET.indent(root, space="  ")
        text = ET.tostring(root, encoding="unicode", xml_declaration=False)
        with atomic_output(path) as tmp:
            tmp.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n")
        return f"{len(root.findall('.//Target'))} DiskSpd targets on {len(w.units)} units"


def profile(w: Workload, model: Model, options: ExportOptions) -> ET.Element:
    direct = options.direct if options.direct is not None else not w.file_level
    root = ET.Element("Profile")
    root.append(ET.Comment(_about(w, model, options)))
    _text(root, "Progress", 0)
    _text(root, "ResultFormat", "xml")
    _text(root, "Verbose", "false")
    spans = ET.SubElement(root, "TimeSpans")
    span = ET.SubElement(spans, "TimeSpan")
    _text(span, "CompletionRoutines", "false")
    _text(span, "MeasureLatency", "true")
    _text(span, "CalculateIopsStdDev", "false")
    _text(span, "DisableAffinity", "false")
    _text(span, "Duration", options.runtime_s)
    _text(span, "Warmup", 0)
    _text(span, "Cooldown", 0)
    _text(span, "RandSeed", options.seed)
    if not w.timed:
        _text(span, "ThreadCount", 1)
        _text(span, "RequestCount", 1)
    targets = ET.SubElement(span, "Targets")
    for unit in w.units:
        for job in unit.jobs:
            for size, kind, count in _paced(_parts(job), job, w, options):
                _target(targets, unit, job, size, kind, count, w, direct, options)
    return root


def _about(w: Workload, model: Model, options: ExportOptions) -> str:
    source = one_line(model.doc.get("source", {}).get("path", "?"))
    return (
        f" iotwin export diskspd: model of {source}; {w.requests:,} requests over "
        f"{w.span_s:,.1f} s (intensity {options.intensity:g}). One target per unit, "
        "direction, block size and access kind. Not expressed: spatial locality inside a "
        "target, re-references, request order, inter-arrival distributions and activity "
        "fluctuation (targets run at their mean rate). Exact replay: iotwin export "
        "fio-iolog. "
    )


def _parts(job: Job) -> list[tuple[int, str, int]]:
    """(block size, 'random' | 'sequential', requests) of the job's targets."""
    sizes = sorted(job.sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = dict(sizes[:MAX_SIZES])
    for size, count in sizes[MAX_SIZES:]:
        nearest = min(kept, key=lambda k: abs(math.log(k or 1) - math.log(size or 1)))
        kept[nearest] += count
    parts = []
    for size, count in sorted(kept.items()):
        rand = round(count * job.random)
        for kind, n in (("random", rand), ("sequential", count - rand)):
            if n:
                parts.append((size, kind, n))
    return parts


def _paced(
    parts: list[tuple[int, str, int]], job: Job, w: Workload, options: ExportOptions
) -> list[tuple[int, str, int]]:
    """Timed models: a throttle is whole bytes per millisecond, so a part too slow for one
    (under 0.5 B/ms) joins the job's busiest part instead of running far too fast."""
    if not w.timed or job.iops is None:
        return parts
    per_request = job.iops * options.intensity / job.requests / 1000  # B/ms per byte-request
    fast = [p for p in parts if p[2] * p[0] * per_request >= 0.5]
    if not fast:
        fast = [max(parts, key=lambda p: p[2])]
    busiest = max(range(len(fast)), key=lambda i: fast[i][2])
    moved = sum(p[2] for p in parts) - sum(p[2] for p in fast)
    size, kind, n = fast[busiest]
    fast[busiest] = (size, kind, n + moved)
    return fast


def _target(
    targets: ET.Element,
    unit: Unit,
    job: Job,
    size: int,
    kind: str,
    count: int,
    w: Workload,
    direct: bool,
    options: ExportOptions,
) -> None:
    t = ET.SubElement(targets, "Target")
    t.append(
        ET.Comment(f" {one_line(unit.name)}: {OP_NAMES[job.op]}s, {count:,} of {job.requests:,} ")
    )
    _text(t, "Path", _path(options.directory, unit.target))
    _text(t, "BlockSize", size)
    if kind == "random":
        _text(t, "Random", _alignment(job))
    else:
        _text(t, "StrideSize", size)
    _text(t, "FileSize", max(unit.size, size))
    _text(t, "DisableOSCache", str(direct).lower())
    _text(t, "WriteThrough", str(direct).lower())
    _text(t, "RequestCount", 1)
    _text(t, "WriteRatio", 100 if job.op == WRITE else 0)
    _text(t, "ThreadsPerFile", 1)
    if w.timed and job.iops is not None:
        bytes_per_ms = job.iops * options.intensity * count / job.requests * size / 1000
        _text(t, "Throughput", max(1, round(bytes_per_ms)))
    else:
        _text(t, "Weight", max(1, round(count / max(1, w.requests) * WEIGHT_SCALE)))


def _alignment(job: Job) -> int:
    """Random offsets aligned to the sizes' common divisor, at most 4 KiB, at least 1."""
    g = 0
    for s in job.sizes:
        g = math.gcd(g, s)
    return max(1, min(g, 4096))


def _path(directory: str, name: str) -> str:
    if "\\" in directory or (len(directory) > 1 and directory[1] == ":"):
        return str(PureWindowsPath(directory) / name)
    return str(Path(directory) / name)


def _text(parent: ET.Element, tag: str, value: object) -> ET.Element:
    e = ET.SubElement(parent, tag)
    e.text = str(value)
    return e
