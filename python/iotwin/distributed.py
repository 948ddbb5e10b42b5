"""Fitting and characterizing a partitioned dataset (see `dataset.py`) in-process or on Dask.

Each task reads its partitions on the worker and returns their counts as bytes: a fit's
sufficient statistics (`_core.PartitionFit`) or characterize's counts
(`_core.characterize_partition`). Neighbouring results merge exactly in a tree
(`_core.merge_partitions`, `_core.merge_characterizations`) and finalisation runs once, on
the client. The same tasks run in-process without a cluster, so every way gives what
`iotwin fit` / `iotwin characterize` give the whole trace.

A fit task is one partition, or, with the re-reference extension (on by default), all
partitions of one stream: LRU stack distances need the stream's history, which a task carries
from one time partition to the next. A characterize task is one stream (its partitions read
one after another). Streams are the
parallelism then (MSR Cambridge has 36 volumes, Alibaba's collection 1,000).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from .characterize import CharacterizeSettings
from .dataset import Dataset, Partition, open_dataset, partition_columns, read_partition
from .errors import IotwinError
from .layout import layout_from_ends
from .model import (
    Model,
    check_settings,
    default_window_ns,
    describe,
    drop_window_reads,
    parse_json,
    warn_if_short,
)

if TYPE_CHECKING:
    from distributed import Client

MERGE_FANIN = 8
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 2


@dataclass(frozen=True)
class FitSettings:
    """What every task needs: the model's geometry and where files sit on the device."""

    levels: int
    fanout: int
    capacity: int
    flat: bool
    window_ns: int
    reref: bool
    bases: dict[int, int] | None = None  # file-level traces: file id -> offset on the device


@dataclass(frozen=True)
class Unit:
    """One task: consecutive partitions of one stream, fitted in time order."""

    root: str
    partitions: tuple[Partition, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    def describe(self) -> str:
        first = Path(self.root) / self.partitions[0].path
        more = len(self.partitions) - 1
        return f"{first}" + (f" (and {more} more partitions of its stream)" if more else "")


def fit_unit(unit: Unit, settings: FitSettings, lengths: dict[int, int]) -> bytes:
    """Runs on a worker: the statistics of the unit's partitions, as bytes."""
    mine = {p.stream: lengths[p.stream] for p in unit.partitions if p.stream in lengths}
    fitter = _core.PartitionFit(
        settings.levels,
        settings.fanout,
        settings.capacity,
        settings.flat,
        settings.window_ns,
        settings.reref,
        mine,
    )
    columns = ["ts_ns", "stream", "op", "offset", "size"]
    if settings.bases is not None:
        columns.append("file")
    for p in unit.partitions:
        file = Path(unit.root) / p.path
        df = read_partition(file, p, columns)
        if settings.bases is not None:
            df = _on_device(df, settings.bases)
        try:
            fitter.update(*partition_columns(df))
        except ValueError as exc:
            raise IotwinError(f"{file}: {exc}") from None
    return bytes(fitter.statistics())


def _on_device(df: Any, bases: dict[int, int]) -> Any:
    """A file-level partition's offsets moved onto the virtual device (layout.py)."""
    import polars as pl

    base = pl.col("file").replace_strict(bases, return_dtype=pl.UInt64, default=0)
    return df.with_columns((pl.col("offset") + base).alias("offset")).drop("file")


def merge_stats(*parts: bytes) -> bytes:
    """Merges neighbouring statistics (in stream, then time order)."""
    return bytes(_core.merge_partitions(list(parts)))


def plan(ds: Dataset, reref: bool) -> list[Unit]:
    """The tasks, in stream then time order (the order merges must keep)."""
    root = str(ds.root.resolve())
    if not reref:
        return [Unit(root, (p,)) for p in ds.partitions]
    by_stream: dict[int, list[Partition]] = {}
    for p in ds.partitions:
        by_stream.setdefault(p.stream, []).append(p)
    return [Unit(root, tuple(ps)) for _, ps in sorted(by_stream.items())]


def settings_for(
    ds: Dataset, levels: int, fanout: int, flat: bool, window_s: float | None, reref: bool
) -> tuple[FitSettings, list[dict[str, Any]] | None]:
    """The fit's settings as `model.fit` derives them from the whole trace."""
    layout, bases, capacity = None, None, ds.capacity
    if "file" in ds.columns:
        layout = layout_from_ends(ds.file_ends, ds.meta.files)
        bases = {int(f["id"]): int(f["base"]) for f in layout}
        last = layout[-1] if layout else {"base": 0, "size": 0}
        capacity = max(1, int(last["base"]) + int(last["size"]))
    span_ns = ds.span_ns if ds.meta.timed else 0
    window_ns = int(window_s * 1e9) if window_s else default_window_ns(span_ns)
    settings = FitSettings(levels, fanout, max(1, capacity), flat, max(1, window_ns), reref, bases)
    return settings, layout


Progress = Callable[[int], None]  # called with the rows a finished task covered


def fit_dataset(
    path: str | Path,
    levels: int = 2,
    fanout: int = 4,
    flat: bool = False,
    window_s: float | None = None,
    iat: str = "auto",
    reref: bool = True,
    cluster: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    client: Client | None = None,
    window_reads: bool = True,
) -> Model:
    """The model of a partitioned dataset: in-process, or on `cluster` ("local", "local:N" or
    a scheduler address such as "tcp://host:8786") or an open Dask `client`. The same model
    as `model.fit` of the whole trace (`window_reads` as there)."""
    check_settings(iat, levels, fanout)
    ds = open_dataset(path)
    if ds.requests == 0:
        raise IotwinError("cannot fit a model to an empty trace")
    started = time.perf_counter()
    warn_if_short(ds.requests, levels, fanout)
    settings, layout = settings_for(ds, levels, fanout, flat, window_s, reref)
    units = plan(ds, reref)
    lengths = ds.stream_lengths() if reref else {}
    task = partial(fit_unit, settings=settings, lengths=lengths)
    stats = _run(units, task, merge_stats, cluster, client, timeout_s, retries, progress)
    span_ns = ds.span_ns if ds.meta.timed else 0
    doc = parse_json(_core.finalize_partitions(stats, iat, span_ns))
    if ds.ties is not None:  # datasets split before streams' interleaving was counted lack it
        doc["ties"] = ds.ties
    if not window_reads:
        drop_window_reads(doc)
    meta = ds.meta if layout is None else replace(ds.meta, capacity=settings.capacity, files=[])
    clock_ns = ds.clock_ns if ds.meta.timed else None
    return describe(doc, meta, layout, started, iat, clock_ns)


def _run(
    units: Sequence[Unit],
    task: Callable[[Unit], bytes],
    merge: Callable[..., bytes],
    cluster: str | None,
    client: Client | None,
    timeout_s: float,
    retries: int,
    progress: Progress | None,
) -> bytes:
    """Runs `task` on every unit and merges the results in order, in-process (no cluster
    nor client) or on Dask."""
    if client is not None:
        return _run_on_dask(client, units, task, merge, retries, progress)
    if cluster is not None:
        with connect(cluster, timeout_s) as c:
            return _run_on_dask(c, units, task, merge, retries, progress)
    stats = []
    for unit in units:
        stats.append(task(unit))
        if progress is not None:
            progress(unit.rows)
    while len(stats) > 1:
        stats = [merge(*stats[i : i + MERGE_FANIN]) for i in range(0, len(stats), MERGE_FANIN)]
    return stats[0]


# -- characterize ----------------------------------------------------------------------------


def characterize_unit(unit: Unit, settings: CharacterizeSettings) -> bytes:
    """Runs on a worker: the characterization counts of one stream's partitions, read one
    after another, as bytes."""
    import numpy as np

    counter = _core.PartitionCharacterize(asdict(settings))
    for p in unit.partitions:
        file = Path(unit.root) / p.path
        df = read_partition(file, p)
        missing = [c for c in ("seq", "run_start") if c not in df.columns]
        if missing:
            raise IotwinError(
                f"{file}: no {' or '.join(missing)} column: the dataset was written by an "
                "older iotwin; ingest it again to characterize it in partitions"
            )
        latency = None
        if "latency_ns" in df.columns:
            latency = np.ascontiguousarray(df.get_column("latency_ns").to_numpy(), dtype=np.int64)
        try:
            counter.update(
                *partition_columns(df),
                latency,
                np.ascontiguousarray(df.get_column("seq").to_numpy(), dtype=np.uint64),
                np.ascontiguousarray(df.get_column("run_start").to_numpy(), dtype=np.uint8),
            )
        except ValueError as exc:
            raise IotwinError(f"{file}: {exc}") from None
    return bytes(counter.counts())


def merge_characterizations(*parts: bytes) -> bytes:
    return bytes(_core.merge_characterizations(list(parts)))


def characterize_dataset(
    path: str | Path,
    levels: int = 1,
    fanout: int = 4,
    window_s: float = 1800.0,
    relaxed_threshold: int = 64 * 1024,
    cluster: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    client: Client | None = None,
) -> dict[str, Any]:
    """`characterize` of a partitioned dataset, one task per stream, in-process or on Dask:
    the very result `characterize` gives the whole trace."""
    import polars as pl

    from .characterize import _finalise, _leaves
    from .trace import Trace

    ds = open_dataset(path)
    leaves = _leaves(levels, fanout)
    if not window_s > 0:
        raise IotwinError(f"--window must be positive, got {window_s} s")
    if relaxed_threshold < 0:
        raise IotwinError(f"--relaxed-threshold must be >= 0, got {relaxed_threshold}")
    settings = CharacterizeSettings(
        leaves=leaves,
        capacity=int(ds.meta.capacity or 0),
        window_ns=max(1, round(window_s * 1e9)),
        relaxed_threshold=int(relaxed_threshold),
        first_ts=ds.first_ts,
        last_ts=ds.last_ts,
        max_end=ds.max_end,
        max_stream=max(ds.stream_lengths(), default=0),
    )
    if ds.requests == 0:  # nothing to split: the whole (empty) trace
        from .characterize import characterize

        return characterize(ds.to_trace(), levels=levels, fanout=fanout, window_s=window_s,
                            relaxed_threshold=relaxed_threshold)  # fmt: skip
    units = plan(ds, reref=True)  # one task per stream
    task = partial(characterize_unit, settings=settings)
    counts = _run(
        units, task, merge_characterizations, cluster, client, timeout_s, retries, progress
    )
    try:
        summary = _core.finalize_characterization(counts)
    except ValueError as exc:
        raise IotwinError(f"{ds.root}: {exc}") from None
    shape = Trace(pl.DataFrame(schema={c: pl.Int64 for c in ds.columns}), ds.meta)
    return _finalise(shape, summary, levels, fanout, relaxed_threshold)


# -- Dask ----------------------------------------------------------------------------------------


class connect:
    """A Dask client for "local[:N]" (a LocalCluster of N worker processes, one thread each)
    or a scheduler address; closes what it started. Errors name the address."""

    def __init__(self, spec: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self.cluster: Any = None
        self.client: Client | None = None

    def __enter__(self) -> Client:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise IotwinError(
                "--cluster needs dask.distributed: pip install 'iotwin[distributed]'"
            ) from None
        spec = self.spec.strip()
        if spec == "local" or spec.startswith("local:"):
            workers = _local_workers(spec)
            try:
                self.cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port: never clash with another
                    silence_logs=50,
                )
            except (OSError, RuntimeError, TimeoutError) as exc:
                raise IotwinError(
                    f"--cluster {spec}: cannot start {workers} local Dask workers: "
                    f"{_first_line(exc)}"
                ) from None
            self.client = Client(self.cluster)
            return self.client
        if "://" not in spec:
            raise IotwinError(
                f"--cluster '{spec}': expected local, local:N or a scheduler address "
                "(tcp://HOST:PORT)"
            )
        try:
            self.client = Client(spec, timeout=self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise IotwinError(
                f"cannot reach the Dask scheduler at {spec} within {self.timeout_s:g} s "
                f"({_first_line(exc)}); is `dask scheduler` running there?"
            ) from None
        return self.client

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _local_workers(spec: str) -> int:
    import os

    if spec == "local":
        return max(1, os.cpu_count() or 1)
    try:
        workers = int(spec.removeprefix("local:"))
    except ValueError:
        workers = 0
    if workers < 1:
        raise IotwinError(f"--cluster '{spec}': expected local:N with N >= 1 workers")
    return workers


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _run_on_dask(
    client: Client,
    units: Sequence[Unit],
    task: Callable[[Unit], bytes],
    merge: Callable[..., bytes],
    retries: int,
    progress: Progress | None,
) -> bytes:
    """Submits a task per unit and a merge tree over them; reports tasks as they finish."""
    from distributed import as_completed

    futures = [client.submit(task, unit, retries=retries, pure=False) for unit in units]
    unit_of = {f.key: u for f, u in zip(futures, units, strict=True)}
    level = list(futures)
    while len(level) > 1:
        level = [
            client.submit(merge, *level[i : i + MERGE_FANIN], retries=retries, pure=False)
            for i in range(0, len(level), MERGE_FANIN)
        ]
    try:
        for done in as_completed(futures):
            if done.status == "error":
                _raise_task_error(done, unit_of[done.key])
            if progress is not None:
                progress(unit_of[done.key].rows)
        return level[0].result()
    except BaseException:
        client.cancel(futures)  # the cluster stops working for a run that has failed
        raise


def _raise_task_error(future: Any, unit: Unit) -> None:
    exc = future.exception()
    if isinstance(exc, IotwinError):
        raise IotwinError(str(exc)) from None
    raise IotwinError(
        f"{unit.describe()}: the task failed on the cluster after its retries: "
        f"{type(exc).__name__}: {_first_line(exc)}"
    ) from None
