"""The Python API: each arrow of the pipeline (design.md) as one function.

```python
import iotwin

trace = iotwin.read_trace("hm_0.csv.gz")              # any supported format, or Parquet
table = iotwin.characterize(trace)                     # dict, as `characterize --json`
model = iotwin.fit(trace, levels="auto")               # iotwin.Model
twin = model.synth(seed=1)                             # a synthetic iotwin.Trace
report = iotwin.validate(trace, twin)                  # dict, as `validate --json`
result = iotwin.run(model, "/mnt/test/twin.img", duration_s=10)  # dict, as `run --json`
on_disk = iotwin.simulate(model, "hdd-7200", intensity=2)  # dict, as `sim --json`
```

Functions take a `Trace` or a path wherever they read a trace, raise `iotwin.IotwinError`
with a message meant for the user, and return plain dicts that `json.dumps` accepts. The
HTML report is `iotwin.report.build_report(inputs, output)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import IotwinError
from .formats import ReadOptions
from .model import Model
from .trace import Trace

# Loaded here, before `iotwin/__init__` binds the name `validate` to the function below: a
# submodule first imported later would replace that binding with the module.
from .validate import validate as _validate

TraceLike = Trace | str | Path


def read_trace(
    path: str | Path,
    format: str | None = None,
    *,
    stream_by: str | None = None,
    skip_bad: bool = False,
) -> Trace:
    """Read a trace in any supported format (see `iotwin formats`) or canonical Parquet.

    `format` names the format when detection cannot; `stream_by` chooses what a stream is
    (thread, process, device, volume or file, per format); `skip_bad` skips and counts
    malformed records instead of raising at the first with its line and field.
    """
    from .ingest import load_trace

    return load_trace(path, format, ReadOptions(stream_by=stream_by, skip_bad=skip_bad))


def _trace(trace: TraceLike) -> Trace:
    return trace if isinstance(trace, Trace) else read_trace(trace)


def fit(
    trace: TraceLike,
    levels: int | str = 2,
    *,
    fanout: int = 4,
    flat: bool = False,
    window_s: float | None = None,
    iat: str = "auto",
    reref: bool = True,
    types: bool = False,
    seed: int = 0,
    calibrate: int = 0,
    window_reads: bool = True,
) -> Model:
    """Fit the hierarchical Markov model of a trace (docs/model.md).

    `levels="auto"` sweeps 1..8 levels, scores a twin of each and keeps the first level after
    which fidelity stops improving (seed 000, Figure 6); the sweep is kept in
    `model.doc["fit"]["level_sweep"]`. `iat` forces an inter-arrival family (fixed, normal,
    exponential, poisson, gamma, hyperexp, empirical) instead of the best fit; `types` fits
    one sub-model per stream type with its count; `reref` models block re-references;
    `calibrate` rounds re-weight their distances until twins follow the trace's LRU
    miss-ratio curve (`iotwin.calibrate.calibrate`, kept in `model.doc["fit"]["calibration"]`);
    `window_reads` keeps each fluctuation window's reads and steers the twin toward them.
    """
    from .levels import chosen_model, sweep
    from .model import fit as fit_model

    t = _trace(trace)
    args: dict[str, Any] = dict(
        fanout=fanout,
        flat=flat,
        window_s=window_s,
        iat=iat,
        reref=reref,
        types=types,
        window_reads=window_reads,
    )
    if levels == "auto":
        model = chosen_model(*sweep(t, seed=seed, **args))
    elif not isinstance(levels, int) or isinstance(levels, bool):
        raise IotwinError(f"levels {levels!r}: expected a number or 'auto'")
    else:
        model = fit_model(t, levels=levels, **args)
    if calibrate:
        from .calibrate import calibrate as tune

        model = tune(model, t, rounds=calibrate)
    return model


def validate(
    original: TraceLike, synthetic: TraceLike, tolerances: dict[str, float] | None = None
) -> dict[str, Any]:
    """Compare a synthetic trace with its original (seed 000 Table IV, extended;
    docs/metrics.md): {"metrics": {name: {original, synthetic, deviation, tolerance, pass}},
    "passed": bool, "score": float, ...}. `tolerances` overrides families by name."""
    return _validate(_trace(original), _trace(synthetic), tolerances)


def run(
    source: Model | TraceLike,
    target: str | Path,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
    intensity: float = 1.0,
    seed: int = 0,
    direct: bool | None = None,
    engine: str | None = None,
    mode: str = "open",
    iodepth: int | None = None,
    size: int | None = None,
    record: str | Path | None = None,
) -> dict[str, Any]:
    """Run a model (requests synthesized as the run goes) or replay a trace as timed I/O on
    `target`, a file (created and filled to `size`, default the model's capacity) — the
    same as `iotwin run` / `replay` (docs/engine.md). Open loop by default; `mode="closed"`
    keeps exactly `iodepth` requests in flight. Returns the result as `run --json` writes
    it (lateness, service and response percentiles, timeline); `record` writes what was
    issued as a canonical trace. Block devices are refused here: use the CLI's explicit
    flags for them."""
    from . import engine as eng
    from .trace import write_trace

    src = source if isinstance(source, Model) else _trace(source)
    opts = eng.RunOptions(
        requests=requests, duration_s=duration_s, intensity=intensity, seed=seed,
        direct=direct, engine=engine, mode=mode, iodepth=iodepth, size=size,
        record=record is not None,
    )  # fmt: skip
    result = eng.run(src, target, opts)
    if record is not None:
        write_trace(eng.record_trace(result), record)
    return eng.result_json(result)


def simulate(
    workload: Model | TraceLike,
    device: str | dict[str, Any] = "hdd-7200",
    *,
    intensity: float = 1.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Simulate a trace, or a model's synthetic twin (seed `seed`), on a storage device,
    open loop, its arrivals scaled by `intensity` — the same as `iotwin sim --json`.
    `device` is a preset name (`iotwin whatif devices`: hdd-7200, ssd-sata, ...), a device
    JSON file, or a spec dict. Returns completed IOPS, response-time percentiles (ms),
    utilisation and cache hit ratio."""
    from .sim import simulate as run_simulation

    if isinstance(workload, Model):
        trace = workload.synth(seed=seed)
        of = "twin"
    else:
        trace, of = _trace(workload), "original"
    return {"kind": "sim", "of": of, **run_simulation(trace, device, intensity, seed).as_dict()}
