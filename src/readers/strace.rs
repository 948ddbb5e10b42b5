//! strace text (`strace -f -tt -T -y`, or `-ttt`, with or without `-o FILE`) to file-level
//! requests.
//!
//! The parser is stateful across chunks: it keeps each process's file-descriptor table and
//! each open file description's position, so `read`/`write`/`readv`/`writev` get offsets, and
//! the calls left `<unfinished ...>` until their `<... NAME resumed>` line.
//!
//! Rules (the Python module `iotwin.formats.strace` documents them for users):
//! - A line is `[PREFIX] TIME EVENT`, PREFIX `[pid N] ` (stderr output with several tracees)
//!   or `N ` (`-o FILE` with `-f`) or nothing (the first tracee); TIME `HH:MM:SS[.frac]`
//!   (`-t`/`-tt`, wrapping past midnight) or `SECONDS.frac` (`-ttt`).
//! - Files are the fds whose `-y` annotation is an absolute path outside /proc and /sys;
//!   sockets, pipes and anonymous inodes are ignored. File ids are given in order of first
//!   request.
//! - A request's size is the call's return value; failed calls and transfers of 0 bytes (end
//!   of file) are not requests. Positions advance by the return value; `lseek` sets the
//!   position to its return value; `pread*`/`pwrite*` use their offset and leave it alone.
//! - Threads and processes follow `clone`/`clone3`/`fork`/`vfork`: `CLONE_THREAD` joins the
//!   parent's process, `CLONE_FILES` shares its descriptor table, otherwise the table is
//!   copied (descriptions, hence positions, stay shared as after a real fork).

use crate::columns::{ParseError, Parsed, OP_FLUSH, OP_READ, OP_WRITE};
use rustc_hash::FxHashMap;

const NS: i64 = 1_000_000_000;
const DAY_NS: i64 = 86_400 * NS;

/// What a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamBy {
    Thread,
    Process,
    File,
}

impl StreamBy {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "thread" => Some(StreamBy::Thread),
            "process" => Some(StreamBy::Process),
            "file" => Some(StreamBy::File),
            _ => None,
        }
    }
}

/// A call left `<unfinished ...>`: its start time and the arguments printed so far.
#[derive(Debug, Clone)]
struct Pending {
    ts_ns: i64,
    name: Vec<u8>,
    args: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Task {
    tid: Option<u32>,      // None: the first tracee before its pid is known (no prefix)
    group: usize,          // task index of the process leader
    table: usize,          // index of its fd table
    parent: Option<usize>, // set while the clone that made it has not returned
    pending: Option<Pending>,
    did_io: bool,
}

#[derive(Debug, Clone, Copy)]
struct Description {
    path: u32,
    pos: u64,
    append: bool,
    refs: u32,
}

/// Open file descriptions, shared by dup'd and inherited fds; freed when no fd refers to them.
#[derive(Debug, Default)]
struct Descriptions {
    slots: Vec<Description>,
    free: Vec<usize>,
}

impl Descriptions {
    fn add(&mut self, path: u32, append: bool) -> usize {
        let d = Description {
            path,
            pos: 0,
            append,
            refs: 1,
        };
        if let Some(i) = self.free.pop() {
            self.slots[i] = d;
            i
        } else {
            self.slots.push(d);
            self.slots.len() - 1
        }
    }

    fn retain(&mut self, i: usize) {
        self.slots[i].refs += 1;
    }

    fn release(&mut self, i: usize) {
        let d = &mut self.slots[i];
        d.refs -= 1;
        if d.refs == 0 {
            self.free.push(i);
        }
    }
}

/// Interned paths, their file ids (given at first request) and the highest end seen.
#[derive(Debug, Default)]
struct Paths {
    ids: FxHashMap<Vec<u8>, u32>,
    names: Vec<Vec<u8>>,
    file_id: Vec<Option<u32>>,
    end: Vec<u64>,
    files: Vec<u32>, // file id -> path id
}

impl Paths {
    fn intern(&mut self, path: &[u8]) -> u32 {
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(path.to_vec(), id);
        self.names.push(path.to_vec());
        self.file_id.push(None);
        self.end.push(0);
        id
    }

    fn file(&mut self, path: u32) -> u32 {
        let slot = &mut self.file_id[path as usize];
        *slot.get_or_insert_with(|| {
            self.files.push(path);
            (self.files.len() - 1) as u32
        })
    }
}

/// Time of day (`-tt`) wraps at midnight: a jump back of more than 12 hours starts a new day.
#[derive(Debug, Default)]
struct Clock {
    last: Option<i64>,
    day_base: i64,
}

impl Clock {
    fn time_of_day(&mut self, tod: i64) -> i64 {
        let mut t = tod + self.day_base;
        if let Some(last) = self.last {
            if t < last - DAY_NS / 2 {
                self.day_base += DAY_NS;
                t += DAY_NS;
            }
        }
        self.last = Some(t);
        t
    }
}

/// One strace line, split.
struct Line<'a> {
    pid: Option<u32>,
    ts_ns: i64,
    time_of_day: bool, // -t/-tt: wraps at midnight
    event: &'a [u8],
}

/// A call's outcome: the return value (with its `-y` path for fds), or failure.
enum Ret<'a> {
    Ok(i64, Option<&'a [u8]>),
    Failed,
}

/// A complete call: name, arguments, outcome and service time.
struct Call<'a> {
    name: &'a [u8],
    args: Vec<&'a [u8]>,
    ret: Ret<'a>,
    latency_ns: Option<i64>,
}

/// The strace reader's state, carried from one chunk to the next.
#[derive(Debug)]
pub struct Parser {
    stream_by: StreamBy,
    latency: bool,
    skip_bad: bool,
    clock: Clock,
    tasks: Vec<Task>,
    by_tid: FxHashMap<u32, usize>,
    initial: Option<usize>,
    cloning: Vec<usize>, // tasks with a clone-family call in progress, oldest first
    tables: Vec<FxHashMap<i32, usize>>,
    descs: Descriptions,
    paths: Paths,
    streams: FxHashMap<usize, u32>, // task or group index -> stream id
    stream_tasks: Vec<usize>,
}

fn is_io(name: &[u8]) -> bool {
    matches!(
        name,
        b"read"
            | b"write"
            | b"readv"
            | b"writev"
            | b"pread64"
            | b"pwrite64"
            | b"preadv"
            | b"pwritev"
            | b"preadv2"
            | b"pwritev2"
            | b"lseek"
            | b"fsync"
            | b"fdatasync"
            | b"open"
            | b"openat"
            | b"creat"
            | b"close"
            | b"dup"
            | b"dup2"
            | b"dup3"
            | b"fcntl"
            | b"fcntl64"
    )
}

fn is_clone(name: &[u8]) -> bool {
    matches!(name, b"clone" | b"clone3" | b"fork" | b"vfork")
}

fn op_of(name: &[u8]) -> u8 {
    if name.starts_with(b"read") || name.starts_with(b"pread") {
        OP_READ
    } else {
        OP_WRITE
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')))
}

fn parse_i64(b: &[u8]) -> Option<i64> {
    match b.strip_prefix(b"-") {
        Some(rest) => parse_u64(rest).map(|n| -(n as i64)),
        None => parse_u64(b).and_then(|n| i64::try_from(n).ok()),
    }
}

/// `SECONDS.frac` as nanoseconds (up to 9 fraction digits).
fn seconds_ns(b: &[u8]) -> Option<i64> {
    let (whole, frac) = match b.iter().position(|&c| c == b'.') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &b""[..]),
    };
    if frac.len() > 9 || (!frac.is_empty() && parse_u64(frac).is_none()) {
        return None;
    }
    let secs = i64::try_from(parse_u64(whole)?).ok()?;
    let mut nanos = frac.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0'));
    for _ in frac.len()..9 {
        nanos *= 10;
    }
    secs.checked_mul(NS)?.checked_add(nanos)
}

/// `HH:MM:SS[.frac]` as nanoseconds since midnight.
fn time_of_day_ns(b: &[u8]) -> Option<i64> {
    let mut parts = b.splitn(3, |&c| c == b':');
    let h = parse_u64(parts.next()?)?;
    let m = parse_u64(parts.next()?)?;
    let s = seconds_ns(parts.next()?)?;
    if h > 23 || m > 59 || s >= 61 * NS {
        return None;
    }
    Some(((h * 60 + m) * 60) as i64 * NS + s)
}

/// Splits off the first whitespace-separated token.
fn token(b: &[u8]) -> (&[u8], &[u8]) {
    let b = b.trim_ascii_start();
    let end = b
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(b.len());
    (&b[..end], b[end..].trim_ascii_start())
}

/// The pid prefix, timestamp and event of a line.
fn split_line(line: &[u8], number: u64) -> Result<Line<'_>, ParseError> {
    let mut rest = line;
    let mut pid = None;
    if let Some(after) = rest.strip_prefix(b"[pid") {
        let close = after.iter().position(|&c| c == b']');
        let n = close.and_then(|i| parse_u64(trim(&after[..i])));
        match (n, close) {
            (Some(n), Some(i)) if n <= u64::from(u32::MAX) => {
                pid = Some(n as u32);
                rest = &after[i + 1..];
            }
            _ => {
                return Err(ParseError::at_line(
                    number,
                    "pid",
                    "malformed [pid N] prefix",
                ))
            }
        }
    } else {
        let (first, after) = token(rest);
        if !first.is_empty() && first.iter().all(u8::is_ascii_digit) {
            let n = parse_u64(first).filter(|&n| n <= u64::from(u32::MAX));
            let Some(n) = n else {
                return Err(ParseError::at_line(
                    number,
                    "pid",
                    format!("bad pid '{}'", text(first)),
                ));
            };
            pid = Some(n as u32);
            rest = after;
        }
    }
    let (stamp, event) = token(rest);
    let time_of_day = stamp.contains(&b':');
    let ts = if time_of_day {
        time_of_day_ns(stamp)
    } else {
        seconds_ns(stamp).filter(|_| stamp.contains(&b'.'))
    };
    let Some(ts_ns) = ts else {
        let what = if stamp.is_empty() { "missing" } else { "bad" };
        return Err(ParseError::at_line(
            number,
            "time",
            format!(
                "{what} timestamp '{}' (record with strace -tt or -ttt)",
                text(stamp)
            ),
        ));
    };
    Ok(Line {
        pid,
        ts_ns,
        time_of_day,
        event,
    })
}

/// Index just past a quoted string starting at `i` (backslash escapes honoured).
fn skip_string(s: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Index just past a `-y` annotation `<...>` starting at `i` (nested for `-yy`).
fn skip_annotation(s: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0;
    while i < s.len() {
        match s[i] {
            b'<' => depth += 1,
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'\\' => i += 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits an argument list (the text right after `name(`) at its top-level commas; returns
/// the arguments and the text after the closing parenthesis.
fn split_args(s: &[u8]) -> Option<(Vec<&[u8]>, &[u8])> {
    let mut args = Vec::new();
    let (mut depth, mut start, mut i) = (0usize, 0usize, 0usize);
    while i < s.len() {
        match s[i] {
            b'"' => {
                i = skip_string(s, i)?;
                continue;
            }
            b'<' if i > 0 && s[i - 1].is_ascii_alphanumeric() => {
                i = skip_annotation(s, i)?;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' if depth == 0 => {
                let last = trim(&s[start..i]);
                if !(last.is_empty() && args.is_empty()) {
                    args.push(last);
                }
                return Some((args, &s[i + 1..]));
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                args.push(trim(&s[start..i]));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `3</path>` as (3, Some("/path")); a bare `3` as (3, None). strace 6 marks an fd whose
/// file was unlinked `3</path>(deleted)`.
fn split_fd(arg: &[u8]) -> Option<(i64, Option<&[u8]>)> {
    let Some(open) = arg.iter().position(|&c| c == b'<') else {
        return Some((parse_i64(arg)?, None));
    };
    let end = skip_annotation(arg, open)?;
    if !matches!(&arg[end..], b"" | b"(deleted)" | b" (deleted)") {
        return None;
    }
    Some((parse_i64(&arg[..open])?, Some(&arg[open + 1..end - 1])))
}

/// The path of a `-y` annotation if it names a file: absolute, not under /proc or /sys.
fn file_path(annotation: Option<&[u8]>) -> Option<&[u8]> {
    let path = annotation?;
    // -yy appends device details in a nested <...>; a deleted file gets " (deleted)".
    let path = match path.iter().position(|&c| c == b'<') {
        Some(i) => &path[..i],
        None => path,
    };
    let path = path.strip_suffix(b" (deleted)").unwrap_or(path);
    let pseudo = path.starts_with(b"/proc/") || path.starts_with(b"/sys/");
    (path.starts_with(b"/") && !pseudo).then_some(path)
}

/// The return value and service time after the closing parenthesis: ` = RET [...] [<lat>]`.
fn parse_outcome(rest: &[u8], number: u64) -> Result<(Ret<'_>, Option<i64>), ParseError> {
    let bad = |what: &str| ParseError::at_line(number, "return", what.to_string());
    let rest = trim(rest);
    let rest = rest
        .strip_prefix(b"=")
        .ok_or_else(|| bad("no '= RET' after the call"))?;
    let rest = rest.trim_ascii_start();
    let latency = rest
        .strip_suffix(b">")
        .and_then(|r| r.iter().rposition(|&c| c == b'<').map(|i| &r[i + 1..]))
        .and_then(seconds_ns);
    let (value, _) = token(rest);
    if value.starts_with(b"?") || value.starts_with(b"-") {
        return Ok((Ret::Failed, latency));
    }
    let (digits, annotation) = match value.iter().position(|&c| c == b'<') {
        Some(i) => {
            let end = skip_annotation(rest, i).ok_or_else(|| bad("unterminated <path>"))?;
            (&value[..i], Some(&rest[i + 1..end - 1]))
        }
        None => (value, None),
    };
    let n = if let Some(hex) = digits.strip_prefix(b"0x") {
        std::str::from_utf8(hex)
            .ok()
            .and_then(|h| i64::from_str_radix(h, 16).ok())
    } else {
        parse_i64(digits)
    };
    let n = n.ok_or_else(|| bad(&format!("bad return value '{}'", text(value))))?;
    Ok((Ret::Ok(n, annotation), latency))
}

impl Parser {
    pub fn new(stream_by: StreamBy, latency: bool, skip_bad: bool) -> Self {
        Parser {
            stream_by,
            latency,
            skip_bad,
            clock: Clock::default(),
            tasks: Vec::new(),
            by_tid: FxHashMap::default(),
            initial: None,
            cloning: Vec::new(),
            tables: Vec::new(),
            descs: Descriptions::default(),
            paths: Paths::default(),
            streams: FxHashMap::default(),
            stream_tasks: Vec::new(),
        }
    }

    /// Parses whole lines; `first_line` is the 1-based number of the chunk's first line.
    pub fn parse(&mut self, buf: &[u8], first_line: u64) -> Result<Parsed, ParseError> {
        let mut out = Parsed::default();
        out.columns.file = Some(Vec::new());
        if self.latency {
            out.columns.latency_ns = Some(Vec::new());
        }
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        if body.is_empty() {
            return Ok(out);
        }
        for (i, raw) in body.split(|&c| c == b'\n').enumerate() {
            let number = first_line + i as u64;
            if let Err(e) = self.line(raw, number, &mut out) {
                out.reject(e, self.skip_bad)?;
            }
        }
        Ok(out)
    }

    /// The path of each file id.
    pub fn files(&self) -> Vec<String> {
        let p = &self.paths;
        p.files
            .iter()
            .map(|&id| text(&p.names[id as usize]))
            .collect()
    }

    /// The name of each stream id: `tid N`, `pid N` or the file's path.
    pub fn stream_names(&self) -> Vec<String> {
        if self.stream_by == StreamBy::File {
            return self.files();
        }
        let prefix = if self.stream_by == StreamBy::Thread {
            "tid"
        } else {
            "pid"
        };
        let name = |t: &Task| match t.tid {
            Some(tid) => format!("{prefix} {tid}"),
            None => format!("{prefix} ? (first tracee)"),
        };
        self.stream_tasks
            .iter()
            .map(|&t| name(&self.tasks[t]))
            .collect()
    }

    /// (threads, processes) that issued at least one request.
    pub fn counts(&self) -> (usize, usize) {
        let busy: Vec<&Task> = self.tasks.iter().filter(|t| t.did_io).collect();
        let mut groups: Vec<usize> = busy.iter().map(|t| t.group).collect();
        groups.sort_unstable();
        groups.dedup();
        (busy.len(), groups.len())
    }

    fn line(&mut self, raw: &[u8], number: u64, out: &mut Parsed) -> Result<(), ParseError> {
        let raw = trim(raw);
        if raw.is_empty() || raw.starts_with(b"strace: ") {
            return Ok(());
        }
        let line = split_line(raw, number)?;
        let event = line.event;
        if event.starts_with(b"---") || event.starts_with(b"+++") {
            return Ok(()); // signals and exits
        }
        let ts_ns = if line.time_of_day {
            self.clock.time_of_day(line.ts_ns)
        } else {
            line.ts_ns
        };
        if let Some(after) = event.strip_prefix(b"<... ") {
            let Some(end) = after.windows(9).position(|w| w == b" resumed>") else {
                return Err(ParseError::at_line(
                    number,
                    "syscall",
                    "malformed '<... NAME resumed>'",
                ));
            };
            let name = &after[..end];
            if !(is_io(name) || is_clone(name)) {
                return Ok(());
            }
            let task = self.task(line.pid, Some(name));
            return self.resume(task, name, &after[end + 9..], number, out);
        }
        let open = event.iter().position(|&c| c == b'(');
        let name = open.map(|i| &event[..i]).unwrap_or(b"");
        let valid = !name.is_empty()
            && name
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'?');
        if !valid {
            return Err(ParseError::at_line(
                number,
                "syscall",
                format!("not a system call: '{}'", text(event)),
            ));
        }
        if !(is_io(name) || is_clone(name)) {
            return Ok(());
        }
        let task = self.task(line.pid, None);
        let args = &event[name.len() + 1..];
        if let Some(partial) = args.strip_suffix(b"<unfinished ...>") {
            self.start(task, ts_ns, name, partial);
            return Ok(());
        }
        self.call(task, ts_ns, name, args, number, out)
    }

    fn start(&mut self, task: usize, ts_ns: i64, name: &[u8], partial: &[u8]) {
        let mut args = partial.trim_ascii_end().to_vec();
        if args.ends_with(b",") {
            args.push(b' ');
        }
        self.cloning.retain(|&t| t != task);
        if is_clone(name) {
            self.cloning.push(task);
        }
        self.tasks[task].pending = Some(Pending {
            ts_ns,
            name: name.to_vec(),
            args,
        });
    }

    fn resume(
        &mut self,
        task: usize,
        name: &[u8],
        rest: &[u8],
        number: u64,
        out: &mut Parsed,
    ) -> Result<(), ParseError> {
        self.cloning.retain(|&t| t != task);
        let Some(mut pending) = self.tasks[task].pending.take() else {
            return Ok(()); // its start was not traced
        };
        if pending.name != name {
            return Ok(());
        }
        pending.args.extend_from_slice(rest);
        self.call(task, pending.ts_ns, name, &pending.args, number, out)
    }

    /// The task of a line, creating it (and guessing its parent) at its first line.
    fn task(&mut self, pid: Option<u32>, resumed: Option<&[u8]>) -> usize {
        let Some(tid) = pid else {
            return *self.initial.get_or_insert_with(|| {
                let t = self.tasks.len();
                self.tasks.push(new_task(None, t, self.tables.len()));
                self.tables.push(FxHashMap::default());
                t
            });
        };
        if let Some(&t) = self.by_tid.get(&tid) {
            return t;
        }
        let unbound = self.initial.filter(|&t| self.tasks[t].tid.is_none());
        if let Some(init) = unbound {
            let pending = self.tasks[init].pending.as_ref().map(|p| p.name.as_slice());
            // The first tracee resuming its call, now with a [pid N] prefix.
            if resumed.is_some() && pending == resumed {
                return self.bind(init, tid);
            }
        }
        if let Some(&parent) = self.cloning.last() {
            let flags = self.tasks[parent]
                .pending
                .as_ref()
                .map(|p| p.args.clone())
                .unwrap_or_default();
            let child = self.spawn(parent, tid, &flags);
            self.tasks[child].parent = Some(parent);
            return child;
        }
        if let Some(init) = unbound {
            return self.bind(init, tid);
        }
        let t = self.tasks.len();
        self.tasks.push(new_task(Some(tid), t, self.tables.len()));
        self.tables.push(FxHashMap::default());
        self.by_tid.insert(tid, t);
        t
    }

    fn bind(&mut self, task: usize, tid: u32) -> usize {
        self.tasks[task].tid = Some(tid);
        self.by_tid.insert(tid, task);
        task
    }

    /// A new task made by `parent`'s clone with `args` (its flags) or fork.
    fn spawn(&mut self, parent: usize, tid: u32, args: &[u8]) -> usize {
        let t = self.tasks.len();
        let group = if contains(args, b"CLONE_THREAD") {
            self.tasks[parent].group
        } else {
            t
        };
        let parent_table = self.tasks[parent].table;
        let table = if contains(args, b"CLONE_FILES") {
            parent_table
        } else {
            let copy = self.tables[parent_table].clone();
            for &d in copy.values() {
                self.descs.retain(d);
            }
            self.tables.push(copy);
            self.tables.len() - 1
        };
        self.tasks.push(Task {
            tid: Some(tid),
            group,
            table,
            parent: None,
            pending: None,
            did_io: false,
        });
        self.by_tid.insert(tid, t);
        t
    }

    /// A complete call (`args` is the text after `name(`).
    fn call(
        &mut self,
        task: usize,
        ts_ns: i64,
        name: &[u8],
        args: &[u8],
        number: u64,
        out: &mut Parsed,
    ) -> Result<(), ParseError> {
        let Some((args, rest)) = split_args(args) else {
            return Err(ParseError::at_line(
                number,
                "args",
                "unterminated argument list",
            ));
        };
        let (ret, latency_ns) = parse_outcome(rest, number)?;
        let call = Call {
            name,
            args,
            ret,
            latency_ns,
        };
        if is_clone(name) {
            self.cloned(task, &call);
            return Ok(());
        }
        let Ret::Ok(value, ret_path) = call.ret else {
            return Ok(()); // failed calls are not requests and change nothing
        };
        match name {
            b"open" | b"openat" | b"creat" => {
                self.opened(task, &call, value, ret_path);
                Ok(())
            }
            b"close" => {
                let (fd, _) = Self::fd_of(&call, number)?;
                self.set_fd(task, fd, None);
                Ok(())
            }
            b"dup" | b"dup2" | b"dup3" => self.duped(task, &call, value, number),
            b"fcntl" | b"fcntl64" => {
                let dupfd = call.args.get(1).is_some_and(|a| a.starts_with(b"F_DUPFD"));
                if dupfd {
                    self.duped(task, &call, value, number)
                } else {
                    Ok(())
                }
            }
            _ => self.io(task, ts_ns, &call, value, number, out),
        }
    }

    fn cloned(&mut self, task: usize, call: &Call) {
        let Ret::Ok(child, _) = call.ret else { return };
        let Ok(tid) = u32::try_from(child) else {
            return;
        };
        if let Some(&known) = self.by_tid.get(&tid) {
            if self.tasks[known].parent == Some(task) {
                self.tasks[known].parent = None; // the guess made at its first line was right
                return;
            }
        }
        let flags = call.args.concat();
        self.spawn(task, tid, &flags);
    }

    /// The first argument as a file descriptor and its `-y` annotation.
    fn fd_of<'a>(call: &Call<'a>, number: u64) -> Result<(i64, Option<&'a [u8]>), ParseError> {
        let arg = call.args.first().copied().unwrap_or_default();
        split_fd(arg).ok_or_else(|| {
            ParseError::at_line(number, "fd", format!("bad file descriptor '{}'", text(arg)))
        })
    }

    /// The description behind `fd` of a call annotated with `path`, made afresh when the
    /// table does not know the fd or knows it as another file (opened before tracing).
    fn description(&mut self, task: usize, fd: i64, path: &[u8]) -> usize {
        let path_id = self.paths.intern(path);
        let table = self.tasks[task].table;
        if let Some(&d) = self.tables[table].get(&(fd as i32)) {
            if self.descs.slots[d].path == path_id {
                return d;
            }
        }
        let d = self.descs.add(path_id, false);
        self.set_fd(task, fd, Some(d));
        self.descs.release(d); // set_fd retained it
        d
    }

    /// Points `fd` at description `d` (or closes it), keeping reference counts.
    fn set_fd(&mut self, task: usize, fd: i64, d: Option<usize>) {
        let table = &mut self.tables[self.tasks[task].table];
        let old = match d {
            Some(d) => {
                self.descs.retain(d);
                table.insert(fd as i32, d)
            }
            None => table.remove(&(fd as i32)),
        };
        if let Some(old) = old {
            self.descs.release(old);
        }
    }

    fn opened(&mut self, task: usize, call: &Call, fd: i64, ret_path: Option<&[u8]>) {
        let Some(path) = file_path(ret_path) else {
            self.set_fd(task, fd, None);
            return;
        };
        let flags = call.args.concat();
        let path_id = self.paths.intern(path);
        if contains(&flags, b"O_TRUNC") || call.name == b"creat" {
            self.paths.end[path_id as usize] = 0;
        }
        let d = self.descs.add(path_id, contains(&flags, b"O_APPEND"));
        self.set_fd(task, fd, Some(d));
        self.descs.release(d);
    }

    fn duped(
        &mut self,
        task: usize,
        call: &Call,
        new_fd: i64,
        number: u64,
    ) -> Result<(), ParseError> {
        let (old_fd, annotation) = Self::fd_of(call, number)?;
        match file_path(annotation) {
            Some(path) => {
                let d = self.description(task, old_fd, path);
                self.set_fd(task, new_fd, Some(d));
            }
            None => self.set_fd(task, new_fd, None),
        }
        Ok(())
    }

    /// read/write/lseek/fsync families on a file.
    fn io(
        &mut self,
        task: usize,
        ts_ns: i64,
        call: &Call,
        value: i64,
        number: u64,
        out: &mut Parsed,
    ) -> Result<(), ParseError> {
        let (fd, annotation) = Self::fd_of(call, number)?;
        let Some(path) = file_path(annotation) else {
            return Ok(()); // sockets, pipes, anonymous inodes, or no -y
        };
        let d = self.description(task, fd, path);
        let name = call.name;
        if name == b"lseek" {
            self.seeked(d, call, value);
            return Ok(());
        }
        let latency = self.latency_of(call, number)?;
        if name == b"fsync" || name == b"fdatasync" {
            self.emit(task, ts_ns, OP_FLUSH, 0, 0, latency, d, out);
            return Ok(());
        }
        let size = u32::try_from(value).map_err(|_| {
            ParseError::at_line(
                number,
                "return",
                format!("transfer size {value} out of range"),
            )
        })?;
        let op = op_of(name);
        let offset = match explicit_offset(call, number)? {
            Some(off) => off,
            None => self.advance(d, op, size),
        };
        let path_id = self.descs.slots[d].path as usize;
        if op == OP_WRITE {
            let end = &mut self.paths.end[path_id];
            *end = (*end).max(offset + u64::from(size));
        }
        if size > 0 {
            self.emit(task, ts_ns, op, offset, size, latency, d, out);
        }
        Ok(())
    }

    /// The offset of a transfer at the description's position, which it then moves past.
    /// O_APPEND writes go to the highest end of the file seen so far.
    fn advance(&mut self, d: usize, op: u8, size: u32) -> u64 {
        let desc = &mut self.descs.slots[d];
        if desc.append && op == OP_WRITE {
            desc.pos = desc.pos.max(self.paths.end[desc.path as usize]);
        }
        let at = desc.pos;
        desc.pos += u64::from(size);
        at
    }

    fn seeked(&mut self, d: usize, call: &Call, new_pos: i64) {
        let Ok(pos) = u64::try_from(new_pos) else {
            return;
        };
        self.descs.slots[d].pos = pos;
        if call.args.get(2).is_some_and(|w| *w == b"SEEK_END") {
            let delta = call.args.get(1).and_then(|a| parse_i64(a)).unwrap_or(0);
            if let Ok(end) = u64::try_from(new_pos - delta) {
                self.paths.end[self.descs.slots[d].path as usize] = end;
            }
        }
    }

    fn latency_of(&self, call: &Call, number: u64) -> Result<i64, ParseError> {
        match (self.latency, call.latency_ns) {
            (false, _) => Ok(0),
            (true, Some(l)) => Ok(l),
            (true, None) => Err(ParseError::at_line(
                number,
                "latency",
                "no <seconds> service time (strace -T)",
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        task: usize,
        ts_ns: i64,
        op: u8,
        offset: u64,
        size: u32,
        latency: i64,
        d: usize,
        out: &mut Parsed,
    ) {
        let file = self.paths.file(self.descs.slots[d].path);
        self.tasks[task].did_io = true;
        let stream = match self.stream_by {
            StreamBy::File => file,
            StreamBy::Thread => self.stream_of(task),
            StreamBy::Process => self.stream_of(self.tasks[task].group),
        };
        out.columns.push(ts_ns, stream, op, offset, size);
        out.columns.file.get_or_insert_with(Vec::new).push(file);
        if let Some(l) = out.columns.latency_ns.as_mut() {
            l.push(latency);
        }
    }

    fn stream_of(&mut self, key: usize) -> u32 {
        let next = self.stream_tasks.len() as u32;
        let id = *self.streams.entry(key).or_insert(next);
        if id == next {
            self.stream_tasks.push(key);
        }
        id
    }
}

/// The offset argument of pread64/pwrite64/preadv/pwritev (and preadv2/pwritev2, where -1
/// means "at the file position", i.e. None).
fn explicit_offset(call: &Call, number: u64) -> Result<Option<u64>, ParseError> {
    let name = call.name;
    if !name.starts_with(b"pread") && !name.starts_with(b"pwrite") {
        return Ok(None);
    }
    let arg = call.args.get(3).copied().unwrap_or_default();
    let bad = |what: String| ParseError::at_line(number, "offset", what);
    let off = parse_i64(arg).ok_or_else(|| bad(format!("bad offset '{}'", text(arg))))?;
    match off {
        0.. => Ok(Some(off as u64)),
        -1 if name.ends_with(b"2") => Ok(None),
        _ => Err(bad(format!("negative offset {off}"))),
    }
}

fn new_task(tid: Option<u32>, index: usize, table: usize) -> Task {
    Task {
        tid,
        group: index,
        table,
        parent: None,
        pending: None,
        did_io: false,
    }
}

/// Facts about a trace's first bytes: None when it does not look like strace, else whether
/// its calls carry `-T` service times.
pub fn inspect_head(head: &[u8]) -> Option<bool> {
    // The head may end in the middle of a line: only whole lines count.
    let whole = match head.iter().rposition(|&c| c == b'\n') {
        Some(i) => &head[..i],
        None => head,
    };
    let (mut calls, mut timed) = (0, 0);
    for (i, raw) in whole.split(|&c| c == b'\n').take(50).enumerate() {
        let raw = trim(raw);
        if raw.is_empty() || raw.starts_with(b"strace: ") {
            continue;
        }
        let line = split_line(raw, i as u64 + 1).ok()?;
        let e = line.event;
        if e.starts_with(b"---") || e.starts_with(b"+++") {
            continue;
        }
        let name_end = e.iter().position(|&c| c == b'(');
        let is_call = e.starts_with(b"<... ")
            || name_end.is_some_and(|n| {
                n > 0
                    && e[..n]
                        .iter()
                        .all(|&c| c.is_ascii_alphanumeric() || c == b'_')
            });
        if !is_call {
            return None;
        }
        calls += 1;
        if !e.ends_with(b"<unfinished ...>") {
            let has_latency = e
                .strip_suffix(b">")
                .and_then(|r| r.iter().rposition(|&c| c == b'<').map(|i| &r[i + 1..]))
                .and_then(seconds_ns)
                .is_some();
            timed += usize::from(has_latency);
        }
    }
    (calls > 0).then_some(timed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, by: StreamBy) -> (Parsed, Parser) {
        let mut p = Parser::new(by, true, false);
        let parsed = p.parse(text.as_bytes(), 1).unwrap();
        (parsed, p)
    }

    #[test]
    fn positions_follow_read_write_lseek_and_pread() {
        let t = "\
100 10.000000 openat(AT_FDCWD</d>, \"/d/f\", O_RDWR|O_CREAT, 0666) = 3</d/f> <0.000010>
100 10.000100 write(3</d/f>, \"abc\"..., 4096) = 4096 <0.000020>
100 10.000200 lseek(3</d/f>, 0, SEEK_SET) = 0 <0.000001>
100 10.000300 read(3</d/f>, \"abc\"..., 8192) = 4096 <0.000030>
100 10.000400 pread64(3</d/f>, \"x\", 512, 1024) = 512 <0.000040>
100 10.000500 read(3</d/f>, \"\", 8192) = 0 <0.000001>
100 10.000600 fsync(3</d/f>) = 0 <0.001000>
";
        let (p, parser) = run(t, StreamBy::Thread);
        let c = &p.columns;
        assert_eq!(c.op, vec![OP_WRITE, OP_READ, OP_READ, OP_FLUSH]);
        assert_eq!(c.offset, vec![0, 0, 1024, 0]);
        assert_eq!(c.size, vec![4096, 4096, 512, 0]);
        assert_eq!(c.ts_ns[0], 10_000_100_000);
        assert_eq!(
            c.latency_ns.as_ref().unwrap(),
            &vec![20_000, 30_000, 40_000, 1_000_000]
        );
        assert_eq!(parser.files(), vec!["/d/f".to_string()]);
    }

    #[test]
    fn unfinished_call_takes_its_start_time_and_resumed_size() {
        let t = "\
7 1.000000 pread64(5</x>,  <unfinished ...>
8 1.000050 write(5</x>, \"a\", 1) = 1 <0.000001>
7 1.000100 <... pread64 resumed>\"\"..., 100, 4096) = 100 <0.000100>
";
        let (p, _) = run(t, StreamBy::Thread);
        assert_eq!(p.columns.ts_ns, vec![1_000_050_000, 1_000_000_000]);
        assert_eq!(p.columns.offset, vec![0, 4096]);
        assert_eq!(p.columns.size, vec![1, 100]);
    }

    #[test]
    fn time_of_day_wraps_at_midnight() {
        let t = "\
23:59:59.999000 write(1</f>, \"a\", 1) = 1 <0.000001>
00:00:00.001000 write(1</f>, \"a\", 1) = 1 <0.000001>
";
        let (p, _) = run(t, StreamBy::Thread);
        assert_eq!(p.columns.ts_ns[1] - p.columns.ts_ns[0], 2_000_000);
        assert_eq!(p.columns.offset, vec![0, 1]);
    }

    #[test]
    fn bad_timestamp_names_line_and_field() {
        let mut p = Parser::new(StreamBy::Thread, true, false);
        let e = p
            .parse(
                b"1 1.5 read(3</f>, \"\", 1) = 1 <0.1>\n1 x.5 close(3</f>) = 0 <0.1>\n",
                10,
            )
            .unwrap_err();
        assert_eq!((e.location.as_str(), e.field.as_str()), ("line 11", "time"));
    }

    #[test]
    fn dup_shares_positions_and_append_writes_go_to_the_end() {
        let t = "\
1 1.0 openat(AT_FDCWD</d>, \"/d/log\", O_WRONLY|O_APPEND) = 3</d/log> <0.1>
1 1.1 openat(AT_FDCWD</d>, \"/d/log\", O_WRONLY|O_APPEND) = 4</d/log> <0.1>
1 1.2 write(3</d/log>, \"a\", 10) = 10 <0.1>
1 1.3 write(4</d/log>, \"a\", 5) = 5 <0.1>
1 1.4 openat(AT_FDCWD</d>, \"/d/data\", O_RDWR) = 5</d/data> <0.1>
1 1.5 dup(5</d/data>) = 6</d/data> <0.1>
1 1.6 write(5</d/data>, \"a\", 100) = 100 <0.1>
1 1.7 fcntl(6</d/data>, F_DUPFD_CLOEXEC, 10) = 10</d/data> <0.1>
1 1.8 write(10</d/data>, \"a\", 7) = 7 <0.1>
1 1.9 preadv2(5</d/data>, [{iov_base=\"\", iov_len=4}], 1, -1, 0) = 4 <0.1>
1 2.0 preadv2(5</d/data>, [{iov_base=\"\", iov_len=4}], 1, 0, 0) = 4 <0.1>
1 2.1 read(6</d/data>, \"\", 2) = 2 <0.1>
";
        let (p, parser) = run(t, StreamBy::File);
        assert_eq!(p.columns.offset, vec![0, 10, 0, 100, 107, 0, 111]);
        assert_eq!(p.columns.stream, vec![0, 0, 1, 1, 1, 1, 1]);
        assert_eq!(parser.stream_names(), vec!["/d/log", "/d/data"]);
    }

    #[test]
    fn deleted_files_keep_their_path() {
        assert_eq!(
            split_fd(b"1</tmp/#10010914>(deleted)"),
            Some((1, Some(&b"/tmp/#10010914"[..])))
        );
        assert_eq!(file_path(Some(b"/tmp/x (deleted)")), Some(&b"/tmp/x"[..]));
        assert_eq!(split_fd(b"1</tmp/x>junk"), None);
    }

    #[test]
    fn sniffs_strace_heads() {
        assert_eq!(
            inspect_head(b"[pid 12] 10:00:00.000001 read(3</f>, \"\", 1) = 1 <0.1>\n"),
            Some(true)
        );
        assert_eq!(inspect_head(b"1.000001 close(3) = 0\n"), Some(false));
        assert_eq!(
            inspect_head(b"128166385295514663,hm,0,Write,9056014336,2048,2833\n"),
            None
        );
    }
}
