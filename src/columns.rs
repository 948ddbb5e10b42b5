//! The canonical trace as columns (design.md, "Units and the canonical trace").

/// Operation codes of the canonical trace.
pub const OP_READ: u8 = 0;
pub const OP_WRITE: u8 = 1;
pub const OP_FLUSH: u8 = 2;
pub const OP_TRIM: u8 = 3;

/// Canonical trace columns as filled by a reader. Times are nanoseconds (absolute, in the
/// format's own epoch: the Python side makes them relative to the first request), offsets and
/// sizes bytes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Columns {
    pub ts_ns: Vec<i64>,
    pub stream: Vec<u32>,
    pub op: Vec<u8>,
    pub offset: Vec<u64>,
    pub size: Vec<u32>,
    /// Service time, for formats that carry it.
    pub latency_ns: Option<Vec<i64>>,
    /// File id, for file-level traces.
    pub file: Option<Vec<u32>>,
}

impl Columns {
    pub fn with_capacity(n: usize) -> Self {
        Columns {
            ts_ns: Vec::with_capacity(n),
            stream: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            offset: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            latency_ns: None,
            file: None,
        }
    }

    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }

    /// Appends one request (the optional columns are pushed separately by readers that have them).
    pub fn push(&mut self, ts_ns: i64, stream: u32, op: u8, offset: u64, size: u32) {
        self.ts_ns.push(ts_ns);
        self.stream.push(stream);
        self.op.push(op);
        self.offset.push(offset);
        self.size.push(size);
    }
}

/// Where a record went wrong: readers report it, Python turns it into a message that names the
/// file. `location` is "line N", "record N" or "byte offset N".
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub location: String,
    pub field: String,
    pub message: String,
}

impl ParseError {
    pub fn at_line(line: u64, field: &str, message: impl Into<String>) -> Self {
        ParseError {
            location: format!("line {line}"),
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub fn at_record(record: u64, field: &str, message: impl Into<String>) -> Self {
        ParseError {
            location: format!("record {record}"),
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub fn at_byte(offset: u64, field: &str, message: impl Into<String>) -> Self {
        ParseError {
            location: format!("byte offset {offset}"),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A parsed chunk: the records, the malformed ones skipped (with `skip_bad`), and the first
/// few of those for the report.
#[derive(Debug, Default)]
pub struct Parsed {
    pub columns: Columns,
    pub skipped: u64,
    pub skipped_examples: Vec<ParseError>,
}

impl Parsed {
    /// Records a bad record: an error unless the caller asked to skip bad records.
    pub fn reject(&mut self, err: ParseError, skip_bad: bool) -> Result<(), ParseError> {
        if !skip_bad {
            return Err(err);
        }
        self.skipped += 1;
        if self.skipped_examples.len() < 5 {
            self.skipped_examples.push(err);
        }
        Ok(())
    }
}
