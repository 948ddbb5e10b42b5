"""What the report is made of: every input file, recognised by its content.

A canonical Parquet file is a trace (its `iotwin.format` metadata says whether it is an
original, a synthetic twin or the record of a run); any other non-JSON file is read as a raw
trace. A JSON document is recognised by its `"kind"` field, or, for files written before
that field existed, by the keys only that kind has. A directory contributes every `.json`
and `.parquet` file directly inside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import IotwinError
from ..trace import Trace

MODEL_FORMAT = "iotwin-model"
RUN_RECORD_FORMAT = "iotwin-run"
SYNTH_FORMAT = "synth"
# The JSON kinds iotwin writes; a what-if kind is any "whatif-*" (docs/report.md).
JSON_KINDS = ("characterization", "validation", "run", "levels", "model", "sim")


@dataclass
class Input:
    path: Path
    kind: str  # "trace", "twin", "baseline", "record", or a JSON kind
    data: Any  # a Trace or the JSON document


@dataclass
class Bundle:
    """Everything given to `iotwin report`, by kind, in the order given."""

    inputs: list[Input] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)  # values derived once, shared

    def all(self, kind: str) -> list[Input]:
        return [i for i in self.inputs if i.kind == kind]

    def first(self, kind: str) -> Input | None:
        found = self.all(kind)
        return found[0] if found else None

    def kinds(self) -> set[str]:
        return {i.kind for i in self.inputs}

    def derived(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` computed once per bundle (a twin synthesized from the model, ...)."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]


def json_kind(doc: Any) -> str | None:
    """The kind of an iotwin JSON document, or None when it is not one."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("kind")
    if isinstance(kind, str) and (kind in JSON_KINDS or kind.startswith("whatif-")):
        return kind
    if doc.get("format") == MODEL_FORMAT:
        return "model"
    # files written before the "kind" field: recognised by their own keys
    if {"metrics", "passed", "score"} <= doc.keys():
        return "validation"
    if {"spatial_locality", "size_distribution", "streams"} <= doc.keys():
        return "characterization"
    if {"total", "timeline", "elapsed_ns"} <= doc.keys():
        return "run"
    return None


def load_json(path: Path) -> Input:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise IotwinError(f"{path}: cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, json.JSONDecodeError) else ""
        raise IotwinError(f"{path}: {where}not valid JSON") from None
    kind = json_kind(doc)
    if kind is None:
        raise IotwinError(
            f"{path}: not an iotwin JSON output (no known 'kind' field; expected one of "
            f"{', '.join(JSON_KINDS)} or whatif-*)"
        )
    return Input(path, kind, doc)


def trace_role(trace: Trace) -> str:
    fmt = trace.meta.format or ""
    if fmt == RUN_RECORD_FORMAT:
        return "record"
    if fmt == SYNTH_FORMAT:
        return "twin"
    if fmt.startswith(SYNTH_FORMAT + "-"):
        return "baseline"
    return "trace"


def load_trace_input(path: Path) -> Input:
    from ..ingest import load_trace

    trace = load_trace(path)
    return Input(path, trace_role(trace), trace)


def load_file(path: Path) -> Input:
    if path.suffix.lower() == ".json":
        return load_json(path)
    return load_trace_input(path)


def directory_files(directory: Path) -> list[Path]:
    """The report's candidates in a directory: its JSON and Parquet files, by name."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.suffix.lower() in (".json", ".parquet") and not p.name.startswith(".")
    )


def load_inputs(paths: list[Path], skipped: list[str] | None = None) -> Bundle:
    """A bundle of every input; in a directory, files that are not iotwin outputs are
    skipped (and named in `skipped`), while a file given by name must be one."""
    bundle = Bundle()
    for path in paths:
        if path.is_dir():
            for child in directory_files(path):
                try:
                    bundle.inputs.append(load_file(child))
                except IotwinError as exc:
                    if skipped is None:
                        raise
                    skipped.append(str(exc))
        elif path.exists():
            bundle.inputs.append(load_file(path))
        else:
            raise IotwinError(f"{path}: no such file or directory")
    if not bundle.inputs:
        raise IotwinError(
            "nothing to report: give a trace, a model, a validation, a run or a what-if "
            "JSON, or a directory holding them"
        )
    return bundle
