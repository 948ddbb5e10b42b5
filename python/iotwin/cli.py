"""The `iotwin` command line: one command per arrow of the pipeline (design.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from .errors import IotwinError
from .formats import FORMATS
from .reader_cli import ReaderOpt, SkipBadOpt, StreamByOpt, reader_options

app = typer.Typer(
    name="iotwin",
    help="Learn a compact statistical twin of a storage workload from a real I/O trace.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format", "-f", help="Trace format (see `iotwin formats`); auto-detected if omitted."
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Run on Dask: local[:N] (N worker processes) or a scheduler address "
        "tcp://HOST:PORT. Needs a partitioned dataset (ingest --partition-by).",
    ),
]
ClusterTimeoutOpt = Annotated[
    float, typer.Option("--cluster-timeout", help="Seconds to wait for the Dask scheduler.")
]
RetriesOpt = Annotated[
    int, typer.Option("--retries", help="Times Dask retries a failed partition task.")
]


def _version(value: bool) -> None:
    if value:
        console.print(f"iotwin {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Learn a compact statistical twin of a storage workload from a real I/O trace."""


@app.command()
def formats() -> None:
    """List the trace formats iotwin reads, with their stream choices."""
    table = Table(title="Trace formats")
    table.add_column("name", style="bold")
    table.add_column("stream-by (default first)")
    table.add_column("timed")
    table.add_column("description")
    for fmt in FORMATS.values():
        table.add_row(fmt.name, ", ".join(fmt.stream_keys), "yes" if fmt.timed else "no", fmt.title)
    console.print(table)


@app.command()
def ingest(
    trace: Annotated[
        Path, typer.Argument(help="Raw trace file (.gz/.bz2/.xz/.zst read transparently).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Canonical Parquet trace to write.")
    ],
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
    partition_by: Annotated[
        str | None,
        typer.Option(
            "--partition-by",
            help="Write a partitioned dataset directory instead of one file: 'stream' or "
            "'stream,time' (see docs/distributed.md).",
        ),
    ] = None,
    partition_rows: Annotated[
        int | None,
        typer.Option("--partition-rows", help="Most requests per partition (default 4Mi)."),
    ] = None,
    partition_window: Annotated[
        str | None,
        typer.Option(
            "--partition-window",
            help="With --partition-by stream,time: cut every stream at this trace time (10m, 1h).",
        ),
    ] = None,
) -> None:
    """Convert a trace to the canonical Parquet form (streaming, bounded memory)."""
    from .ingest import ingest as run_ingest
    from .ingest import ingest_dataset

    opts = reader_options(stream_by, skip_bad, opt)
    window_ns = _partitioning(partition_by, partition_rows, partition_window)
    with console.status(f"ingesting {trace} ..."):
        if partition_by is None:
            result = run_ingest(trace, output, format, opts)
        else:
            result = ingest_dataset(trace, output, format, opts, partition_rows, window_ns)
    parts = result.info.get("partitions")
    console.print(
        f"[green]wrote[/green] {result.output}: {result.requests:,} requests, "
        f"{result.streams:,} streams"
        + (f" in {parts:,} partitions" if parts is not None else "")
        + f", format {result.format}, {result.seconds:.2f} s"
    )
    report_skipped(result.skipped, result.skipped_examples)


def _partitioning(partition_by: str | None, rows: int | None, window: str | None) -> int | None:
    """Checks the partitioning options; returns the time window in ns (None: by rows)."""
    if partition_by is None:
        if rows is not None or window is not None:
            raise IotwinError("--partition-rows and --partition-window need --partition-by")
        return None
    keys = [k.strip() for k in partition_by.split(",") if k.strip()]
    if keys not in (["stream"], ["stream", "time"]):
        raise IotwinError(f"--partition-by '{partition_by}': expected 'stream' or 'stream,time'")
    if window is None:
        return None
    if "time" not in keys:
        raise IotwinError("--partition-window needs --partition-by stream,time")
    return int(parse_duration(window, "--partition-window") * 1e9)


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    command: Annotated[
        list[str], typer.Argument(help="The command to run and trace, after --.", metavar="CMD...")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Canonical Parquet trace to write.")
    ],
    stream_by: Annotated[
        str, typer.Option("--stream-by", help="What a stream is: thread, process or file.")
    ] = "thread",
    keep_strace: Annotated[
        Path | None, typer.Option("--keep-strace", help="Keep strace's text output in this file.")
    ] = None,
) -> None:
    """Run a command under strace and write the file-level I/O trace of all its threads.

    The trace is written even when the command fails or is stopped with Ctrl-C; iotwin then
    exits with the command's exit status. Messages go to stderr, so the command's stdout
    stays its own.
    """
    from .capture import capture as run_capture
    from .capture import describe_status

    shown = " ".join(command)
    with err_console.status(f"capturing [bold]{shown}[/bold] ...") as status:

        def progress(seconds: float, size: int) -> None:
            status.update(
                f"capturing [bold]{shown}[/bold]: {seconds:,.0f} s, "
                f"{size / 1e6:,.1f} MB of strace text"
            )

        result = run_capture(command, output, stream_by, keep_strace, progress)
    err_console.print(
        f"[green]wrote[/green] {result.output}: {result.requests:,} requests on "
        f"{result.files:,} files by {result.threads:,} threads in {result.processes:,} "
        f"processes ({result.streams:,} streams by {stream_by}), {result.seconds:.1f} s"
    )
    if result.strace_log is not None:
        err_console.print(f"strace text kept in {result.strace_log}")
    if result.interrupted:
        err_console.print("[yellow]interrupted:[/yellow] the trace holds the I/O until then")
    if result.exit_status != 0:
        err_console.print(
            f"[yellow]the command ended with {describe_status(result.exit_status)}[/yellow]"
        )
        raise typer.Exit(code=result.exit_status)


def parse_duration(text: str, option: str = "--window") -> float:
    """Seconds from "1800", "90s", "30m", "2h", "1d" or "500ms"."""
    units = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    raw = text.strip().lower()
    number, scale = raw, 1.0
    for suffix in sorted(units, key=len, reverse=True):
        if raw.endswith(suffix):
            number, scale = raw[: -len(suffix)], units[suffix]
            break
    try:
        value = float(number) * scale
    except ValueError:
        raise IotwinError(f"{option} '{text}': expected a duration like 1800, 30m or 2h") from None
    if not value > 0:
        raise IotwinError(f"{option} '{text}': must be positive")
    return value


@app.command()
def characterize(
    trace: Annotated[Path, typer.Argument(help="Raw trace (any format) or canonical Parquet.")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
    levels: Annotated[int, typer.Option("--levels", help="Spatial-locality tree levels L.")] = 1,
    fanout: Annotated[int, typer.Option("--fanout", help="Spatial-locality fanout b.")] = 4,
    window: Annotated[
        str,
        typer.Option(
            "--window",
            help="Activity-fluctuation window (1800, 30m, 2h); traces shorter than 10 windows "
            "use span/10.",
        ),
    ] = "30m",
    relaxed_threshold: Annotated[
        int,
        typer.Option(
            "--relaxed-threshold",
            help="Largest forward jump (bytes) that keeps a relaxed detangled run going.",
        ),
    ] = 64 * 1024,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
    cluster: ClusterOpt = None,
    cluster_timeout: ClusterTimeoutOpt = 10.0,
    retries: RetriesOpt = 2,
) -> None:
    """Per-stream characterization: I/O features, locality, sequentiality, stream types."""
    import json
    from contextlib import nullcontext
    from functools import partial

    from .characterize import characterize as run_characterize
    from .characterize import render
    from .dataset import is_dataset

    opts = reader_options(stream_by, skip_bad, opt)
    window_s = parse_duration(window)
    if is_dataset(trace):
        from .distributed import characterize_dataset

        run_characterize = partial(  # type: ignore[assignment]
            _on_dataset, characterize_dataset, cluster=cluster, timeout_s=cluster_timeout,
            retries=retries, show_progress=not json_out,
        )  # fmt: skip
    elif cluster is not None:
        raise IotwinError(
            "--cluster characterizes a partitioned dataset "
            "(iotwin ingest --partition-by stream,time)"
        )
    if json_out:
        result = run_characterize(
            trace, levels=levels, fanout=fanout, window_s=window_s,
            relaxed_threshold=relaxed_threshold, format=format, opts=opts,
        )  # fmt: skip
        sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
        return
    # a dataset shows a progress bar instead (rich keeps one live display at a time)
    status = nullcontext() if is_dataset(trace) else console.status(f"characterizing {trace} ...")
    with status:
        result = run_characterize(
            trace, levels=levels, fanout=fanout, window_s=window_s,
            relaxed_threshold=relaxed_threshold, format=format, opts=opts,
        )  # fmt: skip
    render(result, console)


def _on_dataset(run, path: Path, *, show_progress: bool, format=None, opts=None, **kw):
    """Runs a dataset command (`run(path, progress=..., **kw)`) with a progress bar of
    requests done; reader options do not apply to a dataset."""
    from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

    from .dataset import open_dataset

    total = open_dataset(path).requests
    where = "in-process" if kw.get("cluster") is None else f"on {kw['cluster']}"
    columns = (*Progress.get_default_columns()[:2], MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True, disable=not show_progress) as bar:
        task = bar.add_task(f"{run.__name__.split('_')[0]} {where}", total=total)
        return run(path, progress=lambda rows: bar.advance(task, rows), **kw)


def report_skipped(skipped: int, examples: list[str]) -> None:
    if skipped:
        err_console.print(f"[yellow]skipped {skipped:,} malformed records[/yellow], e.g.:")
        for line in examples:
            err_console.print(f"  {line}")


def _load(
    trace: Path,
    format: str | None,
    stream_by: str | None,
    skip_bad: bool = False,
    opt: list[str] | None = None,
):
    from .ingest import load_trace

    with err_console.status(f"reading {trace} ..."):
        return load_trace(trace, format, reader_options(stream_by, skip_bad, opt))


@app.command()
def fit(
    trace: Annotated[Path, typer.Argument(help="Raw trace (any format) or canonical Parquet.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Model JSON to write.")],
    levels: Annotated[
        str,
        typer.Option("--levels", help="Tree levels L, or 'auto' (sweep 1..8, seed 000 Fig. 6)."),
    ] = "2",
    fanout: Annotated[int, typer.Option("--fanout", help="Children per state (b).")] = 4,
    flat: Annotated[
        bool, typer.Option("--flat", help="One flat b^L x b^L table instead of the hierarchy.")
    ] = False,
    window: Annotated[
        str | None,
        typer.Option(
            "--window", help="Fluctuation window (30m default; span/10 for short traces)."
        ),
    ] = None,
    iat: Annotated[
        str,
        typer.Option(
            "--iat",
            help="Inter-arrival family: auto (by KS distance), fixed, normal, exponential, poisson, gamma, hyperexp, empirical.",
        ),
    ] = "auto",
    reref: Annotated[
        bool,
        typer.Option(
            "--reref/--no-reref", help="Model re-references by LRU stack distance (block reuse)."
        ),
    ] = True,
    types: Annotated[
        bool,
        typer.Option(
            "--types",
            help="One sub-model per stream type (data/log, intensity, fluctuation) with its count.",
        ),
    ] = False,
    window_reads: Annotated[
        bool,
        typer.Option(
            "--window-ops/--no-window-ops",
            help="Keep each fluctuation window's share of reads and steer the twin's operations "
            "toward it (off: as the paper's walk draws them).",
        ),
    ] = True,
    bursts: Annotated[
        bool,
        typer.Option(
            "--bursts/--no-bursts",
            help="Keep each window's burst lengths (runs of requests under 5 ms apart) and "
            "the shape of its gaps, which the twin's gaps in that window then follow.",
        ),
    ] = False,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the twins scored by --levels auto.")
    ] = 0,
    calibrate: Annotated[
        int,
        typer.Option(
            "--calibrate",
            help="Rounds of re-weighting the re-reference distances until twins follow the "
            "trace's LRU miss-ratio curve (0: off; each round synthesizes two twins).",
        ),
    ] = 0,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
    cluster: ClusterOpt = None,
    cluster_timeout: ClusterTimeoutOpt = 10.0,
    retries: RetriesOpt = 2,
) -> None:
    """Fit the hierarchical Markov model of a trace and write it as JSON."""
    from .dataset import is_dataset
    from .levels import chosen_model, sweep
    from .model import fit as fit_model

    window_s = parse_duration(window) if window else None
    if calibrate and (cluster is not None or is_dataset(trace)):
        raise IotwinError("--calibrate needs the trace in memory: fit a trace file, not a dataset")
    if bursts and (cluster is not None or is_dataset(trace)):
        raise IotwinError("--bursts needs the trace in memory: fit a trace file, not a dataset")
    if is_dataset(trace) and levels != "auto" and not types:
        model = _fit_dataset(
            trace, _levels(levels), fanout, flat, window_s, iat, reref,
            cluster, cluster_timeout, retries, window_reads,
        )  # fmt: skip
        _report_fit(model, output, types)
        return
    if cluster is not None:
        raise IotwinError(
            "--cluster fits a partitioned dataset (iotwin ingest --partition-by stream,time), "
            "with a number of --levels and without --types"
        )
    t = _load(trace, format, stream_by, skip_bad, opt)
    args: dict[str, Any] = dict(
        fanout=fanout,
        flat=flat,
        window_s=window_s,
        iat=iat,
        reref=reref,
        types=types,
        window_reads=window_reads,
        bursts=bursts,
    )
    if levels == "auto":
        doing = "sweeping levels 1..8 (fit, synthesize, validate)"
        with err_console.status(f"{doing} ...") as status:

            def scored(p) -> None:
                status.update(f"{doing}: level {p.levels} scored {p.score:.3f} ...")

            chosen, points = sweep(t, seed=seed, on_level=scored, **args)
        table = Table(title="Level sweep (seed 000, Figure 6)")
        for col in ("levels", "fidelity score", "transitions", "metrics out of tolerance", ""):
            table.add_column(col, justify="right")
        for p in points:
            table.add_row(
                str(p.levels),
                f"{p.score:.3f}",
                f"{p.transitions:,}",
                str(p.failed),
                "chosen" if p.levels == chosen else "",
            )
        console.print(table)
        model = chosen_model(chosen, points)
    else:
        model = fit_model(t, levels=_levels(levels), **args)
    if calibrate:
        model = _calibrated(model, t, calibrate)
    _report_fit(model, output, types)


def _calibrated(model, trace, rounds: int):
    """`calibrate` with a progress bar, and a table of each model's score."""
    from .calibrate import calibrate, candidate_label
    from .whatif.cli import progress_bar

    with progress_bar() as bar:
        task = bar.add_task("calibrating (one twin a candidate)", total=rounds + 2)
        model = calibrate(model, trace, rounds, progress=lambda _: bar.advance(task))
    report = model.doc["fit"]["calibration"]
    table = Table(title="Calibration: twins' largest LRU miss-ratio deviation")
    for col in ("model", "deviation", ""):
        table.add_column(col, justify="right")
    for k, score in enumerate(report["largest_miss_ratio_deviation"]):
        table.add_row(candidate_label(k), f"{score:.3f}", "chosen" if k == report["chosen"] else "")
    console.print(table)
    return model


def _levels(levels: str) -> int:
    try:
        return int(levels)
    except ValueError:
        raise IotwinError(f"--levels '{levels}': expected a number or 'auto'") from None


def _fit_dataset(
    path: Path,
    levels: int,
    fanout: int,
    flat: bool,
    window_s: float | None,
    iat: str,
    reref: bool,
    cluster: str | None,
    timeout_s: float,
    retries: int,
    window_reads: bool,
):
    """Fits a partitioned dataset in-process or on a Dask cluster, with a progress bar."""
    from .distributed import fit_dataset

    return _on_dataset(
        fit_dataset, path, show_progress=True, levels=levels, fanout=fanout, flat=flat,
        window_s=window_s, iat=iat, reref=reref, cluster=cluster, timeout_s=timeout_s,
        retries=retries, window_reads=window_reads,
    )  # fmt: skip


def _report_fit(model, output: Path, types: bool) -> None:
    model.save(output)
    if types:
        for ty in model.doc["types"]:
            console.print(
                f"  type {ty['type']}: {ty['count']:,} streams, weight {ty['weight']:.4f}"
            )
    console.print(
        f"[green]wrote[/green] {output}: {model.doc['levels']} levels, {len(model.streams):,} streams, "
        f"{model.transition_count:,} transitions from {model.doc['requests']:,} requests"
    )


@app.command()
def show(
    model: Annotated[Path, typer.Argument(help="Model JSON, or a partitioned dataset.")],
    top: Annotated[int, typer.Option("--top", help="How many transitions to list.")] = 10,
) -> None:
    """Print a model the way the paper reads: levels, transitions, weights, phases (or what a
    partitioned dataset holds)."""
    from .dataset import is_dataset
    from .model import Model
    from .show import render

    if is_dataset(model):
        _show_dataset(model, top)
        return
    render(Model.load(model), console, top)


def _show_dataset(path: Path, top: int) -> None:
    """A partitioned dataset's manifest: totals and its largest streams."""
    from .dataset import open_dataset

    ds = open_dataset(path)
    lengths = ds.stream_lengths()
    parts: dict[int, int] = {}
    for p in ds.partitions:
        parts[p.stream] = parts.get(p.stream, 0) + 1
    size = sum(ds.file(p).stat().st_size for p in ds.partitions if ds.file(p).exists())
    console.print(
        f"dataset {path}: {ds.requests:,} requests, {len(lengths):,} streams, "
        f"{len(ds.partitions):,} partitions, {size / 2**20:,.1f} MiB, span "
        f"{ds.span_ns / 1e9:,.3f} s, from {ds.meta.source} ({ds.meta.format})"
    )
    table = Table(title=f"Largest streams (top {top})")
    for col in ("stream", "name", "requests", "partitions"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for sid, n in sorted(lengths.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        table.add_row(str(sid), ds.meta.stream_name(sid), f"{n:,}", f"{parts[sid]:,}")
    console.print(table)


@app.command()
def synth(
    model: Annotated[Path, typer.Argument(help="Model JSON.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Synthetic trace (canonical Parquet) to write.")
    ],
    requests: Annotated[
        int | None,
        typer.Option("--requests", help="Requests in all (each stream its exact share)."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option("--duration", help="Run length instead of a request count (e.g. 60, 10m)."),
    ] = None,
    intensity: Annotated[
        float, typer.Option("--intensity", help="Rate multiplier: 2 = twice the rate.")
    ] = 1.0,
    compress: Annotated[
        float, typer.Option("--compress", help="Fluctuation phases this many times shorter.")
    ] = 1.0,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed: the same seed gives the same trace.")
    ] = 0,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="'uniform': the IOMeter-like trace without locality."),
    ] = None,
) -> None:
    """Generate a synthetic trace from a model (written as it is sampled)."""
    from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

    from .model import Model

    m = Model.load(model)
    if requests is not None and duration is not None:
        raise IotwinError("give --requests or --duration, not both")
    duration_s = parse_duration(duration, "--duration") if duration else None
    columns = (*Progress.get_default_columns()[:3], MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("synthesizing", total=None)
        n, last_ns = m.write_synth(
            output,
            requests=requests,
            duration_s=duration_s,
            intensity=intensity,
            compress=compress,
            seed=seed,
            baseline=baseline,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    console.print(f"[green]wrote[/green] {output}: {n:,} requests over {last_ns / 1e9:,.3f} s")


@app.command()
def validate(
    original: Annotated[Path, typer.Argument(help="The original trace (any format or Parquet).")],
    synthetic: Annotated[Path, typer.Argument(help="The synthetic trace to compare.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            "--tolerance",
            help="T scales every tolerance; NAME=VALUE sets one family (e.g. miss_ratio=0.05).",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Exit with status 1 when any metric is out of tolerance."),
    ] = False,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
) -> None:
    """Compare a synthetic trace with its original (seed 000 Table IV, extended)."""
    import json

    from .validate import parse_tolerances, render
    from .validate import validate as run_validate

    a = _load(original, format, stream_by)
    b = _load(synthetic, None, None)
    with err_console.status("comparing ..."):
        report = run_validate(a, b, parse_tolerances(tolerance))
    if json_out:
        print(json.dumps(report, indent=1))
    else:
        render(report, console)
    if check and not report["passed"]:
        raise typer.Exit(code=1)


def _parse_size(text: str | None) -> int | None:
    """Bytes from "1073741824", "512M", "4G", "64k" (powers of 1024)."""
    from .devices import parse_bytes

    if text is None:
        return None
    value = parse_bytes(text, "--size")
    if value <= 0:
        raise IotwinError(f"--size '{text}': must be positive")
    return value


EngineOpt = Annotated[
    str | None,
    typer.Option("--engine", help="io_uring (default where available) or threads."),
]


def _run_common(
    source,
    target: Path,
    *,
    duration: str | None,
    requests: int | None,
    intensity: float = 1.0,
    compress: float = 1.0,
    seed: int = 0,
    direct: bool | None,
    engine: str | None,
    mode: str,
    iodepth: int | None,
    max_inflight: int,
    json_out: Path | None,
    record: Path | None,
    size: str | None,
    allow_device: bool,
    destructive: bool,
    force: bool,
) -> None:
    import json

    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from . import engine as eng
    from .source import atomic_output
    from .trace import write_trace

    opts = eng.RunOptions(
        requests=requests,
        duration_s=parse_duration(duration, "--duration") if duration else None,
        intensity=intensity,
        compress=compress,
        seed=seed,
        direct=direct,
        engine=engine,
        mode=mode,
        iodepth=iodepth,
        max_inflight=max_inflight,
        size=_parse_size(size),
        allow_device=allow_device,
        destructive=destructive,
        force=force,
        record=record is not None,
    )
    fill_bar: list = []

    def on_fill(done: int, total: int) -> None:
        if not fill_bar:
            bar = Progress(
                "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                TransferSpeedColumn(), console=err_console, transient=True,
            )  # fmt: skip
            bar.start()
            fill_bar.append((bar, bar.add_task(f"writing {target}", total=total)))
        bar, task = fill_bar[0]
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    last: list = [None]
    with err_console.status("starting ...") as status:

        def on_progress(p: dict) -> None:
            status.update(eng.progress_line(p, last[0]))
            last[0] = p

        result = eng.run(
            source, target, opts, on_progress=on_progress, on_fill=on_fill,
            warn=lambda m: err_console.print(f"[yellow]warning:[/yellow] {m}"),
        )  # fmt: skip
    eng.render(result, console)
    if json_out is not None:
        with atomic_output(json_out) as tmp:
            tmp.write_text(json.dumps(eng.result_json(result), indent=1) + "\n")
    if record is not None:
        write_trace(eng.record_trace(result), record)
        console.print(f"[green]recorded[/green] {record}")
    if result["partial"]:
        raise typer.Exit(code=130)


TargetOpt = Annotated[
    Path,
    typer.Option(
        "--target",
        help="File (created, fully written), block device, or a directory of replica files "
        "(file-level models: one per traced file, same relative name and size).",
    ),
]
DurationOpt = Annotated[
    str | None, typer.Option("--duration", help="Run length (60, 10m); default 60 s for a model.")
]
RequestsOpt = Annotated[int | None, typer.Option("--requests", help="Requests in all.")]
DirectOpt = Annotated[
    bool | None,
    typer.Option(
        "--direct/--buffered",
        help="O_DIRECT (default where the filesystem supports it) or the page cache.",
    ),
]
ModeOpt = Annotated[
    str, typer.Option("--mode", help="open (the schedule) or closed (exactly --iodepth in flight).")
]
IodepthOpt = Annotated[
    int | None, typer.Option("--iodepth", help="Closed mode: requests in flight.")
]
MaxInflightOpt = Annotated[
    int, typer.Option("--max-inflight", help="Open mode: requests in flight at most.")
]
JsonOutOpt = Annotated[Path | None, typer.Option("--json", help="Write the result as JSON here.")]
RecordOpt = Annotated[
    Path | None,
    typer.Option(
        "--record",
        help="Write what was issued (issue time, service latency) as a canonical trace, in "
        "the source's addresses (the mapping onto the target is in its metadata).",
    ),
]
SizeOpt = Annotated[
    str | None, typer.Option("--size", help="Target size (bytes, 512M, 4G); default the capacity.")
]
AllowDeviceOpt = Annotated[
    bool, typer.Option("--allow-device", help="Allow a block device as the target.")
]
DestructiveOpt = Annotated[
    bool, typer.Option("--destructive", help="Allow writing to a block device.")
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Run on a device even if mounted or holding a filesystem.")
]


@app.command()
def run(
    model: Annotated[Path, typer.Argument(help="Model JSON.")],
    target: TargetOpt,
    duration: DurationOpt = None,
    requests: RequestsOpt = None,
    intensity: Annotated[float, typer.Option("--intensity", help="Rate multiplier.")] = 1.0,
    compress: Annotated[
        float, typer.Option("--compress", help="Fluctuation phases this many times shorter.")
    ] = 1.0,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed (same seed, same schedule).")
    ] = 0,
    direct: DirectOpt = None,
    engine: EngineOpt = None,
    mode: ModeOpt = "open",
    iodepth: IodepthOpt = None,
    max_inflight: MaxInflightOpt = 1024,
    json_out: JsonOutOpt = None,
    record: RecordOpt = None,
    size: SizeOpt = None,
    allow_device: AllowDeviceOpt = False,
    destructive: DestructiveOpt = False,
    force: ForceOpt = False,
) -> None:
    """Run a model as timed I/O on a file or device (open loop on an absolute schedule)."""
    from .model import Model

    _run_common(
        Model.load(model), target, duration=duration, requests=requests, intensity=intensity,
        compress=compress, seed=seed, direct=direct, engine=engine, mode=mode, iodepth=iodepth,
        max_inflight=max_inflight, json_out=json_out, record=record, size=size,
        allow_device=allow_device, destructive=destructive, force=force,
    )  # fmt: skip


@app.command()
def replay(
    trace: Annotated[Path, typer.Argument(help="Trace (any format or canonical Parquet).")],
    target: TargetOpt,
    duration: Annotated[
        str | None, typer.Option("--duration", help="Replay only this much of the trace.")
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", help="Replay only the first N requests.")
    ] = None,
    direct: DirectOpt = None,
    engine: EngineOpt = None,
    mode: ModeOpt = "open",
    iodepth: IodepthOpt = None,
    max_inflight: MaxInflightOpt = 1024,
    json_out: JsonOutOpt = None,
    record: RecordOpt = None,
    size: SizeOpt = None,
    allow_device: AllowDeviceOpt = False,
    destructive: DestructiveOpt = False,
    force: ForceOpt = False,
    format: FormatOpt = None,
) -> None:
    """Replay a trace's own addresses and timing on a file or device."""
    t = _load(trace, format, None)
    _run_common(
        t, target, duration=duration, requests=requests, direct=direct, engine=engine,
        mode=mode, iodepth=iodepth, max_inflight=max_inflight, json_out=json_out,
        record=record, size=size, allow_device=allow_device, destructive=destructive,
        force=force,
    )  # fmt: skip


@app.command()
def report(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help="Traces, model, validation/run/what-if JSON, or directories holding them "
            "(recognised by content).",
            metavar="INPUT",
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The HTML report to write (self-contained).")
    ] = Path("report.html"),
    title: Annotated[str | None, typer.Option("--title", help="The page's title.")] = None,
) -> None:
    """One self-contained HTML report: paper-style tables and figures of every input."""
    from .report import build_report

    with err_console.status("building the report ...") as status:
        result = build_report(
            inputs, output, title, progress=lambda name: status.update(f"rendering {name} ...")
        )
    for line in result.skipped:
        err_console.print(f"[yellow]skipped[/yellow] {line}", highlight=False)
    for line in result.unknown_kinds:
        err_console.print(
            f"[yellow]no report section for[/yellow] {line} (listed under Inputs only)",
            highlight=False,
        )
    console.print(
        f"[green]wrote[/green] {result.output}: {len(result.sections)} sections "
        f"({', '.join(result.sections)})",
        highlight=False,
    )
    console.print(f"open file://{result.output.resolve()}", highlight=False, soft_wrap=True)


export_app = typer.Typer(
    help="Export a model or trace for other tools (fio, DiskSpd, Vdbench).",
    no_args_is_help=True,
    invoke_without_command=True,
)
app.add_typer(export_app, name="export")


def _list_exporters() -> None:
    from .exporters import EXPORTERS

    table = Table(title="Exporters")
    table.add_column("name", style="bold")
    table.add_column("suffix")
    table.add_column("what it writes")
    for e in EXPORTERS.values():
        table.add_row(e.name, e.suffix, e.about)
    console.print(table)


@export_app.callback()
def export_options(
    ctx: typer.Context,
    list_: Annotated[bool, typer.Option("--list", help="List the exporters and exit.")] = False,
) -> None:
    """Export a model or trace for other tools (fio, DiskSpd, Vdbench)."""
    if list_:
        _list_exporters()
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())
        raise typer.Exit()


@export_app.command("list")
def export_list() -> None:
    """List the exporters."""
    _list_exporters()


def _export_tool(name: str) -> None:
    """Registers `iotwin export NAME MODEL -o FILE [...]` for one job-file exporter."""

    def command(
        model: Annotated[Path, typer.Argument(help="Model JSON.")],
        output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
        runtime: Annotated[
            str, typer.Option("--runtime", help="Run length written into the job (60, 10m).")
        ] = "60",
        directory: Annotated[
            str, typer.Option("--dir", help="Directory of the tool's target files.")
        ] = ".",
        size: Annotated[
            str | None,
            typer.Option("--size", help="Block-level models: target size (default the capacity)."),
        ] = None,
        direct: Annotated[
            bool | None,
            typer.Option(
                "--direct/--buffered",
                help="O_DIRECT or the page cache (default: direct for block-level models, "
                "buffered for file-level ones, as the application did).",
            ),
        ] = None,
        ioengine: Annotated[str, typer.Option("--ioengine", help="fio ioengine.")] = "psync",
        seed: Annotated[int, typer.Option("--seed", help="Seed of the features' trace.")] = 0,
        intensity: Annotated[float, typer.Option("--intensity", help="Rate multiplier.")] = 1.0,
        max_jobs: Annotated[
            int,
            typer.Option("--max-jobs", help="Units (files/streams) kept apart; the rest pooled."),
        ] = 64,
    ) -> None:
        from .exporters import ExportOptions, exporter
        from .model import Model

        if max_jobs < 1:
            raise IotwinError("--max-jobs must be at least 1")
        if not intensity > 0:
            raise IotwinError("--intensity must be positive")
        options = ExportOptions(
            runtime_s=max(1, round(parse_duration(runtime, "--runtime"))),
            directory=directory,
            size=_parse_size(size),
            direct=direct,
            ioengine=ioengine,
            seed=seed,
            intensity=intensity,
            max_jobs=max_jobs,
        )
        m = Model.load(model)
        with err_console.status(f"exporting to {name} ..."):
            summary = exporter(name).write(m, output, options)
        console.print(f"[green]wrote[/green] {output}: {summary}")

    from .exporters import EXPORTERS

    command.__doc__ = EXPORTERS[name].about[0].upper() + EXPORTERS[name].about[1:] + "."
    export_app.command(name)(command)


for _tool in ("fio", "diskspd", "vdbench"):
    _export_tool(_tool)


@export_app.command("fio-iolog")
def export_fio_iolog(
    source: Annotated[Path, typer.Argument(help="Model JSON or trace.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="fio iolog (v3) to write.")],
    requests: Annotated[
        int | None,
        typer.Option("--requests", help="Requests (default: the model's count, or the trace)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed, as for run.")] = 0,
    intensity: Annotated[float, typer.Option("--intensity", help="Rate multiplier.")] = 1.0,
    size: SizeOpt = None,
    direct: Annotated[
        bool,
        typer.Option("--direct/--buffered", help="Align to 4 KiB as a direct run does."),
    ] = True,
) -> None:
    """A fio iolog v3 of the schedule iotwin runs (replay with fio --read_iolog and
    --replay_redirect=PATH)."""
    from .exporters import ExportOptions, exporter
    from .model import Model
    from .trace import is_canonical_parquet

    if source.suffix == ".json" and not is_canonical_parquet(source):
        src = Model.load(source)
    else:
        src = _load(source, None, None)
    options = ExportOptions(
        requests=requests, seed=seed, intensity=intensity, size=_parse_size(size), direct=direct
    )
    with err_console.status("building the schedule ..."):
        summary = exporter("fio-iolog").write(src, output, options)
    console.print(f"[green]wrote[/green] {output}: {summary}")


@app.command()
def extrapolate(
    points: Annotated[
        list[str],
        typer.Argument(help="Traces of the application at several user counts: TRACE@USERS."),
    ],
    to: Annotated[int, typer.Option("--to", help="Users to predict the workload at.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Model JSON at --to users.")],
    fio: Annotated[
        Path | None, typer.Option("--fio", help="Also write the fio job of that model here.")
    ] = None,
    levels: Annotated[
        int | None,
        typer.Option("--levels", help="Model levels (default: 1 MiB leaves for file-level)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resampled trace.")] = 0,
    top: Annotated[int, typer.Option("--top", help="Units (files/streams) in the table.")] = 10,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the fits as JSON instead of a table.")
    ] = False,
) -> None:
    """Fit each file's (or stream's) features across user counts with linear, logarithmic,
    power and exponential forms (chosen by R², seed 004) and write the model at --to users."""
    import json

    from .extrapolate import extrapolate as run_extrapolate
    from .extrapolate import parse_point, render

    parsed = [parse_point(p) for p in points]
    with err_console.status("reading traces and fitting ..."):
        result = run_extrapolate(parsed, to, seed=seed, levels=levels)
        result.model.save(output)
    if fio is not None:
        from .exporters import ExportOptions, exporter

        exporter("fio").write(result.model, fio, ExportOptions(seed=seed))
    if json_out:
        sys.stdout.write(json.dumps(result.to_json(), allow_nan=False) + "\n")
        return
    render(result, console, top)
    m = result.model
    console.print(
        f"[green]wrote[/green] {output}: model at {to} users, {m.doc['requests']:,} requests "
        f"over {m.doc['span_ns'] / 1e9:,.1f} s, {m.doc['levels']} levels"
        + (f"; fio job {fio}" if fio else "")
    )


from .whatif.cli import sim as _sim  # noqa: E402
from .whatif.cli import whatif_app  # noqa: E402

app.command("sim")(_sim)
app.add_typer(whatif_app, name="whatif")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    err_console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM ends iotwin as Ctrl-C does, unwinding, so temporary outputs are removed (the
    default action kills at once and left e.g. a synth's partial Parquet beside the target)."""
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: user errors become one clear line and exit status 2."""
    import signal
    import warnings

    warnings.showwarning = _show_warning
    signal.signal(signal.SIGTERM, _terminate)  # `run` and `replay` install their own (drain)
    try:
        app()
    except IotwinError as exc:
        # escaped: messages quote fields like [first, last], which rich would take for markup
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]")
        sys.exit(130)
    except OSError as exc:  # the system refused (disk full, permissions): one line, no trace
        where = f"{exc.filename}: " if exc.filename else ""
        text = escape(f"{where}{exc.strerror or exc}")
        err_console.print(f"[red]error:[/red] {text}", highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
