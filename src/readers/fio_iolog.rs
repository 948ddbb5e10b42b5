//! fio I/O logs (`write_iolog` / `read_iolog`), versions 2 and 3, read as fio's iolog.c does.
//!
//! The first line is `fio version 2 iolog` or `fio version 3 iolog`. Then, one per line,
//! v2: `filename action [offset length]`, v3: `timestamp_us filename action [offset length]`.
//! File actions (add, open, close) are not requests; read, write, sync, datasync and trim are;
//! `wait` is v2's only clock.
//!
//! Timing follows fio's replay (iolog.c), so a trace means what fio would replay:
//!
//! v2: a wait line stores its offset as the delay, and replay sleeps until that many
//! *milliseconds since fio started* (absolute, not relative to the previous request):
//! ```c
//! if (rw == DDIR_WAIT) {
//!     ipo->delay = offset;
//! ...
//! } else {
//!     elapsed = mtime_since_genesis();
//!     if (ipo->delay > elapsed)
//!         usec_sleep(td, (ipo->delay - elapsed) * 1000);
//! }
//! ```
//! so with instant service a request is issued at the largest wait value seen before it (0
//! before the first wait).
//!
//! v3: timestamps are microseconds (written with `utime_since_now(&td->io_log_start_time)`);
//! each line waits its distance from the previous line's timestamp, never a negative one:
//! ```c
//! if (!*last_ttime || td->o.no_stall || time < *last_ttime)
//!     return 0;
//! else if (td->o.replay_time_scale == 100)
//!     return time - *last_ttime;
//! ```
//! and every line, file actions and ignored v3 `wait` lines included, moves `last_ttime`. We
//! take "no previous line" for fio's `!*last_ttime` (fio's 0 doubles as "unset", which would
//! also drop the gap after a line stamped 0; a log's own timestamps do not mean that).

use crate::columns::{Columns, ParseError, Parsed, OP_FLUSH, OP_READ, OP_TRIM, OP_WRITE};
use rustc_hash::FxHashMap;

const V2_HEADER: &[u8] = b"fio version 2 iolog";
const V3_HEADER: &[u8] = b"fio version 3 iolog";
const MS: i64 = 1_000_000;
const US: i64 = 1_000;

/// The iolog version told by the first line, if the text is an iolog at all (fio compares the
/// first line's start with strncmp).
pub fn detect_version(head: &[u8]) -> Option<u8> {
    if head.starts_with(V2_HEADER) {
        Some(2)
    } else if head.starts_with(V3_HEADER) {
        Some(3)
    } else {
        None
    }
}

enum Action {
    File,
    Wait,
    Request(u8),
}

fn action(name: &str) -> Option<Action> {
    Some(match name {
        "add" | "open" | "close" => Action::File,
        "wait" => Action::Wait,
        "read" => Action::Request(OP_READ),
        "write" => Action::Request(OP_WRITE),
        "sync" | "datasync" => Action::Request(OP_FLUSH),
        "trim" => Action::Request(OP_TRIM),
        _ => return None,
    })
}

fn number<T: std::str::FromStr>(text: &str, field: &str, line: u64) -> Result<T, ParseError> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| text.parse().ok())
        .flatten()
        .ok_or_else(|| ParseError::at_line(line, field, format!("'{text}' is not a valid number")))
}

/// One request line: its file is also its stream.
struct Request {
    ts_ns: i64,
    file: u32,
    op: u8,
    offset: u64,
    size: u32,
}

/// A streaming reader: feed it whole lines in order; it keeps the version, the replay clock
/// and the file table between chunks.
#[derive(Default)]
pub struct Reader {
    version: Option<u8>,
    skip_bad: bool,
    clock_ns: i64,
    last_ttime: Option<u64>,
    files: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Reader {
    pub fn new(skip_bad: bool) -> Reader {
        Reader {
            skip_bad,
            ..Default::default()
        }
    }

    /// File names by id (ids are given in order of first mention).
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// Parses whole lines; `first_line` is the 1-based number of the first line of `buf`.
    pub fn feed(&mut self, buf: &[u8], first_line: u64) -> Result<Parsed, ParseError> {
        let mut out = Parsed {
            columns: Columns::with_capacity(buf.len() / 24),
            ..Default::default()
        };
        let mut files = Vec::with_capacity(out.columns.ts_ns.capacity());
        for (i, raw) in buf.split(|&b| b == b'\n').enumerate() {
            let line = first_line + i as u64;
            if line == 1 {
                self.version = Some(detect_version(raw).ok_or_else(|| {
                    ParseError::at_line(
                        1,
                        "version",
                        "expected 'fio version 2 iolog' or 'fio version 3 iolog'",
                    )
                })?);
                continue;
            }
            let text = String::from_utf8_lossy(raw);
            match self.parse_line(&text, line) {
                Ok(Some(r)) => {
                    out.columns.push(r.ts_ns, r.file, r.op, r.offset, r.size);
                    files.push(r.file);
                }
                Ok(None) => {}
                Err(e) => out.reject(e, self.skip_bad)?,
            }
        }
        out.columns.file = Some(files);
        Ok(out)
    }

    fn parse_line(&mut self, text: &str, line: u64) -> Result<Option<Request>, ParseError> {
        let mut tokens: Vec<&str> = text.split_ascii_whitespace().collect();
        if tokens.is_empty() {
            return Ok(None);
        }
        if self.version == Some(3) {
            let ttime: u64 = number(tokens[0], "timestamp", line)?;
            self.advance_v3(ttime, line)?;
            tokens.remove(0);
        }
        let name = tokens
            .get(1)
            .ok_or_else(|| ParseError::at_line(line, "action", "missing"))?;
        let act = action(name).ok_or_else(|| {
            ParseError::at_line(line, "action", format!("unknown action '{name}'"))
        })?;
        match act {
            Action::File => {
                self.file_id(tokens[0]);
                return Ok(None);
            }
            // fio skips wait in v3 ("wait" is not allowed with version 3)
            Action::Wait if self.version == Some(3) => return Ok(None),
            _ => {}
        }
        let offset: u64 = number(
            tokens
                .get(2)
                .ok_or_else(|| ParseError::at_line(line, "offset", "missing"))?,
            "offset",
            line,
        )?;
        let length: u32 = number(
            tokens
                .get(3)
                .ok_or_else(|| ParseError::at_line(line, "length", "missing"))?,
            "length",
            line,
        )?;
        match act {
            Action::Wait => {
                let until = i64::try_from(offset)
                    .ok()
                    .and_then(|ms| ms.checked_mul(MS))
                    .ok_or_else(|| ParseError::at_line(line, "offset", "wait out of range"))?;
                self.clock_ns = self.clock_ns.max(until);
                Ok(None)
            }
            Action::Request(op) => {
                let file = self.file_id(tokens[0]);
                Ok(Some(Request {
                    ts_ns: self.clock_ns,
                    file,
                    op,
                    offset,
                    size: length,
                }))
            }
            Action::File => Ok(None),
        }
    }

    fn advance_v3(&mut self, ttime: u64, line: u64) -> Result<(), ParseError> {
        let delay = match self.last_ttime {
            Some(last) if ttime >= last => ttime - last,
            _ => 0,
        };
        self.last_ttime = Some(ttime);
        self.clock_ns = i64::try_from(delay)
            .ok()
            .and_then(|us| us.checked_mul(US))
            .and_then(|ns| self.clock_ns.checked_add(ns))
            .ok_or_else(|| ParseError::at_line(line, "timestamp", "timestamp out of range"))?;
        Ok(())
    }

    fn file_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.files.len() as u32;
        self.files.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_waits_are_absolute_milliseconds() {
        let log = "fio version 2 iolog\n/a add\n/a open\n/a read 0 4096\n/a wait 5 0\n\
                   /b write 8192 512\n/a wait 3 0\n/a sync 0 0\n/a wait 10 0\n/b trim 0 65536\n";
        let mut r = Reader::new(false);
        let p = r.feed(log.as_bytes(), 1).unwrap();
        let c = &p.columns;
        assert_eq!(c.ts_ns, vec![0, 5 * MS, 5 * MS, 10 * MS]);
        assert_eq!(c.op, vec![OP_READ, OP_WRITE, OP_FLUSH, OP_TRIM]);
        assert_eq!(c.file, Some(vec![0, 1, 0, 1]));
        assert_eq!(c.stream, vec![0, 1, 0, 1]);
        assert_eq!(r.files(), ["/a", "/b"]);
    }

    #[test]
    fn v3_timestamps_are_microseconds_between_lines() {
        let log = "fio version 3 iolog\n0 /a add\n10 /a open\n110 /a read 0 4096\n\
                   90 /a write 4096 4096\n150 /a wait 99 0\n200 /a write 0 512\n";
        let mut r = Reader::new(false);
        let c = r.feed(log.as_bytes(), 1).unwrap().columns;
        // 110 us; 90 is earlier than 110: no wait; 150 and 200 follow 90: +60 and +50 us
        assert_eq!(c.ts_ns, vec![110_000, 110_000, 220_000]);
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let log = "fio version 2 iolog\n/a read x 4096\n/a jump 0 1\n/a read 0\n";
        let e = Reader::new(false).feed(log.as_bytes(), 1).unwrap_err();
        assert_eq!(
            (e.location.as_str(), e.field.as_str()),
            ("line 2", "offset")
        );
        let p = Reader::new(true).feed(log.as_bytes(), 1).unwrap();
        let fields: Vec<&str> = p
            .skipped_examples
            .iter()
            .map(|e| e.field.as_str())
            .collect();
        assert_eq!(fields, ["offset", "action", "length"]);
        let e = Reader::new(false)
            .feed(b"fio version 1 iolog\n", 1)
            .unwrap_err();
        assert_eq!(e.field, "version");
    }
}
