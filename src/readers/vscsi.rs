//! VMware vscsiStats binary traces (CloudPhysics), versions 1 and 2.
//!
//! v1 records are 32 bytes: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`;
//! v2 records are 40 bytes: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`.
//! Little-endian; `ver >> 8` is the version, `ts` and `rt` are microseconds, `lbn` is in
//! 512-byte sectors, `len` in bytes, `cmd` a SCSI opcode.

use crate::columns::{ParseError, Parsed, OP_FLUSH, OP_READ, OP_TRIM, OP_WRITE};

const SECTOR: u64 = 512;
const US: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn record_size(self) -> usize {
        match self {
            Version::V1 => 32,
            Version::V2 => 40,
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The version told by the first record, if it is a vscsi trace at all.
pub fn detect_version(head: &[u8]) -> Option<Version> {
    if head.len() >= 40 && u16_at(head, 2) >> 8 == 2 && is_io_opcode(u16_at(head, 0)) {
        return Some(Version::V2);
    }
    if head.len() >= 32 && u16_at(head, 14) >> 8 == 1 && is_io_opcode(u16_at(head, 12)) {
        return Some(Version::V1);
    }
    None
}

/// The canonical operation of a SCSI opcode; None for commands that move no data.
pub fn opcode_op(cmd: u16) -> Option<u8> {
    match cmd {
        0x28 | 0x08 | 0x88 | 0xA8 => Some(OP_READ),
        0x2A | 0x0A | 0x8A | 0xAA => Some(OP_WRITE),
        0x35 | 0x91 => Some(OP_FLUSH), // SYNCHRONIZE CACHE (10) and (16)
        0x42 => Some(OP_TRIM),         // UNMAP
        _ => None,
    }
}

fn is_io_opcode(cmd: u16) -> bool {
    matches!(opcode_op(cmd), Some(OP_READ) | Some(OP_WRITE))
}

/// Parses whole records from `buf`. `first_record` is the 1-based number of the first record
/// in `buf` and `byte_base` its byte offset in the file, for error messages. A trailing
/// partial record is an error naming its byte offset: the caller passes whole records, and the
/// file's end is the only place one can be cut.
pub fn parse(
    buf: &[u8],
    version: Version,
    first_record: u64,
    byte_base: u64,
    skip_bad: bool,
) -> Result<Parsed, ParseError> {
    let rs = version.record_size();
    let whole = buf.len() / rs;
    let mut out = Parsed {
        columns: crate::columns::Columns::with_capacity(whole),
        ..Default::default()
    };
    let mut latency = Vec::with_capacity(if version == Version::V2 { whole } else { 0 });
    let (ver_at, cmd_at, len_at, lbn_at, ts_at) = match version {
        Version::V1 => (14, 12, 4, 16, 24),
        Version::V2 => (2, 0, 8, 16, 24),
    };
    let want_ver = match version {
        Version::V1 => 1,
        Version::V2 => 2,
    };
    for (i, rec) in buf.chunks_exact(rs).enumerate() {
        let number = first_record + i as u64;
        if u16_at(rec, ver_at) >> 8 != want_ver {
            let e = ParseError::at_record(
                number,
                "ver",
                format!(
                    "version {} in a v{want_ver} trace",
                    u16_at(rec, ver_at) >> 8
                ),
            );
            out.reject(e, skip_bad)?;
            continue;
        }
        let cmd = u16_at(rec, cmd_at);
        let Some(op) = opcode_op(cmd) else {
            continue; // INQUIRY, TEST UNIT READY, ...: no data moved, not a request
        };
        let ts = u64_at(rec, ts_at);
        if ts > (i64::MAX / US) as u64 {
            out.reject(
                ParseError::at_record(number, "ts", format!("timestamp {ts} us out of range")),
                skip_bad,
            )?;
            continue;
        }
        let offset = u64_at(rec, lbn_at).checked_mul(SECTOR);
        let Some(offset) = offset else {
            out.reject(
                ParseError::at_record(number, "lbn", "block number out of range"),
                skip_bad,
            )?;
            continue;
        };
        out.columns
            .push(ts as i64 * US, 0, op, offset, u32_at(rec, len_at));
        if version == Version::V2 {
            latency.push((u64_at(rec, 32) as i64).saturating_mul(US));
        }
    }
    let tail = buf.len() - whole * rs;
    if tail != 0 {
        let at = byte_base + (whole * rs) as u64;
        return Err(ParseError::at_byte(
            at,
            "record",
            format!("truncated record: {tail} of {rs} bytes"),
        ));
    }
    if version == Version::V2 {
        out.columns.latency_ns = Some(latency);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1_record(cmd: u16, len: u32, lbn: u64, ts: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&7u32.to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        r.extend_from_slice(&1u32.to_le_bytes());
        r.extend_from_slice(&cmd.to_le_bytes());
        r.extend_from_slice(&0x0100u16.to_le_bytes());
        r.extend_from_slice(&lbn.to_le_bytes());
        r.extend_from_slice(&ts.to_le_bytes());
        r
    }

    #[test]
    fn parses_v1_records() {
        let mut buf = v1_record(0x2A, 4096, 10, 1_000);
        buf.extend(v1_record(0x28, 512, 3, 2_500));
        assert_eq!(detect_version(&buf), Some(Version::V1));
        let p = parse(&buf, Version::V1, 1, 0, false).unwrap();
        assert_eq!(p.columns.op, vec![OP_WRITE, OP_READ]);
        assert_eq!(p.columns.offset, vec![5120, 1536]);
        assert_eq!(p.columns.size, vec![4096, 512]);
        assert_eq!(p.columns.ts_ns, vec![1_000_000, 2_500_000]);
    }

    #[test]
    fn truncated_record_names_byte_offset() {
        let mut buf = v1_record(0x2A, 4096, 10, 1_000);
        buf.extend_from_slice(&[0u8; 5]);
        let e = parse(&buf, Version::V1, 1, 64, false).unwrap_err();
        assert_eq!(e.location, "byte offset 96");
    }
}
