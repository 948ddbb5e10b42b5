"""Shared machinery for delimited-text formats read with polars.

A delimited format declares its raw fields and how they map to canonical columns. Reading
takes the fast path (polars' typed, parallel, streaming CSV scanner). Malformed input makes
that path fail or yield nulls; the slow path then re-reads the file as strings to name the
first bad line and field, or, with --skip-bad, drops and counts the bad lines.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

import polars as pl

from ..errors import TraceFormatError
from ..source import open_bytes
from .base import CANONICAL_SCHEMA, ReadOptions, Scan, TraceFormat

_EXAMPLES = 5


@dataclass(frozen=True)
class Field:
    """One raw column of a delimited format."""

    name: str
    dtype: pl.DataType  # what the fast path parses it as
    optional: bool = False  # may be empty without making the line bad


class DelimitedFormat(TraceFormat):
    """A delimited text format: subclasses declare fields and `canonical`."""

    fields: ClassVar[tuple[Field, ...]]
    # One character, or None for fields separated by runs of spaces and tabs.
    separator: ClassVar[str | None] = ","
    has_header: ClassVar[bool] = False
    # canonical column -> the raw field whose value decides it (to name the field in errors)
    blame: ClassVar[dict[str, str]] = {}

    @abstractmethod
    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        """Maps raw fields to canonical columns; invalid values become null."""

    # -- reading -----------------------------------------------------------------------
    def raw_scan(self, path: Path | bytes, typed: bool) -> pl.LazyFrame:
        """The raw fields, lazily (polars' streaming CSV scanner); untyped: all strings.

        `path` may also be the text itself (the head of a file)."""
        if self.separator is None:
            return self._whitespace_scan(path, typed)
        schema = {f.name: (f.dtype if typed else pl.String()) for f in self.fields}
        return pl.scan_csv(
            path,
            has_header=self.has_header,
            separator=self.separator,
            schema=schema,
            truncate_ragged_lines=True,
            quote_char=None,
        )

    def _whitespace_scan(self, path: Path | bytes, typed: bool) -> pl.LazyFrame:
        """Whole lines (polars wants a one-byte separator), split on runs of blanks, lazily.

        Extra fields are ignored, like `truncate_ragged_lines` does for delimited files.
        """
        lines = pl.scan_csv(
            path,
            has_header=False,
            skip_rows=1 if self.has_header else 0,
            separator="\x1f",
            schema={"__text": pl.String()},
            truncate_ragged_lines=True,
            quote_char=None,
        )
        parts = pl.col("__text").str.strip_chars().str.replace_all(r"\s+", " ").str.split(" ")
        columns = []
        for i, f in enumerate(self.fields):
            value = parts.list.get(i, null_on_oob=True)
            if typed and f.dtype != pl.String():
                value = value.cast(f.dtype, strict=False)
            columns.append(value.alias(f.name))
        return lines.select(columns)

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        if opts.skip_bad:
            return self._scan_skipping(path, opts)
        return self.canonical(self.raw_scan(path, typed=True), path, opts)

    def _string_checked(self, path: Path, opts: ReadOptions) -> tuple[pl.LazyFrame, pl.Expr]:
        """Rows as strings cast non-strictly, plus an expression naming each row's bad field."""
        raw = self.raw_scan(path, typed=False)
        first_line = 2 if self.has_header else 1
        raw = raw.with_row_index("__line", offset=first_line)
        casts = [
            pl.col(f.name).str.strip_chars().cast(f.dtype, strict=False).alias(f.name)
            for f in self.fields
            if f.dtype != pl.String()
        ]
        originals = [pl.col(f.name).alias(f"__raw_{f.name}") for f in self.fields]
        typed = raw.with_columns(originals).with_columns(casts)
        # The first field that is missing or does not parse.
        bad_field: pl.Expr = pl.lit(None, dtype=pl.String())
        for f in reversed(self.fields):
            if f.optional:
                continue
            bad_field = pl.when(pl.col(f.name).is_null()).then(pl.lit(f.name)).otherwise(bad_field)
        return typed.with_columns(bad_field.alias("__bad")), bad_field

    def _canonical_checked(self, path: Path, opts: ReadOptions) -> tuple[Scan, pl.LazyFrame]:
        """The string path: canonical columns plus `__line` and `__bad` for each row."""
        typed, _ = self._string_checked(path, opts)
        scan = self.canonical(typed, path, opts)
        keep = [*CANONICAL_SCHEMA, "__line", "__bad", *(f"__raw_{f.name}" for f in self.fields)]
        extra = [c for c in ("latency_ns", "file") if c in scan.frame.collect_schema()]
        frame = scan.frame.select(*keep, *extra)
        semantic: pl.Expr = pl.col("__bad")
        # A null latency is allowed (unknown service time) when its field is empty; a
        # value that does not convert is as bad as any.
        optional = {f.name for f in self.fields if f.optional}
        for col in reversed([*CANONICAL_SCHEMA, *extra]):
            who = self.blame.get(col, col)
            broken = pl.col(col).is_null()
            if col == "latency_ns" and who in optional:
                given = pl.col(f"__raw_{who}").str.strip_chars().str.len_chars().fill_null(0) > 0
                broken = broken & given
            semantic = (
                pl.when(pl.col("__bad").is_null() & broken).then(pl.lit(who)).otherwise(semantic)
            )
        return scan, frame.with_columns(semantic.alias("__bad"))

    def _scan_skipping(self, path: Path, opts: ReadOptions) -> Scan:
        scan, checked = self._canonical_checked(path, opts)
        extra = [c for c in ("latency_ns", "file") if c in checked.collect_schema()]
        scan.frame = checked.filter(pl.col("__bad").is_null()).select(*CANONICAL_SCHEMA, *extra)

        def count_skipped() -> None:
            bad = checked.filter(pl.col("__bad").is_not_null())
            total = bad.select(pl.len()).collect().item()
            examples = [
                self._describe(path, row) for row in bad.head(_EXAMPLES).collect().rows(named=True)
            ]
            scan.report.add(total, examples)

        previous = scan.finish

        def finish() -> None:
            if previous is not None:
                previous()
            count_skipped()

        scan.finish = finish
        return scan

    def _describe(self, path: Path, row: dict) -> str:
        field = row["__bad"]
        value = row.get(f"__raw_{field}")
        shown = "missing" if value is None else f"cannot use {value!r}"
        return str(TraceFormatError(path, f"line {row['__line']}", field, shown))

    def locate_error(self, path: Path, opts: ReadOptions) -> TraceFormatError | None:
        """The first malformed line, found by the slow string path (None if all lines parse)."""
        _, checked = self._canonical_checked(path, opts)
        try:
            bad = checked.filter(pl.col("__bad").is_not_null()).head(1).collect()
        except pl.exceptions.PolarsError:
            # polars gives up on a file whose lines have fewer fields than the format
            return self._short_line(path)
        if bad.height == 0:
            return None
        row = bad.row(0, named=True)
        field = row["__bad"]
        value = row.get(f"__raw_{field}")
        shown = "missing" if value is None else f"cannot use {value!r}"
        return TraceFormatError(path, f"line {row['__line']}", field, shown)

    def _short_line(self, path: Path) -> TraceFormatError | None:
        """The first line with fewer fields than the format's required ones."""
        required = max(i + 1 for i, f in enumerate(self.fields) if not f.optional)
        separator = None if self.separator is None else self.separator.encode()  # None: blanks
        with open_bytes(path) as f:
            for number, line in enumerate(_lines(f), start=1):
                if (number == 1 and self.has_header) or not line.strip():
                    continue
                fields = line.split(separator)
                if len(fields) < required:
                    missing = self.fields[len(fields)].name
                    return TraceFormatError(path, f"line {number}", missing, "missing")
        return None


def _lines(f: BinaryIO, block: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a binary stream, read a block at a time (bounded memory)."""
    carry = b""
    while chunk := f.read(block):
        *whole, carry = (carry + chunk).split(b"\n")
        yield from whole
    if carry:
        yield carry


def lines_match(head: bytes, pattern: re.Pattern[bytes], share: float = 0.8) -> bool:
    """Sniffing rule for line formats: the first line and most of the first 20 lines match.

    The last line of `head` may be cut, so it is left out when there are others.
    """
    lines = [line for line in head.splitlines() if line.strip()]
    if len(lines) > 1:
        lines = lines[:-1]
    lines = lines[:20]
    if not lines or not pattern.match(lines[0]):
        return False
    return sum(1 for line in lines if pattern.match(line)) >= share * len(lines)


def first_value(path: Path, fmt: DelimitedFormat, column: str) -> object:
    """The first line's value of a raw column, parsed from the file's head: scanning the
    file itself for one row costs polars ~60 ms on a large file, the head ~5 ms."""

    def first_row(source: Path | bytes) -> pl.DataFrame:
        return fmt.raw_scan(source, typed=True).select(column).head(1).collect()

    try:
        head_lines = _head_lines(path, 2 if fmt.has_header else 1)
        head = first_row(head_lines) if head_lines else first_row(path)
        if head.height == 0 and head_lines:  # only blank lines in the head
            head = first_row(path)
    except pl.exceptions.PolarsError:
        return None
    return head.item() if head.height else None


_HEAD_BYTES = 1 << 16


def _head_lines(path: Path, lines: int) -> bytes | None:
    """The file's first whole lines (at least `lines` of them) within its first 64 KiB, or
    None when they do not fit (the caller then scans the file)."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
    if len(head) == _HEAD_BYTES:
        head = head[: head.rfind(b"\n") + 1]
    return head if head.count(b"\n") >= lines else None
