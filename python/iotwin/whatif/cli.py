"""The `iotwin sim` and `iotwin whatif ...` commands: thin wrappers over the study modules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..devices import DEFAULT_DIRTY
from ..reader_cli import ReaderOpt, SkipBadOpt, StreamByOpt, reader_options
from ..source import atomic_output

whatif_app = typer.Typer(
    help="What-if studies on the simulator: SSD caching, defragmentation, intensity, levels, stress.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)

WorkloadArg = Annotated[
    Path, typer.Argument(help="A trace (any format or canonical Parquet) or a model JSON.")
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        "-d",
        help="Device: a preset (hdd-7200, hdd-15k, ssd-sata, ssd-nvme), PRESET:field=value,..., "
        "tiered:size=16G,over=hdd-7200,ssd=ssd-sata,policy=lru,write=back, or a JSON file.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="Also write the JSON result to this file.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (same seed, same result).")]
TwinsOpt = Annotated[
    str,
    typer.Option(
        "--twins",
        help="Twins to average (seeds --seed, --seed+1, ...); 'auto': 3, 6, 12, ... until each "
        "mean's 95% confidence interval is within 2% of it (shown as ±), at most 384 and as "
        "many as keep their synthesized requests near 2 million (per level).",
    ),
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", "-f", help="Trace format; auto-detected if omitted.")
]


def load_trace_quietly(
    path: Path,
    format: str | None = None,
    stream_by: str | None = None,
    skip_bad: bool = False,
    opt: list[str] | None = None,
):
    from ..ingest import load_trace

    options = reader_options(stream_by, skip_bad, opt)
    with err_console.status(f"reading {path} ..."):
        return load_trace(path, format, options)


def emit(result: dict[str, Any], json_out: bool, out: Path | None, render) -> None:
    """Prints `result` as JSON or tables, and saves it when asked."""
    text = json.dumps(result, indent=1) + "\n"
    if out is not None:
        with atomic_output(out) as tmp:
            tmp.write_text(text)
    if json_out:
        typer.echo(text, nl=False)
    else:
        render(result, console)


def parse_auto(
    text: str, option: str, convert: Callable[[str], Any], expected: str, requirement: str
) -> Any:
    """None for "auto", else `convert(text)`, which must be positive (`requirement` says so
    in the error); bad values name the option."""
    from ..errors import IotwinError

    if text == "auto":
        return None
    try:
        value = convert(text)
    except ValueError:
        raise IotwinError(f"{option} '{text}': expected {expected} or 'auto'") from None
    if not value > 0:
        raise IotwinError(f"{option} '{text}': {requirement}")
    return value


def parse_intensity(text: str) -> float | None:
    """A positive number, or None for "auto"."""
    return parse_auto(text, "--intensity", float, "a number", "must be positive")


def sim(
    workload: WorkloadArg,
    device: DeviceOpt = "hdd-7200",
    intensity: Annotated[
        str,
        typer.Option(
            "--intensity",
            help="Arrival-rate multiplier, or 'auto': the highest rate up to 1 that keeps the "
            "device at most 70% busy in its busiest second.",
        ),
    ] = "1",
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Simulate a trace (or a model's synthetic twin) on a device, open loop."""
    from ..sim import simulate
    from . import auto_intensity, load_workload

    with err_console.status("preparing ..."):
        w = load_workload(
            workload, lambda p: load_trace_quietly(p, format, stream_by, skip_bad, opt)
        )
        trace = w.reference(seed)
        scale = parse_intensity(intensity)
        if scale is None:
            scale = auto_intensity(trace, device, seed)
    with err_console.status(f"simulating {len(trace):,} requests ..."):
        result = simulate(trace, device, scale, seed)
    doc = {
        "kind": "sim",
        "workload": w.name,
        "of": "original" if w.original is not None else "twin",
    }
    emit({**doc, **result.as_dict()}, json_out, out, render_sim)


def render_sim(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"{r['workload']} ({r['of']}) on {r['device']}", show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    rows = [
        ("intensity", f"{r['intensity']:.4g}x"),
        ("requests", f"{r['requests']:,}"),
        ("offered IOPS", _num(r["offered_iops"])),
        ("completed IOPS", _num(r["completed_iops"])),
        ("mean response", f"{r['mean_ms']:.3f} ms"),
        ("p50 / p95 / p99", f"{r['p50_ms']:.3f} / {r['p95_ms']:.3f} / {r['p99_ms']:.3f} ms"),
        ("max response", f"{r['max_ms']:.3f} ms"),
        ("utilisation", f"{r['utilisation']:.1%}"),
    ]
    if r["cache_hit_ratio"] is not None:
        rows.append(("cache hit ratio", f"{r['cache_hit_ratio']:.1%}"))
        rows.append(("dirty blocks written back", f"{r['writebacks']:,}"))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


PlotOpt = Annotated[
    Path | None, typer.Option("--plot", help="Also draw the figure to this .png/.svg/.pdf file.")
]
IntensityOpt = Annotated[
    str,
    typer.Option(
        "--intensity",
        help="Arrival-rate multiplier, or 'auto': the highest rate up to 1 that keeps the "
        "uncached device at most 70% busy in its busiest second with the original.",
    ),
]


def progress_bar():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=err_console, transient=True,
    )  # fmt: skip


def parse_twins(text: str) -> int | None:
    """A count of twins of at least 1, or None for "auto"."""
    return parse_auto(text, "--twins", int, "a whole number", "expected 1 or more")


def _scale(text: str) -> float:
    """One positive intensity of --scales."""
    from ..errors import IotwinError

    try:
        value = float(text)
    except ValueError:
        raise IotwinError(f"--scales: '{text}' is not a number") from None
    if not value > 0:
        raise IotwinError(f"--scales: '{text}' must be positive")
    return value


def _sizes(text: str) -> list[int] | None:
    from ..devices import parse_bytes
    from . import parse_list

    if text == "auto":
        return None
    return parse_list(text, "--sizes", lambda v: parse_bytes(v, "--sizes"))


@whatif_app.command("cache")
def cache_cmd(
    workload: WorkloadArg,
    sizes: Annotated[
        str,
        typer.Option(
            "--sizes",
            help="Cache sizes, e.g. 0,8G,16G,24G,32G; 'auto': 0, 1/8, 1/4, 1/2 and all of the "
            "workload's footprint.",
        ),
    ] = "auto",
    over: Annotated[str, typer.Option("--over", help="The HDD under the cache.")] = "hdd-7200",
    ssd: Annotated[str, typer.Option("--ssd", help="The SSD holding the cache.")] = "ssd-sata",
    policy: Annotated[
        str, typer.Option("--policy", help="Cache policy (see `iotwin whatif devices`).")
    ] = "lru",
    write: Annotated[str, typer.Option("--write", help="Write policy: back or through.")] = "back",
    dirty: Annotated[
        float,
        typer.Option(
            "--dirty",
            help="Write-back: share of the cache that may stay dirty; more is written back "
            "while the HDD idles (1: only what the policy evicts).",
        ),
    ] = DEFAULT_DIRTY,
    intensity: IntensityOpt = "auto",
    seed: SeedOpt = 0,
    twins: TwinsOpt = "auto",
    calibrate: Annotated[
        int,
        typer.Option(
            "--calibrate",
            help="Calibrate the twin's re-reference distances to the trace over this many "
            "rounds (iotwin fit --calibrate; 0: off).",
        ),
    ] = 0,
    bursts: Annotated[
        bool,
        typer.Option(
            "--bursts/--no-bursts",
            help="Fit the twin with each stream's burst lengths (iotwin fit --bursts).",
        ),
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    plot: PlotOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Storage speedup per SSD cache size: original, synthetic twin and uniform baseline."""
    from ..cache import policies
    from ..errors import IotwinError
    from ..figures import check_plot_path
    from . import cache, load_workload

    check_plot_path(plot)
    known = [name for name, _ in policies()]
    if policy not in known:
        raise IotwinError(f"--policy '{policy}': unknown cache policy (known: {', '.join(known)})")
    sizes_list, scale, count = _sizes(sizes), parse_intensity(intensity), parse_twins(twins)

    w = load_workload(
        workload,
        lambda p: load_trace_quietly(p, format, stream_by, skip_bad, opt),
        None,
        calibrate,
        bursts,
    )
    with err_console.status(
        "fitting the twin" + (" and calibrating it" if calibrate else "") + " ..."
    ):
        w.fit()
    with progress_bar() as bar:
        r = cache.study(w, sizes_list, over, ssd, policy, write, scale, seed, bar, count, dirty)
    emit(r, json_out, out, cache.render)
    if plot is not None:
        cache.plot(r, plot)


@whatif_app.command("intensity")
def intensity_cmd(
    workload: WorkloadArg,
    scales: Annotated[
        str,
        typer.Option(
            "--scales",
            help="Intensities to try (rate multipliers), e.g. 4,2,1,0.5; 'auto': 1/8, 1/4, "
            "1/2, 1, 2 and 4 times the busy-time estimate of saturation.",
        ),
    ] = "auto",
    device: DeviceOpt = "hdd-7200",
    seed: SeedOpt = 0,
    twins: TwinsOpt = "auto",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    plot: PlotOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Throughput and response time against intensity, naming the saturation point. A trace
    is swept as it is; a model, as the means of its twins (--twins)."""
    from ..figures import check_plot_path
    from . import intensity, load_workload, parse_list

    check_plot_path(plot)
    values = None if scales == "auto" else parse_list(scales, "--scales", _scale)
    count = parse_twins(twins)
    with err_console.status("preparing ..."):
        w = load_workload(
            workload, lambda p: load_trace_quietly(p, format, stream_by, skip_bad, opt)
        )
    with progress_bar() as bar:
        r = intensity.study(w, values, device, seed, bar, count)
    emit(r, json_out, out, intensity.render)
    if plot is not None:
        intensity.plot(r, plot)


@whatif_app.command("defrag")
def defrag_cmd(
    trace: Annotated[Path, typer.Argument(help="A file-level trace (iotwin capture, strace).")],
    device: DeviceOpt = "hdd-7200",
    intensity: IntensityOpt = "auto",
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Files as captured on disk against the same files laid out contiguously."""
    from . import defrag

    t = load_trace_quietly(trace, format, stream_by, skip_bad, opt)
    with err_console.status("simulating before and after ..."):
        r = defrag.study(t, device, parse_intensity(intensity), seed)
    emit(r, json_out, out, defrag.render)


@whatif_app.command("devices")
def devices_cmd() -> None:
    """Device presets (with their datasheet sources), device kinds and cache policies."""
    from ..devices import PRESETS
    from ..sim import registry

    t = Table(title="device presets")
    t.add_column("name", style="bold")
    t.add_column("kind")
    t.add_column("from")
    for name, p in PRESETS.items():
        t.add_row(name, p["kind"], p["source"])
    console.print(t)
    reg = registry()
    for title, rows in (("device kinds", reg["devices"]), ("cache policies", reg["policies"])):
        t = Table(title=title)
        t.add_column("name", style="bold")
        t.add_column("what")
        for name, about in rows:
            t.add_row(name, about)
        console.print(t)


@whatif_app.command("levels")
def levels_cmd(
    trace: Annotated[Path, typer.Argument(help="A trace (any format or canonical Parquet).")],
    device: DeviceOpt = "hdd-7200",
    max_levels: Annotated[int, typer.Option("--max-levels", help="Fit levels 1 to this many.")] = 8,
    intensity: Annotated[
        str,
        typer.Option(
            "--intensity",
            help="Arrival-rate multiplier for original and twins, or 'auto': the highest rate "
            "up to 1 that keeps the device at most 70% busy in its busiest second with the original.",
        ),
    ] = "auto",
    seed: SeedOpt = 0,
    twins: TwinsOpt = "auto",
    bursts: Annotated[
        bool,
        typer.Option(
            "--bursts/--no-bursts",
            help="Fit each level with its streams' burst lengths (iotwin fit --bursts).",
        ),
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    plot: PlotOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Response time of the twin per model level against the original (seed 000 Figure 6)."""
    from ..errors import IotwinError
    from . import is_model_file
    from .levels import plot as draw_plot
    from .levels import render, study

    if is_model_file(trace):
        raise IotwinError(f"{trace}: whatif levels needs a trace (it fits a model per level)")
    data = load_trace_quietly(trace, format, stream_by, skip_bad, opt)
    scale, count = parse_intensity(intensity), parse_twins(twins)
    with err_console.status(f"fitting, synthesizing and simulating levels 1-{max_levels} ..."):
        result = study(data, device, max_levels, scale, seed, twins=count, bursts=bursts)
    emit(result, json_out, out, render)
    if plot is not None:
        draw_plot(result, plot)


@whatif_app.command("stress")
def stress_cmd(
    model: Annotated[Path, typer.Argument(help="A model JSON (or a trace, fitted first).")],
    target: Annotated[
        Path | None,
        typer.Option(
            "--target",
            help="Run on real storage with the engine: a file (created, fully written) or a "
            "block device (with --allow-device, and --destructive if the model writes).",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            "-d",
            help="Run on the simulator instead: a preset, PRESET:field=value,..., tiered:..., "
            "or a JSON file.",
        ),
    ] = None,
    ramp: Annotated[
        str, typer.Option("--ramp", help="Intensities to step through, e.g. 1,2,4,8.")
    ] = "1,2,4,8",
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            help="Length of each step (5s, 1m): engine default 5 s; simulator default the "
            "model's whole length (at each intensity).",
        ),
    ] = None,
    slow: Annotated[
        list[str] | None,
        typer.Option(
            "--slow",
            help="Simulator only: inject a slow zone START:STOP:FACTOR (bytes or 10G-style "
            "sizes; service time x FACTOR for requests starting inside). Repeatable.",
        ),
    ] = None,
    depth: Annotated[
        int, typer.Option("--depth", help="Regions are the model's states at this tree depth.")
    ] = 1,
    seed: SeedOpt = 0,
    size: Annotated[
        str | None,
        typer.Option("--size", help="Engine: target size (512M, 4G); default the capacity."),
    ] = None,
    direct: Annotated[
        bool | None,
        typer.Option("--direct/--buffered", help="Engine: O_DIRECT (default where supported)."),
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="Engine: io_uring or threads.")
    ] = None,
    allow_device: Annotated[
        bool, typer.Option("--allow-device", help="Allow a block device as the target.")
    ] = False,
    destructive: Annotated[
        bool, typer.Option("--destructive", help="Allow writing to a block device.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Run on a device even if mounted or holding a filesystem."),
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    plot: PlotOpt = None,
    format: FormatOpt = None,
    stream_by: StreamByOpt = None,
    skip_bad: SkipBadOpt = False,
    opt: ReaderOpt = None,
) -> None:
    """Early problem detection: the workload at rising intensity; outlier address regions
    and the break-away intensity (seed 001 section 6.1), on real storage or the simulator."""
    from ..cli import _parse_size, parse_duration
    from ..engine import RunOptions
    from ..errors import IotwinError
    from . import load_workload
    from .stress import on_engine, on_simulator, parse_ramp, parse_slow, render
    from .stress import plot as draw_plot

    if (target is None) == (device is None):
        raise IotwinError("give --target PATH (real storage) or --device SPEC (simulator), one")
    if slow and target is not None:
        raise IotwinError(
            "--slow injects a slow zone into a simulated device: use it with --device"
        )
    steps = parse_ramp(ramp)
    seconds = parse_duration(duration, "--duration") if duration else None
    with err_console.status("preparing ...") as status:
        w = load_workload(model, lambda p: load_trace_quietly(p, format, stream_by, skip_bad, opt))
        if device is not None:
            result = on_simulator(
                w.model, device, steps, duration_s=seconds, depth=depth, seed=seed,
                slow=[parse_slow(s) for s in slow or []], progress=status.update,
            )  # fmt: skip
        else:
            opts = RunOptions(
                duration_s=seconds, seed=seed, direct=direct, engine=engine,
                size=_parse_size(size), allow_device=allow_device, destructive=destructive,
                force=force,
            )  # fmt: skip
            result = on_engine(
                w.model, target, steps, opts, depth=depth, progress=status.update,
                warn=lambda m: err_console.print(f"[yellow]warning:[/yellow] {m}"),
            )  # fmt: skip
    result["workload"] = w.name
    emit(result, json_out, out, render)
    if plot is not None:
        draw_plot(result, plot)
