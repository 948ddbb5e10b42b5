"""Errors a user can act on. The CLI prints them as one clear line, never a traceback."""

from __future__ import annotations

from pathlib import Path


class IotwinError(Exception):
    """A problem with the user's input or environment, worded for the user."""


class TraceFormatError(IotwinError):
    """A malformed record: names the file, where in it (line, record or byte offset) and the field."""

    def __init__(self, path: str | Path, location: str, field: str, message: str) -> None:
        self.path = str(path)
        self.location = location
        self.field = field
        self.message = message
        super().__init__(f"{self.path}: {location}: field '{field}': {message}")


class SkippedRecordsWarning(UserWarning):
    """Malformed records were skipped (--skip-bad): how many, with the first examples."""
