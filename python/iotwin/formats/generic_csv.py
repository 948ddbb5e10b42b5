"""Generic delimited text: any CSV-like trace, given a column map and units with --opt.

Settings (KEY=VALUE, `--opt` on the command line, `ReadOptions.extra` in Python):

- `ts`, `offset`, `size`, `op` (required) and `stream`, `latency` (optional): the column,
  by header name or 0-based index;
- `ts_unit`, `latency_unit`: s, ms, us, ns or ticks100ns (default s; latency defaults to
  ts_unit). Times may have a fractional part;
- `offset_unit`, `size_unit`: bytes, sectors (512), blocks4k or a number of bytes (default
  bytes);
- `read`, `write`: comma-separated op values (default R,r,Read,read,READ and
  W,w,Write,write,WRITE); any other value makes the line bad;
- `header`: yes or no (default yes when a column is named, no when all are indices);
- `sep`: one character, `tab`, or `space` for runs of blanks (default `,`).

A numeric stream column (judged by its first value) gives the stream ids; text is given
ids as it is read (not necessarily in order of appearance) and keeps its text as the
stream's name. Never auto-detected: any text could be CSV.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl

from ..errors import IotwinError, TraceFormatError
from .base import ReadOptions, Scan
from .delimited import DelimitedFormat, Field, first_value
from .units import (
    SIZE_UNITS,
    TIME_UNITS,
    as_stream,
    decimal_ns,
    op_from,
    scaled_offset,
    scaled_size,
    whole_units,
)

REQUIRED = ("ts", "offset", "size", "op")
OPTIONAL = ("stream", "latency")
SETTINGS = (
    *REQUIRED,
    *OPTIONAL,
    "ts_unit",
    "latency_unit",
    "offset_unit",
    "size_unit",
    "read",
    "write",
    "header",
    "sep",
)
_SEPARATORS: dict[str, str | None] = {"tab": "\t", "\\t": "\t", "space": None, "whitespace": None}
_DEFAULT_READS = "R,r,Read,read,READ"
_DEFAULT_WRITES = "W,w,Write,write,WRITE"


class CsvFormat(DelimitedFormat):
    """The registered format: builds a `MappedCsv` for each file from its options."""

    name = "csv"
    title = "Generic delimited text with a column map (--opt ts=.. offset=.. size=.. op=..)"
    stream_keys = ("device", "volume", "thread", "process")
    fields = ()

    def sniff(self, head: bytes, name: str) -> bool:
        return False  # any text could be CSV: only ever used when named with --format

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        return MappedCsv(path, opts).scan(path, opts)

    def locate_error(self, path: Path, opts: ReadOptions) -> TraceFormatError | None:
        return MappedCsv(path, opts).locate_error(path, opts)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        return MappedCsv(path, opts).canonical(raw, path, opts)


@dataclass(frozen=True)
class Mapping:
    """The validated settings: which column (index) plays which role, and the units."""

    columns: dict[str, int]  # role -> column index
    ts_unit: int
    latency_unit: int
    offset_unit: int
    size_unit: int
    reads: list[str]
    writes: list[str]


class MappedCsv(DelimitedFormat):
    """One file's layout: its columns, separator and header, known once the file is opened."""

    name = "csv"
    title = CsvFormat.title
    stream_keys = CsvFormat.stream_keys
    fields: ClassVar[tuple[Field, ...]] = ()

    def __init__(self, path: Path, opts: ReadOptions) -> None:
        settings = _settings(opts)
        self.separator = _separator(settings.get("sep", ","))  # type: ignore[misc]
        first = _first_line(path)
        names = _split(first, self.separator)
        refs = {role: settings[role] for role in (*REQUIRED, *OPTIONAL) if role in settings}
        header = settings.get("header", "auto")
        if header not in ("yes", "no", "auto"):
            raise IotwinError(f"csv option header={header!r}: use yes or no")
        if header == "auto":
            header = "no" if all(ref.isdigit() for ref in refs.values()) else "yes"
        self.has_header = header == "yes"  # type: ignore[misc]
        names = _unique(names) if self.has_header else [f"column {i}" for i in range(len(names))]
        columns = {role: _column(ref, names, self.has_header, role) for role, ref in refs.items()}
        mapped = set(columns.values())
        self.fields = tuple(  # type: ignore[misc]
            Field(n, pl.String(), optional=i not in mapped) for i, n in enumerate(names)
        )
        self.blame = {  # type: ignore[misc]
            canonical: names[columns[role]]
            for canonical, role in _CANONICAL_ROLE.items()
            if role in columns
        }
        ts_unit = _time_unit(settings.get("ts_unit", "s"), "ts_unit")
        self.mapping = Mapping(
            columns=columns,
            ts_unit=ts_unit,
            latency_unit=_time_unit(settings["latency_unit"], "latency_unit")
            if "latency_unit" in settings
            else ts_unit,
            offset_unit=_size_unit(settings.get("offset_unit", "bytes"), "offset_unit"),
            size_unit=_size_unit(settings.get("size_unit", "bytes"), "size_unit"),
            reads=_values(settings.get("read", _DEFAULT_READS)),
            writes=_values(settings.get("write", _DEFAULT_WRITES)),
        )

    def sniff(self, head: bytes, name: str) -> bool:
        return False

    def column(self, role: str) -> pl.Expr:
        return pl.col(self.fields[self.mapping.columns[role]].name)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        m = self.mapping
        ts_name = self.fields[m.columns["ts"]].name
        # Count from the first record's whole units: FILETIME ticks in ns overflow int64.
        origin = whole_units(_text(first_value(path, self, ts_name)))
        columns = {
            "ts_ns": decimal_ns(self.column("ts"), m.ts_unit, origin),
            "op": op_from(self.column("op").str.strip_chars(), m.reads, m.writes),
            "offset": scaled_offset(_integer(self.column("offset")), m.offset_unit),
            "size": scaled_size(_integer(self.column("size")), m.size_unit),
        }
        if "latency" in m.columns:
            columns["latency_ns"] = decimal_ns(self.column("latency"), m.latency_unit)
        stream_name = None
        if "stream" not in m.columns:
            columns["stream"] = pl.lit(0, pl.UInt32())
        elif _integer_text(first_value(path, self, self.fields[m.columns["stream"]].name)):
            columns["stream"] = as_stream(_integer(self.column("stream")))
        else:
            names = pl.Categories.random()
            text = self.column("stream").str.strip_chars()
            columns["stream"] = text.cast(pl.Categorical(names)).to_physical()

            by_id: dict[int, str] = {}

            def stream_name(stream: int) -> str:
                # Categories are all known only once the frame has been read: look them up late.
                if stream not in by_id:
                    by_id.update({v: k for k, v in names.to_dict().items()})
                return by_id.get(stream, str(stream))

        frame = raw.with_columns(**columns)
        return Scan(frame=frame, stream_by=self.stream_key(path, opts), stream_name=stream_name)


_CANONICAL_ROLE = {
    "ts_ns": "ts",
    "stream": "stream",
    "op": "op",
    "offset": "offset",
    "size": "size",
    "latency_ns": "latency",
}


def _settings(opts: ReadOptions) -> dict[str, str]:
    unknown = sorted(set(opts.extra) - set(SETTINGS))
    if unknown:
        raise IotwinError(
            f"csv: unknown option(s) {', '.join(unknown)}; known: {', '.join(SETTINGS)}"
        )
    missing = [key for key in REQUIRED if not opts.extra.get(key, "").strip()]
    if missing:
        keys = ", ".join(missing)
        raise IotwinError(
            f"csv: missing column mapping {keys}: give each with --opt KEY=COLUMN "
            "(a header name or 0-based index)"
        )
    return {k: v.strip() for k, v in opts.extra.items()}


def _separator(text: str) -> str | None:
    if text in _SEPARATORS:
        return _SEPARATORS[text]
    if len(text) != 1:
        raise IotwinError(f"csv option sep={text!r}: use one character, tab or space")
    return text


def _first_line(path: Path) -> str:
    with open(path, "rb") as f:
        line = f.readline()
    if not line.strip():
        raise TraceFormatError(path, "line 1", "header", "empty: the file has no columns")
    return line.decode("utf-8", errors="replace").rstrip("\r\n")


def _split(line: str, separator: str | None) -> list[str]:
    parts = line.split() if separator is None else line.split(separator)
    return [p.strip() for p in parts]


def _unique(names: list[str]) -> list[str]:
    """Header names made unique and non-empty (polars needs distinct column names)."""
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        candidate = name or f"column {i}"
        while candidate in seen:
            candidate += "_"
        seen.add(candidate)
        out.append(candidate)
    return out


def _column(ref: str, names: list[str], header: bool, role: str) -> int:
    if header and ref in names:
        return names.index(ref)
    if ref.isdigit() and int(ref) < len(names):
        return int(ref)
    where = f"the header ({', '.join(names)})" if header else f"{len(names)} columns"
    raise IotwinError(f"csv option {role}={ref}: no such column in {where}")


def _time_unit(text: str, key: str) -> int:
    if text not in TIME_UNITS:
        raise IotwinError(f"csv option {key}={text}: use one of {', '.join(TIME_UNITS)}")
    return TIME_UNITS[text]


def _size_unit(text: str, key: str) -> int:
    if text in SIZE_UNITS:
        return SIZE_UNITS[text]
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise IotwinError(
        f"csv option {key}={text}: use one of {', '.join(SIZE_UNITS)} or a number of bytes"
    )


def _values(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _integer(text: pl.Expr) -> pl.Expr:
    return text.str.strip_chars().cast(pl.Int64, strict=False)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _integer_text(value: object) -> bool:
    return isinstance(value, str) and value.strip().isdigit()
