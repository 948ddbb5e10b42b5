"""The registry of trace formats: one file per format, one line here per format."""

from __future__ import annotations

from pathlib import Path

from ..errors import IotwinError
from ..source import logical_name, read_head
from .alibaba import AlibabaFormat
from .arc import ArcFormat
from .base import ReadOptions, ReadReport, Scan, TraceFormat
from .blkparse import BlkparseFormat
from .blktrace import BlktraceFormat
from .disksim import DiskSimFormat
from .fio_iolog import FioIologFormat
from .generic_csv import CsvFormat
from .msr import MsrFormat
from .spc import SpcFormat
from .strace import StraceFormat
from .systor import SystorFormat
from .tencent import TencentFormat
from .vscsi import VscsiFormat

# One line per format; detection tries them all and requires exactly one to match.
_ALL: list[TraceFormat] = [
    MsrFormat(),
    VscsiFormat(),
    TencentFormat(),
    DiskSimFormat(),
    ArcFormat(),
    SystorFormat(),
    SpcFormat(),
    AlibabaFormat(),
    CsvFormat(),
    BlktraceFormat(),
    BlkparseFormat(),
    FioIologFormat(),
    StraceFormat(),
]
FORMATS: dict[str, TraceFormat] = {f.name: f for f in _ALL}

__all__ = ["FORMATS", "ReadOptions", "ReadReport", "Scan", "TraceFormat", "detect", "get_format"]


def get_format(name: str) -> TraceFormat:
    """The format registered under `name`, or a clear error listing the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise IotwinError(f"unknown trace format '{name}'; known formats: {known}") from None


def detect(path: str | Path) -> TraceFormat:
    """The one format whose sniffer accepts the file; ambiguity or no match is an error."""
    head = read_head(path)
    name = logical_name(path)
    matches = [f for f in FORMATS.values() if f.sniff(head, name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise IotwinError(
            f"{path}: cannot tell the trace format; name it with --format (see `iotwin formats`)"
        )
    names = ", ".join(f.name for f in matches)
    raise IotwinError(f"{path}: the trace could be any of {names}; name it with --format")
