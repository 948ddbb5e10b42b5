//! Linux blktrace binary traces: the per-CPU `*.blktrace.N` files (or `blkparse -d` dumps).
//!
//! Each record is a `struct blk_io_trace` (include/uapi/linux/blktrace_api.h), 48 bytes in the
//! byte order of the machine that traced, followed by `pdu_len` bytes of payload:
//! `u32 magic, u32 sequence, u64 time (ns), u64 sector, u32 bytes, u32 action, u32 pid,
//! u32 device, u32 cpu, u16 error, u16 pdu_len`. `magic` is `0x65617400 | version`; only
//! version 7 is this layout. The low 16 bits of `action` are the action code (plus the
//! `__BLK_TA_CGROUP` bit), the high 16 bits the category flags (`BLK_TC_*`).
//!
//! One request per record of the chosen kind: queued (Q) or issued to the driver (D).

use crate::columns::{Columns, ParseError, Parsed, OP_FLUSH, OP_READ, OP_TRIM, OP_WRITE};

pub const HEADER_LEN: usize = 48;
const MAGIC: u32 = 0x6561_7400;
const VERSION: u32 = 0x07;
const SECTOR: u64 = 512;

// Action codes (enum blktrace_act) and the cgroup bit that may be or-ed into them.
const TA_QUEUE: u32 = 1;
const TA_ISSUE: u32 = 7;
const TA_CGROUP: u32 = 1 << 8;
// Category flags (enum blktrace_cat), stored in the high 16 bits of `action`.
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
const TC_SHIFT: u32 = 16;

/// Which block-layer event stands for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Q: the request entered the block layer (what the application asked for).
    Queue,
    /// D: the request was issued to the driver (what the device saw).
    Dispatch,
}

impl Event {
    pub fn from_letter(s: &str) -> Option<Event> {
        match s {
            "Q" => Some(Event::Queue),
            "D" => Some(Event::Dispatch),
            _ => None,
        }
    }

    fn action_code(self) -> u32 {
        match self {
            Event::Queue => TA_QUEUE,
            Event::Dispatch => TA_ISSUE,
        }
    }
}

/// What a stream is: the traced device or the process that did the I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamBy {
    Device,
    Process,
}

/// The kernel's dev_t encoding that blktrace stores (MINORBITS = 20): used as the stream id of
/// a device, so the binary and text readers give a device the same id.
pub fn device_id(major: u32, minor: u32) -> Option<u32> {
    (major < (1 << 12) && minor < (1 << 20)).then_some((major << 20) | minor)
}

/// The canonical operation of a request from its category flags and byte count, as blkparse
/// spells it (fill_rwbs: discard, else write, else read when it moves data); a request that
/// moves no data is a flush when flagged so, and otherwise no request at all.
pub fn category_op(categories: u32, bytes: u32) -> Option<u8> {
    if bytes == 0 {
        return (categories & TC_FLUSH != 0).then_some(OP_FLUSH);
    }
    Some(if categories & TC_DISCARD != 0 {
        OP_TRIM
    } else if categories & TC_WRITE != 0 {
        OP_WRITE
    } else {
        OP_READ
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let a = [b[at], b[at + 1]];
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8], at: usize) -> u32 {
        let a = b[at..at + 4].try_into().unwrap();
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    fn u64(self, b: &[u8], at: usize) -> u64 {
        let a = b[at..at + 8].try_into().unwrap();
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// The byte order of a trace whose first record starts `head`, if it is a version 7 blktrace.
pub fn detect_endian(head: &[u8]) -> Option<Endian> {
    if head.len() < HEADER_LEN {
        return None;
    }
    [Endian::Little, Endian::Big]
        .into_iter()
        .find(|e| e.u32(head, 0) == MAGIC | VERSION)
}

/// The fields of one record's header that make a request.
struct Header {
    magic: u32,
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    pdu_len: u16,
}

impl Header {
    fn read(b: &[u8], e: Endian) -> Header {
        Header {
            magic: e.u32(b, 0),
            time: e.u64(b, 8),
            sector: e.u64(b, 16),
            bytes: e.u32(b, 24),
            action: e.u32(b, 28),
            pid: e.u32(b, 32),
            device: e.u32(b, 36),
            pdu_len: e.u16(b, 46),
        }
    }
}

/// A streaming reader: feed it the file's bytes in chunks of any size; records cut by a chunk
/// boundary are kept until the next chunk completes them.
pub struct Reader {
    endian: Endian,
    event: Event,
    stream_by: StreamBy,
    skip_bad: bool,
    carry: Vec<u8>,
    carry_at: u64, // file offset of carry[0]
    resyncing: bool,
}

impl Reader {
    pub fn new(endian: Endian, event: Event, stream_by: StreamBy, skip_bad: bool) -> Reader {
        Reader {
            endian,
            event,
            stream_by,
            skip_bad,
            carry: Vec::new(),
            carry_at: 0,
            resyncing: false,
        }
    }

    /// Parses the records completed by `chunk`; `at_end` says no bytes follow it.
    pub fn feed(&mut self, chunk: &[u8], at_end: bool) -> Result<Parsed, ParseError> {
        let joined;
        let buf: &[u8] = if self.carry.is_empty() {
            chunk
        } else {
            let mut c = std::mem::take(&mut self.carry);
            c.extend_from_slice(chunk);
            joined = c;
            &joined
        };
        let mut out = Parsed {
            columns: Columns::with_capacity(buf.len() / HEADER_LEN / 4),
            ..Default::default()
        };
        let used = self.parse_records(buf, at_end, &mut out)?;
        self.carry = buf[used..].to_vec();
        self.carry_at += used as u64;
        Ok(out)
    }

    /// Parses whole records from `buf`; returns how many bytes it used.
    fn parse_records(
        &mut self,
        buf: &[u8],
        at_end: bool,
        out: &mut Parsed,
    ) -> Result<usize, ParseError> {
        let mut pos = 0;
        loop {
            if self.resyncing {
                match self.next_magic(buf, pos) {
                    Some(at) => {
                        pos = at;
                        self.resyncing = false;
                    }
                    None if at_end => return Ok(buf.len()),
                    // keep the last bytes: a magic may straddle the chunk boundary
                    None => return Ok(pos.max(buf.len().saturating_sub(3))),
                }
            }
            let rest = &buf[pos..];
            if rest.is_empty() || (rest.len() < HEADER_LEN && !at_end) {
                return Ok(pos);
            }
            let at = self.carry_at + pos as u64;
            if rest.len() < HEADER_LEN {
                let e = truncated(at, rest.len(), HEADER_LEN);
                out.reject(e, self.skip_bad)?;
                return Ok(buf.len());
            }
            let h = Header::read(rest, self.endian);
            if let Err(e) = check_magic(h.magic, at) {
                out.reject(e, self.skip_bad)?;
                self.resyncing = true;
                pos += 1;
                continue;
            }
            let total = HEADER_LEN + h.pdu_len as usize;
            if rest.len() < total {
                if !at_end {
                    return Ok(pos);
                }
                out.reject(truncated(at, rest.len(), total), self.skip_bad)?;
                return Ok(buf.len());
            }
            if let Err(e) = self.push_request(&h, at, &mut out.columns) {
                out.reject(e, self.skip_bad)?;
            }
            pos += total;
        }
    }

    /// The offset of the next byte position, after `from`, that holds a valid magic.
    fn next_magic(&self, buf: &[u8], from: usize) -> Option<usize> {
        (from..buf.len().saturating_sub(3)).find(|&i| self.endian.u32(buf, i) == MAGIC | VERSION)
    }

    fn push_request(&self, h: &Header, at: u64, cols: &mut Columns) -> Result<(), ParseError> {
        let categories = h.action >> TC_SHIFT;
        let code = h.action & 0xffff & !TA_CGROUP;
        // Notify records (process names, messages) reuse small action codes; passthrough (PC)
        // requests are SCSI commands, not reads or writes at an offset.
        if categories & (TC_NOTIFY | TC_PC) != 0 || code != self.event.action_code() {
            return Ok(());
        }
        let Some(op) = category_op(categories, h.bytes) else {
            return Ok(());
        };
        let ts = i64::try_from(h.time).map_err(|_| {
            ParseError::at_byte(at, "time", format!("time {} ns out of range", h.time))
        })?;
        let offset = h.sector.checked_mul(SECTOR).ok_or_else(|| {
            ParseError::at_byte(at, "sector", format!("sector {} out of range", h.sector))
        })?;
        let stream = match self.stream_by {
            StreamBy::Device => h.device,
            StreamBy::Process => h.pid,
        };
        cols.push(ts, stream, op, offset, h.bytes);
        Ok(())
    }
}

fn check_magic(magic: u32, at: u64) -> Result<(), ParseError> {
    if magic & 0xffff_ff00 != MAGIC {
        return Err(ParseError::at_byte(
            at,
            "magic",
            format!("bad magic 0x{magic:08x} (a blk_io_trace record starts with 0x656174..)"),
        ));
    }
    if magic & 0xff != VERSION {
        return Err(ParseError::at_byte(
            at,
            "magic",
            format!(
                "blktrace version {} is not supported (only 7)",
                magic & 0xff
            ),
        ));
    }
    Ok(())
}

fn truncated(at: u64, have: usize, want: usize) -> ParseError {
    ParseError::at_byte(
        at,
        "record",
        format!("truncated record: {have} of {want} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TC_READ: u32 = 1;
    const TC_QUEUE: u32 = 1 << 4;
    const TC_ISSUE: u32 = 1 << 6;

    #[allow(clippy::too_many_arguments)]
    fn record(
        e: Endian,
        time: u64,
        sector: u64,
        bytes: u32,
        action: u32,
        pid: u32,
        device: u32,
        pdu: &[u8],
    ) -> Vec<u8> {
        fn put<const N: usize>(v: &mut Vec<u8>, le: [u8; N], be: [u8; N], e: Endian) {
            v.extend_from_slice(if e == Endian::Little { &le } else { &be });
        }
        let mut r = Vec::new();
        let magic = MAGIC | VERSION;
        put(&mut r, magic.to_le_bytes(), magic.to_be_bytes(), e);
        put(&mut r, 1u32.to_le_bytes(), 1u32.to_be_bytes(), e);
        put(&mut r, time.to_le_bytes(), time.to_be_bytes(), e);
        put(&mut r, sector.to_le_bytes(), sector.to_be_bytes(), e);
        for v in [bytes, action, pid, device, 0] {
            put(&mut r, v.to_le_bytes(), v.to_be_bytes(), e);
        }
        let pdu_len = pdu.len() as u16;
        put(&mut r, 0u16.to_le_bytes(), 0u16.to_be_bytes(), e);
        put(&mut r, pdu_len.to_le_bytes(), pdu_len.to_be_bytes(), e);
        r.extend_from_slice(pdu);
        r
    }

    fn queue(cat: u32) -> u32 {
        TA_QUEUE | ((TC_QUEUE | cat) << TC_SHIFT)
    }

    fn sample(e: Endian) -> Vec<u8> {
        let dev = device_id(8, 16).unwrap();
        let mut b = record(e, 1_000, 100, 4096, queue(TC_WRITE), 42, dev, &[]);
        b.extend(record(
            e,
            1_500,
            100,
            4096,
            TA_ISSUE | ((TC_ISSUE | TC_WRITE) << 16),
            42,
            dev,
            b"xyz",
        ));
        b.extend(record(e, 2_000, 8, 512, queue(TC_READ), 7, dev, &[1, 2]));
        b
    }

    #[test]
    fn reads_both_byte_orders_and_keeps_the_chosen_event() {
        for e in [Endian::Little, Endian::Big] {
            let buf = sample(e);
            assert_eq!(detect_endian(&buf), Some(e));
            let mut r = Reader::new(e, Event::Queue, StreamBy::Process, false);
            let p = r.feed(&buf, true).unwrap();
            assert_eq!(p.columns.ts_ns, vec![1_000, 2_000]);
            assert_eq!(p.columns.op, vec![OP_WRITE, OP_READ]);
            assert_eq!(p.columns.offset, vec![51_200, 4096]);
            assert_eq!(p.columns.stream, vec![42, 7]);
            let mut r = Reader::new(e, Event::Dispatch, StreamBy::Device, false);
            let p = r.feed(&buf, true).unwrap();
            assert_eq!(p.columns.ts_ns, vec![1_500]);
            assert_eq!(p.columns.stream, vec![(8 << 20) | 16]);
        }
    }

    #[test]
    fn records_split_across_chunks_are_joined() {
        let buf = sample(Endian::Little);
        let mut r = Reader::new(Endian::Little, Event::Queue, StreamBy::Device, false);
        let mut ts = Vec::new();
        for piece in buf.chunks(7) {
            let last = piece.as_ptr_range().end == buf.as_ptr_range().end;
            ts.extend(r.feed(piece, last).unwrap().columns.ts_ns);
        }
        assert_eq!(ts, vec![1_000, 2_000]);
    }

    #[test]
    fn truncated_and_bad_magic_name_their_byte_offset() {
        let mut buf = sample(Endian::Little);
        buf.truncate(buf.len() - 1);
        let mut r = Reader::new(Endian::Little, Event::Queue, StreamBy::Device, false);
        let e = r.feed(&buf, true).unwrap_err();
        assert_eq!(
            (e.location.as_str(), e.field.as_str()),
            ("byte offset 99", "record")
        );

        let mut buf = sample(Endian::Little);
        buf[99] ^= 0xff; // magic of the third record (48 + 51 bytes in)
        let mut r = Reader::new(Endian::Little, Event::Queue, StreamBy::Device, false);
        let e = r.feed(&buf, true).unwrap_err();
        assert_eq!(
            (e.location.as_str(), e.field.as_str()),
            ("byte offset 99", "magic")
        );
        let mut r = Reader::new(Endian::Little, Event::Queue, StreamBy::Device, true);
        let p = r.feed(&buf, true).unwrap();
        assert_eq!((p.columns.ts_ns.clone(), p.skipped), (vec![1_000], 1));
    }

    #[test]
    fn flush_discard_and_notify_records() {
        assert_eq!(category_op(TC_FLUSH | TC_WRITE, 0), Some(OP_FLUSH));
        assert_eq!(category_op(TC_DISCARD | TC_WRITE, 4096), Some(OP_TRIM));
        assert_eq!(category_op(TC_READ, 0), None);
        // __BLK_TN_TIMESTAMP has action code 1 like a queue event, but the notify flag
        let notify = 1 | (TC_NOTIFY << TC_SHIFT);
        let buf = record(Endian::Little, 5, 0, 4096, notify, 1, 0, b"name");
        let mut r = Reader::new(Endian::Little, Event::Queue, StreamBy::Device, false);
        assert!(r.feed(&buf, true).unwrap().columns.is_empty());
    }
}
