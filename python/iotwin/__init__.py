"""iotwin: learn a compact statistical twin of a storage workload and regenerate it.

The pipeline, one function per step (docs/api.md; `examples/quickstart.py` runs it):

- `read_trace(path)`: any supported trace format, or canonical Parquet, as a `Trace`.
- `characterize(trace)`: per-stream statistics (seed 000 Table III), a JSON-ready dict.
- `fit(trace, levels=2 | "auto")`: the hierarchical Markov `Model`; `Model.save/load`.
- `Model.synth(requests=.., duration_s=.., intensity=.., seed=..)`: a synthetic `Trace`.
- `validate(original, synthetic)`: the fidelity report (seed 000 Table IV, extended).
- `run(model, target, duration_s=..)`: the model as timed I/O on a file, open loop.
- `simulate(model_or_trace, "hdd-7200", intensity=..)`: the storage simulator, open loop.
- `iotwin.report.build_report(inputs, "report.html")`: the self-contained HTML report.
- `write_trace(trace, path)`: a trace as canonical Parquet.

Errors meant for the user are `IotwinError` (bad traces: `TraceFormatError`, naming the
file, record and field).
"""

from __future__ import annotations

import os

# numpy's OpenBLAS starts a thread per core that spins for a while after start-up (measured:
# ~0.1 s of a core per process, taken from the work on a 2-core machine); iotwin's few matrix
# operations are small. A value the user set wins. Must run before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from importlib.metadata import PackageNotFoundError, version

from .api import fit, read_trace, run, simulate, validate
from .capture import CaptureResult, capture
from .characterize import characterize
from .errors import IotwinError, TraceFormatError
from .formats import FORMATS, ReadOptions
from .ingest import ingest, load_trace
from .model import Model
from .trace import Trace, TraceMeta, read_parquet_trace, write_trace

try:
    __version__ = version("iotwin")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+source"

__all__ = [
    "FORMATS",
    "CaptureResult",
    "IotwinError",
    "Model",
    "ReadOptions",
    "Trace",
    "TraceFormatError",
    "TraceMeta",
    "__version__",
    "capture",
    "characterize",
    "fit",
    "ingest",
    "load_trace",
    "read_parquet_trace",
    "read_trace",
    "run",
    "simulate",
    "validate",
    "write_trace",
]
