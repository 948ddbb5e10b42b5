"""Command-line options that say how to read a raw trace, shared by every command that reads
one (`iotwin fit`, `validate`, `whatif ...`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .errors import IotwinError
from .formats import ReadOptions

StreamByOpt = Annotated[
    str | None,
    typer.Option(
        "--stream-by",
        help="What a stream is: thread, process, device, volume or file (format-dependent).",
    ),
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad", help="Skip malformed records, count them and report them.")
]
ReaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--opt", help="Format-specific reader setting KEY=VALUE (e.g. events=D for blkparse)."
    ),
]


def reader_options(stream_by: str | None, skip_bad: bool, opt: list[str] | None) -> ReadOptions:
    """The reader settings the options give; a --opt without KEY=VALUE is an error."""
    extra: dict[str, str] = {}
    for item in opt or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise IotwinError(f"--opt '{item}': expected KEY=VALUE")
        extra[key.strip()] = value.strip()
    return ReadOptions(stream_by=stream_by, skip_bad=skip_bad, extra=extra)
