"""Format detection: every shared trace is claimed by exactly one format."""

from __future__ import annotations

from pathlib import Path

import pytest

from iotwin.formats import FORMATS, detect
from iotwin.source import logical_name, read_head

SHARED = {
    "msr_hm0_excerpt.csv": "msr",
    "tencent_cbs_excerpt.csv.bz2": "tencent",
    "tpcc_small.disksim": "disksim",
    "arc_P3.lis.zst": "arc",
    "cloudPhysicsIO.vscsi": "vscsi",
}


@pytest.mark.parametrize(("name", "expected"), sorted(SHARED.items()))
def test_shared_trace_has_exactly_one_format(traces: Path, name: str, expected: str) -> None:
    path = traces / name
    head, logical = read_head(path), logical_name(path)
    assert [f.name for f in FORMATS.values() if f.sniff(head, logical)] == [expected]
    assert detect(path).name == expected


def test_registry_lists_every_format() -> None:
    assert list(FORMATS) == [
        "msr",
        "vscsi",
        "tencent",
        "disksim",
        "arc",
        "systor",
        "spc",
        "alibaba",
        "csv",
        "blktrace",
        "blkparse",
        "fio-iolog",
        "strace",
    ]
