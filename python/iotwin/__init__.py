"""iotwin: learn a compact statistical twin of a storage workload and regenerate it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .capture import CaptureResult, capture
from .characterize import characterize
from .errors import IotwinError, TraceFormatError
from .formats import FORMATS, ReadOptions
from .ingest import ingest, load_trace
from .trace import Trace, TraceMeta, read_parquet_trace, write_trace

try:
    __version__ = version("iotwin")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+source"

read_trace = load_trace

__all__ = [
    "FORMATS",
    "CaptureResult",
    "IotwinError",
    "ReadOptions",
    "Trace",
    "TraceFormatError",
    "TraceMeta",
    "__version__",
    "capture",
    "characterize",
    "ingest",
    "load_trace",
    "read_parquet_trace",
    "read_trace",
    "write_trace",
]
