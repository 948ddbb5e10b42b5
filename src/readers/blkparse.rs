//! blkparse's default text output (blktrace's blkparse_fmt.c, `process_default`).
//!
//! Every event line starts with the header `"%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s "`:
//! device `major,minor`, cpu, sequence, seconds.nanoseconds, pid, action, RWBS; queue (Q) and
//! issue (D) events then print `sector + nsectors [process]` (or just `[process]` when they
//! move no data, e.g. a flush). Lines that are not events of the chosen kind (other actions,
//! `m` messages, the per-CPU summary blocks at the end, blank lines) are skipped silently.

use crate::columns::{Columns, ParseError, Parsed, OP_FLUSH, OP_READ, OP_TRIM, OP_WRITE};
use crate::readers::blktrace::{device_id, Event, StreamBy};

const SECTOR: u64 = 512;

/// One event line's fields as text (the header and what follows it).
struct Fields<'a> {
    tokens: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn get(&self, i: usize, field: &str, line: u64) -> Result<&'a str, ParseError> {
        self.tokens
            .get(i)
            .copied()
            .ok_or_else(|| ParseError::at_line(line, field, "missing"))
    }
}

fn number<T: std::str::FromStr>(text: &str, field: &str, line: u64) -> Result<T, ParseError> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| text.parse().ok())
        .flatten()
        .ok_or_else(|| ParseError::at_line(line, field, format!("'{text}' is not a valid number")))
}

/// `major,minor` as the dev_t stream id, or None when the token is not a device at all.
fn device_token(text: &str) -> Option<(&str, &str)> {
    let (major, minor) = text.split_once(',')?;
    let is_num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (is_num(major) && is_num(minor)).then_some((major, minor))
}

/// `seconds.fraction` (blkparse prints 9 decimals) as nanoseconds.
fn timestamp_ns(text: &str, line: u64) -> Result<i64, ParseError> {
    let bad = || {
        ParseError::at_line(
            line,
            "timestamp",
            format!("'{text}' is not seconds.nanoseconds"),
        )
    };
    let (secs, frac) = text.split_once('.').ok_or_else(bad)?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(secs) || !all_digits(frac) || frac.len() > 9 {
        return Err(bad());
    }
    let secs: i64 = secs.parse().map_err(|_| bad())?;
    let frac: i64 = frac.parse::<i64>().map_err(|_| bad())? * 10i64.pow(9 - frac.len() as u32);
    secs.checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac))
        .ok_or_else(bad)
}

/// The RWBS column's flags: direction D (discard), W, R or N (none), F (flush or FUA), A, S, M.
struct Rwbs {
    direction: u8,
    flush: bool,
}

fn rwbs(text: &str, line: u64) -> Result<Rwbs, ParseError> {
    let bad = || ParseError::at_line(line, "rwbs", format!("'{text}' is not an RWBS value"));
    if !text.bytes().all(|b| b"FDWRNASM".contains(&b)) {
        return Err(bad());
    }
    let direction = text.bytes().find(|b| b"DWRN".contains(b)).ok_or_else(bad)?;
    Ok(Rwbs {
        direction,
        flush: text.contains('F'),
    })
}

/// The request of one selected event line, or None for events that move no data and are not
/// flushes (and for SCSI passthrough requests, which print a byte count, not a sector range).
fn request(f: &Fields, line: u64) -> Result<Option<(u8, u64, u32)>, ParseError> {
    let flags = rwbs(f.get(6, "rwbs", line)?, line)?;
    let after = f.tokens.get(7).copied().unwrap_or("[");
    let range = f.tokens.get(8) == Some(&"+");
    if !range {
        if after.starts_with('[') || after.starts_with('(') {
            return Ok(flags.flush.then_some((OP_FLUSH, 0, 0)));
        }
        let passthrough = number::<u32>(after, "sector", line).is_ok()
            && f.tokens
                .get(8)
                .is_some_and(|t| t.starts_with('[') || t.starts_with('('));
        if passthrough {
            return Ok(None);
        }
        return Err(ParseError::at_line(
            line,
            "sector",
            format!("expected 'sector + count', found '{after}'"),
        ));
    }
    let sector: u64 = number(after, "sector", line)?;
    let count: u64 = number(f.get(9, "nsectors", line)?, "nsectors", line)?;
    let offset = sector.checked_mul(SECTOR).ok_or_else(|| {
        ParseError::at_line(line, "sector", format!("sector {sector} out of range"))
    })?;
    let size = u32::try_from(count * SECTOR).map_err(|_| {
        ParseError::at_line(line, "nsectors", format!("{count} sectors is too large"))
    })?;
    let op = match flags.direction {
        b'D' => OP_TRIM,
        b'W' => OP_WRITE,
        b'R' => OP_READ,
        _ => {
            let msg = "no data direction (N) on a request with sectors";
            return Err(ParseError::at_line(line, "rwbs", msg));
        }
    };
    Ok(Some((op, offset, size)))
}

/// Parses one line; pushes a request when it is an event of the chosen kind.
fn parse_line(
    text: &str,
    line: u64,
    event: &str,
    stream_by: StreamBy,
    cols: &mut Columns,
) -> Result<(), ParseError> {
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    let Some((major, minor)) = tokens.first().and_then(|t| device_token(t)) else {
        return Ok(()); // blank line, summary block, anything that is not an event
    };
    let f = Fields { tokens };
    if f.get(5, "action", line)? != event {
        return Ok(());
    }
    let device = device_id(
        number(major, "device", line)?,
        number(minor, "device", line)?,
    )
    .ok_or_else(|| {
        ParseError::at_line(
            line,
            "device",
            format!("device {major},{minor} out of range"),
        )
    })?;
    number::<u32>(f.get(1, "cpu", line)?, "cpu", line)?;
    number::<u64>(f.get(2, "sequence", line)?, "sequence", line)?;
    let ts = timestamp_ns(f.get(3, "timestamp", line)?, line)?;
    let pid: u32 = number(f.get(4, "pid", line)?, "pid", line)?;
    if let Some((op, offset, size)) = request(&f, line)? {
        let stream = match stream_by {
            StreamBy::Device => device,
            StreamBy::Process => pid,
        };
        cols.push(ts, stream, op, offset, size);
    }
    Ok(())
}

/// Parses whole lines of blkparse output. `first_line` is the 1-based number of the first line
/// of `buf`, for error messages.
pub fn parse(
    buf: &[u8],
    first_line: u64,
    event: Event,
    stream_by: StreamBy,
    skip_bad: bool,
) -> Result<Parsed, ParseError> {
    let letter = match event {
        Event::Queue => "Q",
        Event::Dispatch => "D",
    };
    let mut out = Parsed {
        columns: Columns::with_capacity(buf.len() / 200),
        ..Default::default()
    };
    for (i, raw) in buf.split(|&b| b == b'\n').enumerate() {
        let line = first_line + i as u64;
        // process names are the only free text; a stray byte there must not fail the line
        let text = String::from_utf8_lossy(raw);
        if let Err(e) = parse_line(&text, line, letter, stream_by, &mut out.columns) {
            out.reject(e, skip_bad)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        2     0.000001829   697  G   W 223490 + 8 [kjournald]
  8,0    3        0     0.000007158     0  m   N cfq697 insert_request
  8,0    3        6     0.000013545   697  D   W 223490 + 8 [kjournald]
  8,16   1        7     0.000264279     0  C   W 223490 + 8 [0]
  8,16   1        8     1.250000000  1021  Q  FWS [jbd2/sda1-8]
  8,16   1        9     1.500000000  1021  Q   DS 1000 + 2048 [fstrim]

CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
";

    #[test]
    fn keeps_queue_events_with_their_operation() {
        let p = parse(SAMPLE.as_bytes(), 1, Event::Queue, StreamBy::Device, false).unwrap();
        let c = p.columns;
        assert_eq!(c.ts_ns, vec![0, 1_250_000_000, 1_500_000_000]);
        assert_eq!(c.op, vec![OP_WRITE, OP_FLUSH, OP_TRIM]);
        assert_eq!(c.offset, vec![223_490 * 512, 0, 512_000]);
        assert_eq!(c.size, vec![4096, 0, 1_048_576]);
        assert_eq!(c.stream, vec![8 << 20, (8 << 20) | 16, (8 << 20) | 16]);
    }

    #[test]
    fn dispatch_events_by_process() {
        let p = parse(
            SAMPLE.as_bytes(),
            1,
            Event::Dispatch,
            StreamBy::Process,
            false,
        )
        .unwrap();
        assert_eq!(
            (p.columns.ts_ns, p.columns.stream),
            (vec![13_545], vec![697])
        );
    }

    #[test]
    fn malformed_event_names_line_and_field() {
        let bad = "  8,0 3 1 0.000000000 697 Q W 22x490 + 8 [k]\n  8,0 3 1 0.5 697 Q W 2 + z [k]\n";
        let e = parse(bad.as_bytes(), 10, Event::Queue, StreamBy::Device, false).unwrap_err();
        assert_eq!(
            (e.location.as_str(), e.field.as_str()),
            ("line 10", "sector")
        );
        let p = parse(bad.as_bytes(), 10, Event::Queue, StreamBy::Device, true).unwrap();
        assert_eq!(p.skipped, 2);
        assert_eq!(p.skipped_examples[1].field, "nsectors");
        // the same mistake on an event of another kind is not looked at
        let other = "  8,0 3 1 0.000000000 697 G W 22x490 + 8 [k]\n";
        assert!(parse(other.as_bytes(), 1, Event::Queue, StreamBy::Device, false).is_ok());
    }

    #[test]
    fn timestamps_and_passthrough() {
        assert_eq!(timestamp_ns("12.5", 1).unwrap(), 12_500_000_000);
        assert!(timestamp_ns("1.0000000001", 1).is_err());
        let pc = "  8,0 0 3 0.1 55 D R 36 (12 00 00 00 24 00 ..) [scsi_id]\n";
        let p = parse(pc.as_bytes(), 1, Event::Dispatch, StreamBy::Device, false).unwrap();
        assert!(p.columns.is_empty());
    }
}
