"""Simulated devices: named presets with the datasheet figures they come from, and the spec
syntax of `--device` (a preset, a preset with overrides, a tiered stack, or a JSON file).

    hdd-7200                       a preset
    hdd-7200:capacity=4T           a preset with a field overridden
    tiered:size=16G,over=hdd-7200,ssd=ssd-sata,policy=lru,write=back,dirty=0.5
    mydisk.json                    {"kind": "hdd", "rpm": 5400, ...}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import IotwinError

# Each preset: the figures the simulator needs, and where they come from. Figures marked
# "assumed" are not on the datasheet; they are typical of the drive's class.
PRESETS: dict[str, dict[str, Any]] = {
    "hdd-7200": {
        "kind": "hdd",
        "rpm": 7200,
        "average_seek_ms": 8.5,
        "track_to_track_ms": 1.0,
        "full_stroke_ms": 18.0,
        "media_mb_per_s": 175,
        "interface_mb_per_s": 600,
        "read_ahead_kib": 1024,
        "capacity_bytes": 4_000_000_000_000,
        "source": "Seagate Constellation ES.3 ST4000NM0033 datasheet: 7,200 rpm (4.16 ms average "
        "latency), average read seek 8.5 ms, 175 MB/s sustained transfer, SATA 6 Gb/s, 4 TB; "
        "track-to-track 1 ms, full stroke 18 ms and 1 MiB read-ahead assumed",
    },
    "hdd-15k": {
        "kind": "hdd",
        "rpm": 15000,
        "average_seek_ms": 3.4,
        "track_to_track_ms": 0.2,
        "full_stroke_ms": 6.6,
        "media_mb_per_s": 204,
        "interface_mb_per_s": 600,
        "read_ahead_kib": 1024,
        "capacity_bytes": 600_000_000_000,
        "source": "Seagate Cheetah 15K.7 ST3600057SS datasheet: 15,000 rpm (2.0 ms average latency), "
        "average read seek 3.4 ms, track-to-track read seek 0.2 ms, sustained transfer up to "
        "204 MB/s, SAS 6 Gb/s, 600 GB; full stroke 6.6 ms and 1 MiB read-ahead assumed",
    },
    "ssd-sata": {
        "kind": "ssd",
        "channels": 8,
        "read_us": 81.6,
        "write_us": 88.9,
        "capacity_bytes": 500_000_000_000,
        "source": "Samsung 860 EVO 500 GB datasheet: 4 KiB random read 98,000 IOPS and write "
        "90,000 IOPS at queue depth 32; page latency = 8 channels / IOPS (sequential bandwidth "
        "follows as 8 x 4 KiB / latency, 400 MB/s against the datasheet's 550 MB/s)",
    },
    "ssd-nvme": {
        "kind": "ssd",
        "channels": 32,
        "read_us": 53.3,
        "write_us": 58.2,
        "capacity_bytes": 1_000_000_000_000,
        "source": "Samsung 970 EVO Plus 1 TB datasheet: 4 KiB random read 600,000 IOPS and write "
        "550,000 IOPS; page latency = 32 channels / IOPS (sequential bandwidth follows as "
        "2.5 GB/s against the datasheet's 3.5 GB/s)",
    },
}

# Share of a write-back cache that may stay dirty while the HDD idles (the simulator's
# default too: src/sim/device/tiered.rs); dm-writecache's high watermark.
DEFAULT_DIRTY = 0.5
TIERED_DEFAULTS = {
    "over": "hdd-7200",
    "ssd": "ssd-sata",
    "policy": "lru",
    "write": "back",
    "dirty": str(DEFAULT_DIRTY),
}
SIZE_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str, what: str) -> int:
    """Bytes from "1073741824", "512M", "4G", "64k" (powers of 1024); errors name `what`."""
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = SIZE_UNITS.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in SIZE_UNITS else raw
    try:
        value = int(float(number) * scale)
    except ValueError:
        raise IotwinError(f"{what} '{text}': expected bytes like 1073741824, 512M or 4G") from None
    if value < 0:
        raise IotwinError(f"{what} '{text}': must not be negative")
    return value


def _options(text: str, spec: str) -> dict[str, str]:
    out = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise IotwinError(f"--device '{spec}': '{item}' is not key=value")
        out[key.strip()] = value.strip()
    return out


def _preset(name: str, spec: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise IotwinError(
            f"--device '{spec}': unknown device '{name}' (presets: {', '.join(PRESETS)}, "
            "tiered:..., or a JSON file)"
        )
    return dict(PRESETS[name])


def _override(device: dict[str, Any], options: dict[str, str], spec: str) -> dict[str, Any]:
    for key, value in options.items():
        field = "capacity_bytes" if key == "capacity" else key
        if field not in device or field in ("kind", "source"):
            known = ", ".join(k for k in device if k not in ("kind", "source"))
            raise IotwinError(f"--device '{spec}': field '{key}' is not one of: capacity, {known}")
        if field == "capacity_bytes":
            device[field] = parse_bytes(value, f"--device '{spec}' capacity")
            continue
        try:
            device[field] = float(value)
        except ValueError:
            raise IotwinError(
                f"--device '{spec}': field '{key}' needs a number, got '{value}'"
            ) from None
    return device


def tiered(
    size: int,
    over: str = "hdd-7200",
    ssd: str = "ssd-sata",
    policy: str = "lru",
    write: str = "back",
    dirty: str | float = DEFAULT_DIRTY,
) -> dict[str, Any]:
    """An SSD cache of `size` bytes over an HDD preset (or spec). With write-back, `dirty`
    is the share of the cache that may stay dirty: more is written back while the HDD idles
    (50%, dm-writecache's high watermark; bcache's writeback_percent is 10%)."""
    if write not in ("back", "through"):
        raise IotwinError(f"tiered write policy must be 'back' or 'through', got '{write}'")
    try:
        dirty_target = float(dirty)
    except ValueError:
        dirty_target = -1.0
    if not 0.0 <= dirty_target <= 1.0:
        raise IotwinError(
            f"dirty share (tiered dirty=, whatif cache --dirty) must be from 0 to 1, got '{dirty}'"
        )
    hdd, flash = resolve(over), resolve(ssd)
    if hdd["kind"] != "hdd" or flash["kind"] != "ssd":
        raise IotwinError(f"tiered needs an hdd under (got {over}) and an ssd cache (got {ssd})")
    return {
        "kind": "tiered",
        "cache_bytes": size,
        "policy": policy,
        "write_policy": write,
        "dirty_target": dirty_target,
        "ssd": flash,
        "hdd": hdd,
    }


def resolve(spec: str | dict[str, Any]) -> dict[str, Any]:
    """The device dict for a `--device` spec."""
    if isinstance(spec, dict):
        return spec
    name, _, rest = spec.partition(":")
    if name == "tiered":
        opts = {**TIERED_DEFAULTS, **_options(rest, spec)}
        unknown = set(opts) - {*TIERED_DEFAULTS, "size"}
        if unknown or "size" not in opts:
            raise IotwinError(
                f"--device '{spec}': tiered takes size= (required), over=, ssd=, policy=, "
                "write=, dirty="
            )
        size = parse_bytes(opts.pop("size"), f"--device '{spec}' size")
        return tiered(size, **opts)
    if name.endswith(".json") and not rest:
        return _load_json(Path(name))
    return _override(_preset(name, spec), _options(rest, spec), spec)


def _load_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise IotwinError(f"{path}: cannot read device spec: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise IotwinError(f"{path}: line {e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(doc, dict) or "kind" not in doc:
        raise IotwinError(
            f"{path}: field 'kind': a device spec is an object with a kind (hdd, ssd, tiered)"
        )
    return doc


def describe(device: dict[str, Any]) -> str:
    """One line naming a device, for tables."""
    if device["kind"] == "tiered":
        write = device["write_policy"]
        # JSON specs from before the cleaning may lack the share: the simulator's default
        cleaned = f" (cleaned above {device.get('dirty_target', DEFAULT_DIRTY):.0%} dirty)"
        return (
            f"{device['cache_bytes'] / 2**30:g} GiB {device['policy']} write-{write} "
            f"SSD cache{cleaned if write == 'back' else ''} over "
            f"{device['hdd'].get('rpm', '?'):g} rpm HDD"
        )
    if device["kind"] == "hdd":
        return f"{device['rpm']:g} rpm HDD, {device['average_seek_ms']:g} ms average seek"
    return f"SSD, {device['channels']:g} channels, {device['read_us']:g} us 4 KiB read"
