//! The thin PyO3 layer: converts between Python buffers and the pure-Rust core.
//!
//! Columns cross the boundary as little-endian byte strings (Python wraps them with
//! `numpy.frombuffer`) and come in through the buffer protocol, so the core needs no numpy crate.

use crate::columns::{Columns, ParseError, Parsed};
use crate::stats::characterize::{characterize_pieces, Params, StreamStats, Summary, TraceColumns};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

fn vec_bytes<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain integer type; its bytes are read in native (little-endian) order.
    let bytes =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, bytes)
}

/// Canonical columns as a dict of name -> bytes (native-endian).
pub fn columns_to_py<'py>(py: Python<'py>, c: &Columns) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ts_ns", vec_bytes(py, &c.ts_ns))?;
    d.set_item("stream", vec_bytes(py, &c.stream))?;
    d.set_item("op", vec_bytes(py, &c.op))?;
    d.set_item("offset", vec_bytes(py, &c.offset))?;
    d.set_item("size", vec_bytes(py, &c.size))?;
    if let Some(l) = &c.latency_ns {
        d.set_item("latency_ns", vec_bytes(py, l))?;
    }
    if let Some(f) = &c.file {
        d.set_item("file", vec_bytes(py, f))?;
    }
    Ok(d)
}

/// A parse error as a Python tuple (location, field, message), raised as ValueError so the
/// Python side can name the file.
pub fn parse_error_to_py(e: &ParseError) -> PyErr {
    PyValueError::new_err((e.location.clone(), e.field.clone(), e.message.clone()))
}

/// A parsed chunk as a dict: {"columns": {...}, "skipped": n, "skipped_examples": [(loc, field, msg)]}.
pub fn parsed_to_py<'py>(py: Python<'py>, p: &Parsed) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("columns", columns_to_py(py, &p.columns)?)?;
    d.set_item("skipped", p.skipped)?;
    let ex = PyList::empty(py);
    for e in &p.skipped_examples {
        ex.append((e.location.clone(), e.field.clone(), e.message.clone()))?;
    }
    d.set_item("skipped_examples", ex)?;
    Ok(d)
}

/// Runs a parser without the GIL and returns its chunk as a dict, or its error as the
/// ValueError the Python side turns into a message naming the file.
fn parse_without_gil<'py>(
    py: Python<'py>,
    parse: impl FnOnce() -> Result<Parsed, ParseError> + Send,
) -> PyResult<Bound<'py, PyDict>> {
    let parsed = py.detach(parse).map_err(|e| parse_error_to_py(&e))?;
    parsed_to_py(py, &parsed)
}

/// Reads a contiguous buffer of T from any object with the buffer protocol (numpy, bytes).
pub fn buffer_vec<T: pyo3::buffer::Element + Copy>(obj: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    let buf = PyBuffer::<T>::get(obj)?;
    buf.to_vec(obj.py())
}

/// Parses whole vscsi records (version 1 or 2); see `readers::vscsi::parse`.
#[pyfunction]
#[pyo3(signature = (buf, version, first_record, byte_base, skip_bad))]
fn parse_vscsi<'py>(
    py: Python<'py>,
    buf: &[u8],
    version: u8,
    first_record: u64,
    byte_base: u64,
    skip_bad: bool,
) -> PyResult<Bound<'py, PyDict>> {
    use crate::readers::vscsi::{parse, Version};
    let v = if version == 2 {
        Version::V2
    } else {
        Version::V1
    };
    parse_without_gil(py, || parse(buf, v, first_record, byte_base, skip_bad))
}

/// The vscsi version (1 or 2) of a trace's first bytes, or 0 when it is not vscsi.
#[pyfunction]
fn detect_vscsi(head: &[u8]) -> u8 {
    match crate::readers::vscsi::detect_version(head) {
        Some(crate::readers::vscsi::Version::V1) => 1,
        Some(crate::readers::vscsi::Version::V2) => 2,
        None => 0,
    }
}

fn event_and_stream(
    events: &str,
    stream_by: &str,
) -> PyResult<(
    crate::readers::blktrace::Event,
    crate::readers::blktrace::StreamBy,
)> {
    use crate::readers::blktrace::{Event, StreamBy};
    let event = Event::from_letter(events)
        .ok_or_else(|| PyValueError::new_err(format!("events must be Q or D, not '{events}'")))?;
    let by = match stream_by {
        "device" => StreamBy::Device,
        "process" => StreamBy::Process,
        _ => {
            return Err(PyValueError::new_err(format!(
                "cannot stream by '{stream_by}'"
            )))
        }
    };
    Ok((event, by))
}

/// The byte order of a blktrace file's first record: 1 little-endian, 2 big-endian, 0 not blktrace.
#[pyfunction]
fn detect_blktrace(head: &[u8]) -> u8 {
    use crate::readers::blktrace::{detect_endian, Endian};
    match detect_endian(head) {
        Some(Endian::Little) => 1,
        Some(Endian::Big) => 2,
        None => 0,
    }
}

/// A blktrace binary reader fed raw chunks; see `readers::blktrace::Reader`.
#[pyclass]
struct BlktraceReader(crate::readers::blktrace::Reader);

#[pymethods]
impl BlktraceReader {
    #[new]
    fn new(big_endian: bool, events: &str, stream_by: &str, skip_bad: bool) -> PyResult<Self> {
        use crate::readers::blktrace::{Endian, Reader};
        let (event, by) = event_and_stream(events, stream_by)?;
        let endian = if big_endian {
            Endian::Big
        } else {
            Endian::Little
        };
        Ok(BlktraceReader(Reader::new(endian, event, by, skip_bad)))
    }

    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        at_end: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let reader = &mut self.0;
        parse_without_gil(py, || reader.feed(buf, at_end))
    }
}

/// Parses whole lines of blkparse text output; see `readers::blkparse::parse`.
#[pyfunction]
#[pyo3(signature = (buf, first_line, events, stream_by, skip_bad))]
fn parse_blkparse<'py>(
    py: Python<'py>,
    buf: &[u8],
    first_line: u64,
    events: &str,
    stream_by: &str,
    skip_bad: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (event, by) = event_and_stream(events, stream_by)?;
    parse_without_gil(py, || {
        crate::readers::blkparse::parse(buf, first_line, event, by, skip_bad)
    })
}

/// The fio iolog version (2 or 3) of a file's first bytes, or 0 when it is not an iolog.
#[pyfunction]
fn detect_fio_iolog(head: &[u8]) -> u8 {
    crate::readers::fio_iolog::detect_version(head).unwrap_or(0)
}

/// A fio iolog reader fed whole lines; see `readers::fio_iolog::Reader`.
#[pyclass]
struct FioIologReader(crate::readers::fio_iolog::Reader);

#[pymethods]
impl FioIologReader {
    #[new]
    fn new(skip_bad: bool) -> Self {
        FioIologReader(crate::readers::fio_iolog::Reader::new(skip_bad))
    }

    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        first_line: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let reader = &mut self.0;
        parse_without_gil(py, || reader.feed(buf, first_line))
    }

    /// File names by id.
    fn files(&self) -> Vec<String> {
        self.0.files().to_vec()
    }
}

/// The strace reader's state across chunks; see `readers::strace`.
#[pyclass]
struct StraceParser {
    inner: crate::readers::strace::Parser,
}

#[pymethods]
impl StraceParser {
    #[new]
    #[pyo3(signature = (stream_by, latency, skip_bad))]
    fn new(stream_by: &str, latency: bool, skip_bad: bool) -> PyResult<Self> {
        use crate::readers::strace::{Parser, StreamBy};
        let by = StreamBy::from_name(stream_by)
            .ok_or_else(|| PyValueError::new_err(format!("unknown stream key '{stream_by}'")))?;
        Ok(StraceParser {
            inner: Parser::new(by, latency, skip_bad),
        })
    }

    /// Parses whole lines; `byte_base` is unused (errors name lines).
    #[pyo3(signature = (buf, first_line, byte_base))]
    fn parse<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        first_line: u64,
        byte_base: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = byte_base;
        let inner = &mut self.inner;
        parse_without_gil(py, || inner.parse(buf, first_line))
    }

    /// The path of each file id.
    fn files(&self) -> Vec<String> {
        self.inner.files()
    }

    /// The name of each stream id.
    fn stream_names(&self) -> Vec<String> {
        self.inner.stream_names()
    }

    /// (threads, processes) that issued requests.
    fn counts(&self) -> (usize, usize) {
        self.inner.counts()
    }
}

/// None when `head` does not look like strace output, else whether it has -T service times.
#[pyfunction]
fn inspect_strace(head: &[u8]) -> Option<bool> {
    crate::readers::strace::inspect_head(head)
}

/// Borrows a C-contiguous buffer as a slice without copying; `buf` keeps the memory alive.
fn buffer_slice<T: pyo3::buffer::Element>(buf: &PyBuffer<T>) -> PyResult<&[T]> {
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err("column buffer is not contiguous"));
    }
    if buf.item_count() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the buffer is contiguous, holds item_count items of T (PyBuffer checked the
    // item format) and stays alive and unreleased while `buf` is borrowed.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const T, buf.item_count()) })
}

/// A writable contiguous buffer as a mutable slice (an output array the core fills).
#[allow(clippy::mut_from_ref)] // the buffer is Python's, exported writable for this call
fn buffer_slice_mut<T: pyo3::buffer::Element>(buf: &PyBuffer<T>) -> PyResult<&mut [T]> {
    if buf.readonly() || !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "output buffer is not a writable contiguous array",
        ));
    }
    if buf.item_count() == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as `buffer_slice`, and the exporter gave a writable buffer; the caller hands
    // each output buffer to one slice only, while the call lasts.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.buf_ptr() as *mut T, buf.item_count()) })
}

/// The five canonical columns as Python buffers, held while slices of them are in use.
struct CanonicalBuffers {
    ts_ns: PyBuffer<i64>,
    stream: PyBuffer<u32>,
    op: PyBuffer<u8>,
    offset: PyBuffer<u64>,
    size: PyBuffer<u32>,
}

/// (time, stream, operation, offset, size) slices.
type CanonicalSlices<'a> = (&'a [i64], &'a [u32], &'a [u8], &'a [u64], &'a [u32]);

impl CanonicalBuffers {
    fn get(
        ts_ns: &Bound<'_, PyAny>,
        stream: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        size: &Bound<'_, PyAny>,
    ) -> PyResult<CanonicalBuffers> {
        Ok(CanonicalBuffers {
            ts_ns: PyBuffer::get(ts_ns)?,
            stream: PyBuffer::get(stream)?,
            op: PyBuffer::get(op)?,
            offset: PyBuffer::get(offset)?,
            size: PyBuffer::get(size)?,
        })
    }

    fn slices(&self) -> PyResult<CanonicalSlices<'_>> {
        Ok((
            buffer_slice(&self.ts_ns)?,
            buffer_slice(&self.stream)?,
            buffer_slice(&self.op)?,
            buffer_slice(&self.offset)?,
            buffer_slice(&self.size)?,
        ))
    }

    /// The columns for characterization (a whole trace: no row numbers or run starts).
    fn trace_columns<'a>(
        &'a self,
        latency_ns: Option<&'a PyBuffer<i64>>,
    ) -> PyResult<TraceColumns<'a>> {
        let (ts_ns, stream, op, offset, size) = self.slices()?;
        Ok(TraceColumns {
            ts_ns,
            stream,
            op,
            offset,
            size,
            latency_ns: latency_ns.map(buffer_slice).transpose()?,
            seq: None,
            run_start: None,
        })
    }
}

fn stream_stats_to_py<'py>(py: Python<'py>, s: &StreamStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("stream", s.stream)?;
    d.set_item("requests", s.requests)?;
    d.set_item("reads", s.reads)?;
    d.set_item("writes", s.writes)?;
    d.set_item("size_sum", s.size_sum)?;
    d.set_item("latency_sum", s.latency_sum)?;
    d.set_item("first_ts", s.first_ts)?;
    d.set_item("last_ts", s.last_ts)?;
    d.set_item("backward", s.backward)?;
    d.set_item("sequential", s.sequential)?;
    d.set_item("forward", s.forward)?;
    d.set_item("interference_sum", s.interference_sum)?;
    d.set_item("pairs", s.pairs)?;
    d.set_item("global_runs", s.global_runs)?;
    d.set_item("detangled_runs", s.detangled_runs)?;
    d.set_item("relaxed_runs", s.relaxed_runs)?;
    d.set_item("locality", &s.locality)?;
    d.set_item("fluctuation_cv", s.fluctuation_cv)?;
    d.set_item("requested_blocks_512", s.requested_blocks_512)?;
    d.set_item("footprint_blocks_512", s.footprint_blocks_512)?;
    d.set_item("footprint_blocks_4k", s.footprint_blocks_4k)?;
    Ok(d)
}

fn summary_to_py<'py>(py: Python<'py>, s: &Summary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("capacity", s.capacity)?;
    d.set_item("total", stream_stats_to_py(py, &s.total)?)?;
    let streams = PyList::empty(py);
    for st in &s.streams {
        streams.append(stream_stats_to_py(py, st)?)?;
    }
    d.set_item("streams", streams)?;
    d.set_item("top_sizes", &s.top_sizes)?;
    d.set_item("distinct_sizes", s.distinct_sizes)?;
    d.set_item("size_log2", &s.size_log2)?;
    d.set_item("jump_log2", &s.jump_log2)?;
    match &s.fluctuation {
        Some(f) => {
            let fd = PyDict::new(py);
            fd.set_item("window_ns", f.window_ns)?;
            fd.set_item("durations_ns", &f.durations_ns)?;
            fd.set_item("counts", &f.counts)?;
            d.set_item("fluctuation", fd)?;
        }
        None => d.set_item("fluctuation", py.None())?,
    }
    Ok(d)
}

/// Characterizes canonical columns given as lists of chunks (a Parquet trace's row groups:
/// chunk i of every column holds the same rows), without joining them, and returns the summary
/// (`summary_to_py`). The GIL is released while counting.
#[pyfunction]
#[pyo3(signature = (ts_ns, stream, op, offset, size, latency_ns, leaves, capacity, window_ns, relaxed_threshold))]
#[allow(clippy::too_many_arguments)]
fn characterize_chunks<'py>(
    py: Python<'py>,
    ts_ns: Vec<Bound<'py, PyAny>>,
    stream: Vec<Bound<'py, PyAny>>,
    op: Vec<Bound<'py, PyAny>>,
    offset: Vec<Bound<'py, PyAny>>,
    size: Vec<Bound<'py, PyAny>>,
    latency_ns: Option<Vec<Bound<'py, PyAny>>>,
    leaves: u64,
    capacity: u64,
    window_ns: i64,
    relaxed_threshold: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let n = ts_ns.len();
    let counts = [stream.len(), op.len(), offset.len(), size.len()];
    if counts
        .iter()
        .chain(latency_ns.as_ref().map(Vec::len).as_ref())
        .any(|&c| c != n)
    {
        return Err(PyValueError::new_err(
            "every column needs the same number of chunks",
        ));
    }
    let mut bufs = Vec::with_capacity(n);
    for i in 0..n {
        bufs.push(CanonicalBuffers::get(
            &ts_ns[i], &stream[i], &op[i], &offset[i], &size[i],
        )?);
    }
    let latency: Vec<PyBuffer<i64>> = latency_ns
        .iter()
        .flatten()
        .map(PyBuffer::<i64>::get)
        .collect::<PyResult<_>>()?;
    let pieces = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.trace_columns(latency.get(i)))
        .collect::<PyResult<Vec<TraceColumns>>>()?;
    let params = Params {
        leaves,
        capacity,
        window_ns,
        relaxed_threshold,
    };
    let summary = py
        .detach(|| characterize_pieces(&pieces, &params))
        .map_err(PyValueError::new_err)?;
    summary_to_py(py, &summary)
}

/// Fits the model to canonical columns (time-ordered), each given as a list of chunks that
/// hold the same rows (Parquet row groups, or one contiguous array), and returns the model
/// document as JSON text, with the trace's `ties` as JSON when `ties` asks for them (counted
/// on another core while the model is finalised). Chunks are fitted in place, without being
/// joined, unless re-references or groups need the whole sequence; see `model::stats` and
/// `model::finalize`. The GIL is released while fitting.
#[pyfunction]
#[pyo3(signature = (ts_ns, stream, op, offset, size, levels, fanout, capacity, flat, window_ns, reref, iat_family, span_ns, group=None, global_reuse=false, ties=false))]
#[allow(clippy::too_many_arguments)]
fn fit_model<'py>(
    py: Python<'py>,
    ts_ns: Vec<Bound<'py, PyAny>>,
    stream: Vec<Bound<'py, PyAny>>,
    op: Vec<Bound<'py, PyAny>>,
    offset: Vec<Bound<'py, PyAny>>,
    size: Vec<Bound<'py, PyAny>>,
    levels: u32,
    fanout: u32,
    capacity: u64,
    flat: bool,
    window_ns: i64,
    reref: bool,
    iat_family: &str,
    span_ns: i64,
    group: Option<&Bound<'py, PyAny>>,
    global_reuse: bool,
    ties: bool,
) -> PyResult<(String, Option<String>)> {
    use crate::model::{finalize::finalize, stats, tree::Tree};
    if levels == 0 || fanout < 2 || (fanout as f64).powi(levels as i32) > 4e18 {
        return Err(PyValueError::new_err(
            "levels must be >= 1 and fanout >= 2 (fanout^levels < 4e18)",
        ));
    }
    let bufs = chunk_buffers(&ts_ns, &stream, &op, &offset, &size)?;
    let pieces = bufs
        .iter()
        .map(CanonicalBuffers::slices)
        .collect::<PyResult<Vec<_>>>()?;
    let config = stats::FitConfig {
        tree: Tree::new(levels, fanout, capacity),
        flat,
        window_ns,
        reref,
    };
    let family = iat_family.to_string();
    let group_buf = group.map(PyBuffer::<u32>::get).transpose()?;
    let groups = group_buf.as_ref().map(buffer_slice).transpose()?;
    let rows: usize = pieces.iter().map(|p| p.0.len()).sum();
    if groups.is_some_and(|g| g.len() != rows) {
        return Err(PyValueError::new_err("group: one per request expected"));
    }
    let out = py.detach(|| {
        // re-references and groups read the whole sequence at once: chunks joined
        let whole = (pieces.len() > 1 && (reref || groups.is_some())).then(|| joined(&pieces));
        let pieces = match &whole {
            Some(w) => vec![(&w.0[..], &w.1[..], &w.2[..], &w.3[..], &w.4[..])],
            None => pieces,
        };
        let fitter = fit_pieces(config, &pieces, groups, global_reuse);
        std::thread::scope(|scope| {
            // the ties on another core while finalisation runs (counting took both)
            let tie_json = ties.then(|| scope.spawn(|| tie_counts(&pieces)));
            let mut doc = finalize(&fitter, &family, span_ns);
            if reref && global_reuse {
                doc["reuse_scope"] = "global".into();
            }
            let doc = doc.to_string();
            let tie_json = tie_json.map(|h| h.join().expect("tie thread panicked"));
            (doc, tie_json)
        })
    });
    Ok(out)
}

/// The statistics of the trace in `pieces` (consecutive chunks; one, where re-references or
/// groups need the whole sequence).
fn fit_pieces(
    config: crate::model::stats::FitConfig,
    pieces: &[CanonicalSlices<'_>],
    groups: Option<&[u32]>,
    global_reuse: bool,
) -> crate::model::stats::Fitter {
    use crate::model::{pipeline, stats};
    let [(ts, st, o, off, sz)] = pieces else {
        let batches: Vec<_> = pieces
            .iter()
            .map(|&(ts, st, o, off, sz)| stats::Batch::new(ts, st, o, off, sz))
            .collect();
        return stats::fit_parallel(config, &batches);
    };
    let reref = config.reref;
    // with `global_reuse` (streams share one address space, e.g. processes over files)
    // re-references count against every stream's history, as a shared cache sees them;
    // resumed-run lags: one cheap pass per stream
    let resume = reref.then(|| stats::resume_lags(st, off, sz));
    // one sequence of accesses (one history, or the only stream): the distance pass runs
    // ahead of the counting on another core
    let one_sequence = global_reuse || st.iter().all(|&s| s == st[0]);
    let batch = stats::Batch::new(ts, st, o, off, sz).with_group(groups);
    if reref && one_sequence && pipeline::worth_it(ts.len()) {
        let tracker = pipeline::trace_tracker(off, sz, 4096);
        let resume = resume.as_deref();
        return pipeline::fit_pipelined(config, batch.with_resume(resume), tracker, 4096);
    }
    let reuse = reref.then(|| match global_reuse {
        true => stats::global_stack_distances(off, sz, 4096),
        false => stats::stack_distances(st, off, sz, 4096),
    });
    let (reuse, resume) = (reuse.as_deref(), resume.as_deref());
    stats::fit_parallel(config, &[batch.with_reuse(reuse).with_resume(resume)])
}

/// The `ties` of the trace in `pieces` (consecutive chunks), as JSON.
fn tie_counts(pieces: &[CanonicalSlices<'_>]) -> String {
    let mut counter = crate::model::ties::TieCounter::default();
    for &(ts, stream, op, offset, size) in pieces {
        let batch = crate::model::ties::TieBatch {
            ts,
            stream,
            op,
            offset,
            size,
            file: None,
        };
        counter.update(batch);
    }
    counter.counts().to_json().to_string()
}

/// Each chunk's five canonical columns; every column must have the same chunks.
fn chunk_buffers(
    ts_ns: &[Bound<'_, PyAny>],
    stream: &[Bound<'_, PyAny>],
    op: &[Bound<'_, PyAny>],
    offset: &[Bound<'_, PyAny>],
    size: &[Bound<'_, PyAny>],
) -> PyResult<Vec<CanonicalBuffers>> {
    let n = ts_ns.len();
    if [stream.len(), op.len(), offset.len(), size.len()]
        .iter()
        .any(|&c| c != n)
    {
        return Err(PyValueError::new_err(
            "every column needs the same number of chunks",
        ));
    }
    let bufs = (0..n)
        .map(|i| CanonicalBuffers::get(&ts_ns[i], &stream[i], &op[i], &offset[i], &size[i]))
        .collect::<PyResult<Vec<_>>>()?;
    for b in &bufs {
        let (ts, st, o, off, sz) = b.slices()?;
        if [st.len(), o.len(), off.len(), sz.len()]
            .iter()
            .any(|&l| l != ts.len())
        {
            return Err(PyValueError::new_err("chunks of different lengths"));
        }
    }
    Ok(bufs)
}

/// Columns that own their rows (`CanonicalSlices` as vectors).
type OwnedColumns = (Vec<i64>, Vec<u32>, Vec<u8>, Vec<u64>, Vec<u32>);

/// The chunks' rows in one set of columns.
fn joined(pieces: &[CanonicalSlices<'_>]) -> OwnedColumns {
    let mut out = OwnedColumns::default();
    for &(ts, st, o, off, sz) in pieces {
        out.0.extend_from_slice(ts);
        out.1.extend_from_slice(st);
        out.2.extend_from_slice(o);
        out.3.extend_from_slice(off);
        out.4.extend_from_slice(sz);
    }
    out
}

/// Statistics of a partitioned trace, fed one partition (canonical columns) at a time in
/// time order; `statistics()` gives them as bytes for `merge_partitions`/`finalize_partitions`
/// (see `model::partition`). `stream_lengths` (stream -> requests in the whole trace) is
/// needed with `reref`, so sampled stack distances match one pass.
#[pyclass]
struct PartitionFit {
    inner: crate::model::partition::PartitionFitter,
}

#[pymethods]
impl PartitionFit {
    #[new]
    #[pyo3(signature = (levels, fanout, capacity, flat, window_ns, reref, stream_lengths))]
    fn new(
        levels: u32,
        fanout: u32,
        capacity: u64,
        flat: bool,
        window_ns: i64,
        reref: bool,
        stream_lengths: std::collections::HashMap<u32, u64>,
    ) -> PyResult<Self> {
        use crate::model::{partition::PartitionFitter, stats::FitConfig, tree::Tree};
        if levels == 0 || fanout < 2 || (fanout as f64).powi(levels as i32) > 4e18 {
            return Err(PyValueError::new_err(
                "levels must be >= 1 and fanout >= 2 (fanout^levels < 4e18)",
            ));
        }
        let config = FitConfig {
            tree: Tree::new(levels, fanout, capacity),
            flat,
            window_ns,
            reref,
        };
        let lengths = stream_lengths.into_iter().collect();
        Ok(PartitionFit {
            inner: PartitionFitter::new(config, lengths),
        })
    }

    /// Adds one partition's columns (buffers: int64, uint32, uint8, uint64, uint32).
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        ts_ns: &Bound<'py, PyAny>,
        stream: &Bound<'py, PyAny>,
        op: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let bufs = CanonicalBuffers::get(ts_ns, stream, op, offset, size)?;
        let cols = bufs.slices()?;
        let inner = &mut self.inner;
        py.detach(|| inner.update(cols.0, cols.1, cols.2, cols.3, cols.4))
            .map_err(PyValueError::new_err)
    }

    /// The statistics so far, as bytes.
    fn statistics<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &crate::model::partition::encode(&self.inner.fitter))
    }
}

fn decode_parts(parts: &[Vec<u8>]) -> PyResult<Vec<crate::model::stats::Fitter>> {
    parts
        .iter()
        .enumerate()
        .map(|(i, b)| {
            crate::model::partition::decode(b)
                .map_err(|e| PyValueError::new_err(format!("partition statistics {i}: {e}")))
        })
        .collect()
}

/// Merges partitions' statistics given in order (by stream, then time) into one.
#[pyfunction]
fn merge_partitions<'py>(py: Python<'py>, parts: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
    use crate::model::partition::{encode, merge_ordered};
    let fitters = decode_parts(&parts)?;
    let merged = py
        .detach(|| merge_ordered(&fitters).map(|f| encode(&f)))
        .ok_or_else(|| PyValueError::new_err("no partition statistics to merge"))?;
    Ok(PyBytes::new(py, &merged))
}

/// How streams interleave at one instant (`model::ties`), fed a trace's batches in time
/// order; `counts()` is the model's `ties` (JSON text).
#[pyclass]
#[derive(Default)]
struct TieCounter {
    inner: crate::model::ties::TieCounter,
}

#[pymethods]
impl TieCounter {
    #[new]
    fn new() -> TieCounter {
        TieCounter::default()
    }

    #[pyo3(signature = (ts_ns, stream, op, offset, size, file=None))]
    #[allow(clippy::too_many_arguments)]
    fn update(
        &mut self,
        py: Python<'_>,
        ts_ns: PyBuffer<i64>,
        stream: PyBuffer<u32>,
        op: PyBuffer<u8>,
        offset: PyBuffer<u64>,
        size: PyBuffer<u32>,
        file: Option<PyBuffer<u32>>,
    ) -> PyResult<()> {
        let (ts, st, op) = (
            buffer_slice(&ts_ns)?,
            buffer_slice(&stream)?,
            buffer_slice(&op)?,
        );
        let (off, sz) = (buffer_slice(&offset)?, buffer_slice(&size)?);
        let file = file.as_ref().map(buffer_slice).transpose()?;
        let n = ts.len();
        if [st.len(), op.len(), off.len(), sz.len()]
            .iter()
            .any(|&l| l != n)
            || file.is_some_and(|f| f.len() != n)
        {
            return Err(PyValueError::new_err("columns of different lengths"));
        }
        let batch = crate::model::ties::TieBatch {
            ts,
            stream: st,
            op,
            offset: off,
            size: sz,
            file,
        };
        // without the GIL: `fit` counts ties on one thread while the core fits on others
        let inner = &mut self.inner;
        py.detach(|| inner.update(batch));
        Ok(())
    }

    fn counts(&self) -> String {
        self.inner.counts().to_json().to_string()
    }
}

/// The model document (JSON text) of merged statistics; see `model::finalize`.
#[pyfunction]
fn finalize_partitions(
    py: Python<'_>,
    statistics: Vec<u8>,
    iat_family: &str,
    span_ns: i64,
) -> PyResult<String> {
    let fitter = decode_parts(&[statistics])?.remove(0);
    let family = iat_family.to_string();
    Ok(py.detach(|| crate::model::finalize::finalize(&fitter, &family, span_ns).to_string()))
}

/// Characterize counts of part of a partitioned trace, fed one partition at a time (each
/// stream's in time order): `seq` (row in the whole trace) and `run_start` (1: does not
/// continue the request before it in the whole trace) place a partition; `first_ts`,
/// `last_ts`, `max_end`, `max_stream` are the whole trace's. `counts()` gives bytes for
/// `merge_characterizations`; see `stats::partial`.
#[pyclass]
struct PartitionCharacterize {
    inner: Option<crate::stats::partial::PartialCounter>,
}

/// What both characterize counters are given, as Python passes it: a mapping with these
/// keys (`characterize.CharacterizeSettings` as a dict): the parameters and the whole
/// trace's extent.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct CharacterizeSettings {
    leaves: u64,
    capacity: u64,
    window_ns: i64,
    relaxed_threshold: u64,
    first_ts: i64,
    last_ts: i64,
    max_end: u64,
    max_stream: u32,
}

impl CharacterizeSettings {
    fn split(self) -> (Params, crate::stats::characterize::Whole) {
        let params = Params {
            leaves: self.leaves,
            capacity: self.capacity,
            window_ns: self.window_ns,
            relaxed_threshold: self.relaxed_threshold,
        };
        let whole = crate::stats::characterize::Whole {
            first_ts: self.first_ts,
            last_ts: self.last_ts,
            max_end: self.max_end,
            max_stream: self.max_stream,
        };
        (params, whole)
    }
}

/// A counter that gives its result once: the counter itself, or the error that it is spent.
fn unspent<'a, T>(inner: &'a mut Option<T>, result: &str) -> PyResult<&'a mut T> {
    inner
        .as_mut()
        .ok_or_else(|| PyValueError::new_err(format!("{result}() was already taken")))
}

/// Takes a counter's state for its result (once).
fn spend<T>(inner: &mut Option<T>, result: &str) -> PyResult<T> {
    inner
        .take()
        .ok_or_else(|| PyValueError::new_err(format!("{result}() was already taken")))
}

#[pymethods]
impl PartitionCharacterize {
    #[new]
    fn new(settings: CharacterizeSettings) -> PyResult<Self> {
        let (params, whole) = settings.split();
        let inner = crate::stats::partial::PartialCounter::new(&params, &whole)
            .map_err(PyValueError::new_err)?;
        Ok(PartitionCharacterize { inner: Some(inner) })
    }

    /// Counts one partition's columns (buffers: int64, uint32, uint8, uint64, uint32, int64 or
    /// None, uint64, uint8).
    #[pyo3(signature = (ts_ns, stream, op, offset, size, latency_ns, seq, run_start))]
    #[allow(clippy::too_many_arguments)]
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        ts_ns: &Bound<'py, PyAny>,
        stream: &Bound<'py, PyAny>,
        op: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        latency_ns: Option<&Bound<'py, PyAny>>,
        seq: &Bound<'py, PyAny>,
        run_start: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let bufs = CanonicalBuffers::get(ts_ns, stream, op, offset, size)?;
        let (seq, run_start) = (PyBuffer::<u64>::get(seq)?, PyBuffer::<u8>::get(run_start)?);
        let latency = latency_ns.map(PyBuffer::<i64>::get).transpose()?;
        let cols = TraceColumns {
            seq: Some(buffer_slice(&seq)?),
            run_start: Some(buffer_slice(&run_start)?),
            ..bufs.trace_columns(latency.as_ref())?
        };
        let inner = unspent(&mut self.inner, "counts")?;
        py.detach(|| inner.update(&cols))
            .map_err(PyValueError::new_err)
    }

    /// The counts as bytes (once: the counter is spent).
    fn counts<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = spend(&mut self.inner, "counts")?;
        let bytes = py.detach(|| crate::stats::partial::encode(&inner.finish()));
        Ok(PyBytes::new(py, &bytes))
    }
}

/// Characterizes a whole trace fed a batch of rows at a time, in time order (a Parquet file
/// read in batches), given the trace's extent as ingest recorded it; `summary()` gives what
/// `characterize_chunks` gives. A batch outside the extent, an extent wider than the rows, or
/// streams too many for the footprint's bitmaps raise ValueError: the caller then counts the
/// trace whole. See `stats::characterize::StreamCounter`.
#[pyclass]
struct TraceCharacterize {
    inner: Option<crate::stats::characterize::StreamCounter>,
}

#[pymethods]
impl TraceCharacterize {
    /// `rows` and `min_offset` complete the extent: a batched read checks every batch
    /// against them.
    #[new]
    fn new(settings: CharacterizeSettings, rows: usize, min_offset: u64) -> PyResult<Self> {
        let (params, whole) = settings.split();
        let inner =
            crate::stats::characterize::StreamCounter::new(&params, &whole, min_offset, rows)
                .map_err(PyValueError::new_err)?;
        Ok(TraceCharacterize { inner: Some(inner) })
    }

    /// Counts the next rows (buffers: int64, uint32, uint8, uint64, uint32, int64 or None).
    #[pyo3(signature = (ts_ns, stream, op, offset, size, latency_ns))]
    #[allow(clippy::too_many_arguments)]
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        ts_ns: &Bound<'py, PyAny>,
        stream: &Bound<'py, PyAny>,
        op: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        latency_ns: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let bufs = CanonicalBuffers::get(ts_ns, stream, op, offset, size)?;
        let latency = latency_ns.map(PyBuffer::<i64>::get).transpose()?;
        let cols = bufs.trace_columns(latency.as_ref())?;
        let inner = unspent(&mut self.inner, "summary")?;
        py.detach(|| inner.update(&cols))
            .map_err(PyValueError::new_err)
    }

    /// The summary (once: the counter is spent).
    fn summary<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = spend(&mut self.inner, "summary")?;
        let summary = py
            .detach(|| inner.finish())
            .map_err(PyValueError::new_err)?;
        summary_to_py(py, &summary)
    }
}

/// Merges parts' characterization counts (parts hold disjoint streams) into one.
#[pyfunction]
fn merge_characterizations<'py>(
    py: Python<'py>,
    parts: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    use crate::stats::partial::{decode, encode, merge};
    let merged = py
        .detach(|| {
            let parts = parts
                .iter()
                .enumerate()
                .map(|(i, b)| decode(b).map_err(|e| format!("characterization counts {i}: {e}")))
                .collect::<Result<Vec<_>, String>>()?;
            merge(parts).map(|p| encode(&p))
        })
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &merged))
}

/// The summary of merged characterization counts, as `characterize_chunks` returns it.
#[pyfunction]
fn finalize_characterization<'py>(
    py: Python<'py>,
    counts: Vec<u8>,
) -> PyResult<Bound<'py, PyDict>> {
    use crate::stats::partial::{decode, finish};
    let summary = py
        .detach(|| decode(&counts).and_then(finish))
        .map_err(PyValueError::new_err)?;
    summary_to_py(py, &summary)
}

/// The synthesis settings as Python passes them, one tuple:
/// (requests, duration_ns, intensity, compress, seed, uniform).
#[derive(FromPyObject)]
struct SynthArgs(Option<u64>, Option<i64>, f64, f64, u64, bool);

impl From<SynthArgs> for crate::model::sample::SynthParams {
    fn from(a: SynthArgs) -> Self {
        let SynthArgs(requests, duration_ns, intensity, compress, seed, uniform) = a;
        crate::model::sample::SynthParams {
            requests,
            duration_ns,
            intensity,
            compress,
            seed,
            uniform,
        }
    }
}

/// Generates a synthetic trace from a model document (its JSON text or the parsed dict) and
/// the settings (`SynthArgs`); returns canonical column bytes.
#[pyfunction]
fn synth_model<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    args: SynthArgs,
) -> PyResult<Bound<'py, PyDict>> {
    let params = args.into();
    let sampler = checked_sampler(model, &params)?;
    let cols = py.detach(|| sampler.generate(&params));
    columns_to_py(py, &cols)
}

/// A model's synthetic trace produced in batches (`Sampler::stream`: the very requests
/// `synth_model` gives, in the same order), so a long trace is written while it is sampled
/// and never held whole. `take(n)` samples the next up to n requests without the GIL.
#[pyclass]
struct SynthStream {
    inner: crate::model::sample::Synth,
}

#[pymethods]
impl SynthStream {
    #[new]
    fn new(py: Python<'_>, model: &Bound<'_, PyAny>, args: SynthArgs) -> PyResult<Self> {
        let params: crate::model::sample::SynthParams = args.into();
        let sampler = checked_sampler(model, &params)?;
        Ok(SynthStream {
            inner: py.detach(|| sampler.stream(params)),
        })
    }

    /// Requests in the whole trace.
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total()
    }

    /// The next up to `n` requests as canonical columns (none left: empty columns).
    fn take<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyDict>> {
        let inner = &mut self.inner;
        let cols = py.detach(|| {
            let mut c = Columns::with_capacity(n);
            for r in inner.by_ref().take(n) {
                c.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
            }
            c
        });
        columns_to_py(py, &cols)
    }
}

/// The sampler of a model document, checked for a synthesis of `params` (what it refuses is
/// said in the error).
fn checked_sampler(
    model: &Bound<'_, PyAny>,
    params: &crate::model::sample::SynthParams,
) -> PyResult<crate::model::sample::Sampler> {
    let sampler = model_sampler(model)?;
    sampler
        .check_capacity(params)
        .map_err(PyValueError::new_err)?;
    Ok(sampler)
}

/// A sampler from a model document: JSON text (str or UTF-8 bytes), or the dict Python
/// parsed it into (read value by value: a model of 7 MiB took 50 ms longer so than as the
/// bytes orjson writes of it).
fn model_sampler(model: &Bound<'_, PyAny>) -> PyResult<crate::model::sample::Sampler> {
    let not_json = |e: serde_json::Error| PyValueError::new_err(format!("model is not JSON: {e}"));
    let doc = if let Ok(text) = model.cast::<PyString>() {
        serde_json::from_str(text.to_str()?).map_err(not_json)?
    } else if let Ok(bytes) = model.cast::<PyBytes>() {
        serde_json::from_slice(bytes.as_bytes()).map_err(not_json)?
    } else {
        json_value(model)?
    };
    crate::model::sample::Sampler::from_json(&doc).map_err(PyValueError::new_err)
}

/// A Python value as the JSON value `json.dumps` would write for it.
fn json_value(v: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = v.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(n.into());
        }
        if let Ok(n) = i.extract::<u64>() {
            return Ok(n.into());
        }
    }
    if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
        // read from the text json.dumps writes, as serde_json reads it (its fast float parse
        // may differ from Python's value in the last bit): the same draws as the text path
        let text = v.repr()?;
        return serde_json::from_str(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("model is not JSON: {text}: {e}")));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, item) in d.iter() {
            let key = match json_value(&k)? {
                Value::String(s) => s,
                other => other.to_string(), // json.dumps writes non-string keys as text
            };
            map.insert(key, json_value(&item)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = v.cast::<PyList>() {
        return list.iter().map(|x| json_value(&x)).collect();
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t.iter().map(|x| json_value(&x)).collect();
    }
    Err(PyValueError::new_err(format!(
        "model is not JSON: a value of type {} in it",
        v.get_type().name()?
    )))
}

/// (accesses, distinct blocks, LRU miss ratio at each cache size in blocks, (read accesses,
/// of them to blocks accessed before, write accesses, of them again)); see `stats::mrc`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn lru_miss_ratios<'py>(
    py: Python<'py>,
    space: &Bound<'py, PyAny>,
    offset: &Bound<'py, PyAny>,
    size: &Bound<'py, PyAny>,
    op: &Bound<'py, PyAny>,
    block: u64,
    cache_blocks: Vec<u64>,
) -> PyResult<(u64, u64, Vec<f64>, (u64, u64, u64, u64))> {
    let bufs = (
        PyBuffer::<u64>::get(space)?,
        PyBuffer::<u64>::get(offset)?,
        PyBuffer::<u32>::get(size)?,
        PyBuffer::<u8>::get(op)?,
    );
    let (sp, off, sz, ops) = (
        buffer_slice(&bufs.0)?,
        buffer_slice(&bufs.1)?,
        buffer_slice(&bufs.2)?,
        buffer_slice(&bufs.3)?,
    );
    let c =
        py.detach(|| crate::stats::mrc::miss_ratios(sp, off, sz, ops, block.max(1), &cache_blocks));
    let ((r, ra), (w, wa)) = (c.reads, c.writes);
    Ok((c.accesses, c.distinct, c.miss_ratios, (r, ra, w, wa)))
}

/// (offsets, sizes) mapped onto a target as the engine maps them (`engine::Mapper`), so an
/// exported schedule addresses exactly what `iotwin run` touches.
#[pyfunction]
fn map_offsets<'py>(
    py: Python<'py>,
    offset: &Bound<'py, PyAny>,
    size: &Bound<'py, PyAny>,
    capacity: u64,
    target: u64,
    align: u64,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let m = crate::engine::Mapper {
        capacity,
        target,
        align,
    };
    let off: Vec<u64> = buffer_vec(offset)?;
    let sz: Vec<u32> = buffer_vec(size)?;
    let mut o2 = Vec::with_capacity(off.len());
    let mut s2 = Vec::with_capacity(off.len());
    for (&o, &s) in off.iter().zip(&sz) {
        let (a, b) = m
            .map(o, s)
            .ok_or_else(|| PyValueError::new_err("the target is smaller than one block"))?;
        o2.push(a);
        s2.push(b);
    }
    Ok((vec_bytes(py, &o2), vec_bytes(py, &s2)))
}

fn hist_to_py<'py>(
    py: Python<'py>,
    h: &hdrhistogram::Histogram<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let empty = h.is_empty();
    let q = |x: f64| if empty { 0 } else { h.value_at_quantile(x) };
    d.set_item("count", h.len())?;
    d.set_item("mean", if empty { 0.0 } else { h.mean() })?;
    d.set_item("p50", q(0.5))?;
    d.set_item("p90", q(0.9))?;
    d.set_item("p99", q(0.99))?;
    d.set_item("p99.9", q(0.999))?;
    d.set_item("max", if empty { 0 } else { h.max() })?;
    Ok(d)
}

fn engine_stats_to_py<'py>(
    py: Python<'py>,
    s: &crate::engine::stats::StreamStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("requests", s.requests)?;
    d.set_item("reads", s.reads)?;
    d.set_item("writes", s.writes)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("errors", s.errors)?;
    d.set_item("lateness_ns", hist_to_py(py, &s.lateness)?)?;
    d.set_item("service_ns", hist_to_py(py, &s.service)?)?;
    d.set_item("response_ns", hist_to_py(py, &s.response)?)?;
    Ok(d)
}

/// A run of the I/O engine on its own thread; Python polls `progress()` and asks for
/// `result()` (which waits, without the GIL) at the end. `stop()` makes the engine stop
/// issuing, drain what is in flight and return a partial result.
#[pyclass]
struct EngineRun {
    progress: std::sync::Arc<crate::engine::Progress>,
    handle: Option<std::thread::JoinHandle<Result<crate::engine::RunResult, String>>>,
}

type TraceBuffers<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

#[pymethods]
impl EngineRun {
    /// Starts a run. The source is a model (`model_json`: its text or dict; with `requests` or
    /// `synth_duration_ns`, intensity, compress, seed) or a trace's columns (`trace`: ts_ns, stream, op, offset,
    /// size buffers). The target is one file or device (`paths` of one), mapped onto
    /// proportionally, or replica files with their (base, size) on the virtual device
    /// (`files`).
    #[new]
    #[pyo3(signature = (paths, direct, write, engine, iodepth, max_inflight, duration_ns, capacity,
        target_size, align, record, model_json=None, requests=None, synth_duration_ns=None,
        intensity=1.0, compress=1.0, seed=0, trace=None, files=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        paths: Vec<std::path::PathBuf>,
        direct: bool,
        write: bool,
        engine: &str,
        iodepth: Option<usize>,
        max_inflight: usize,
        duration_ns: Option<i64>,
        capacity: u64,
        target_size: u64,
        align: u64,
        record: bool,
        model_json: Option<Bound<'py, PyAny>>,
        requests: Option<u64>,
        synth_duration_ns: Option<i64>,
        intensity: f64,
        compress: f64,
        seed: u64,
        trace: Option<TraceBuffers<'py>>,
        files: Option<Vec<(u64, u64)>>,
    ) -> PyResult<Self> {
        use crate::engine::{Config, Extent, Kind, Layout, Mapper, Mode, Progress, Source};
        use crate::model::sample::SynthParams;
        let kind = match engine {
            "io_uring" => Kind::IoUring,
            "threads" => Kind::Threads,
            other => return Err(PyValueError::new_err(format!("unknown engine '{other}'"))),
        };
        let source = match (model_json, trace) {
            (Some(model), None) => {
                let p = SynthParams {
                    requests,
                    duration_ns: synth_duration_ns,
                    intensity,
                    compress,
                    seed,
                    uniform: false,
                };
                let sampler = checked_sampler(&model, &p)?;
                py.detach(|| Source::Synth(Box::new(sampler.stream(p))))
            }
            (None, Some((ts, stream, op, offset, size))) => {
                let mut cols = Columns::with_capacity(0);
                cols.ts_ns = buffer_vec(&ts)?;
                cols.stream = buffer_vec(&stream)?;
                cols.op = buffer_vec(&op)?;
                cols.offset = buffer_vec(&offset)?;
                cols.size = buffer_vec(&size)?;
                Source::Trace { cols, pos: 0 }
            }
            _ => return Err(PyValueError::new_err("give a model or a trace")),
        };
        let layout = match files {
            Some(f) => Layout::Files(
                f.into_iter()
                    .map(|(base, size)| Extent { base, size })
                    .collect(),
            ),
            None => Layout::Proportional(Mapper {
                capacity,
                target: target_size,
                align,
            }),
        };
        if paths.len()
            != if let Layout::Files(f) = &layout {
                f.len()
            } else {
                1
            }
        {
            return Err(PyValueError::new_err("one path per target file"));
        }
        let cfg = Config {
            paths,
            direct,
            write,
            kind,
            mode: match iodepth {
                Some(n) => Mode::Closed { iodepth: n },
                None => Mode::Open,
            },
            max_inflight,
            duration_ns,
            layout,
            record,
        };
        let progress = std::sync::Arc::new(Progress::default());
        let p = progress.clone();
        let handle = std::thread::Builder::new()
            .name("iotwin-engine".into())
            .spawn(move || crate::engine::run(&cfg, source, p))
            .map_err(|e| PyValueError::new_err(format!("cannot start the engine: {e}")))?;
        Ok(EngineRun {
            progress,
            handle: Some(handle),
        })
    }

    /// Live counters; `max_late_ns` is the largest lateness since the previous call.
    fn progress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering::Relaxed;
        let p = &self.progress;
        let d = PyDict::new(py);
        d.set_item("issued", p.issued.load(Relaxed))?;
        d.set_item("completed", p.completed.load(Relaxed))?;
        d.set_item("bytes", p.bytes.load(Relaxed))?;
        d.set_item("errors", p.errors.load(Relaxed))?;
        d.set_item("elapsed_ns", p.elapsed_ns.load(Relaxed))?;
        d.set_item("max_late_ns", p.max_late_ns.swap(0, Relaxed).max(0))?;
        Ok(d)
    }

    fn stop(&self) {
        self.progress.request_stop();
    }

    fn finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Waits for the end (without the GIL) and returns the result as a dict.
    fn result<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = self
            .handle
            .take()
            .ok_or_else(|| PyValueError::new_err("the result was already taken"))?;
        let r = py
            .detach(|| h.join())
            .map_err(|_| PyValueError::new_err("the engine thread panicked"))?
            .map_err(PyValueError::new_err)?;
        let d = PyDict::new(py);
        d.set_item("partial", r.partial)?;
        d.set_item("elapsed_ns", r.elapsed_ns)?;
        d.set_item("first_error", r.first_error.clone())?;
        d.set_item("skipped", r.skipped)?;
        d.set_item("folded", r.folded)?;
        d.set_item("clamped", r.clamped)?;
        d.set_item("max_inflight_seen", r.max_inflight_seen)?;
        d.set_item("total", engine_stats_to_py(py, &r.total)?)?;
        let streams = PyDict::new(py);
        for (id, s) in &r.streams {
            streams.set_item(id, engine_stats_to_py(py, s)?)?;
        }
        d.set_item("streams", streams)?;
        let tl = PyList::empty(py);
        for s in &r.timeline {
            tl.append((s.requests, s.reads, s.writes, s.bytes))?;
        }
        d.set_item("timeline", tl)?;
        if let Some(rec) = &r.record {
            let rd = PyDict::new(py);
            rd.set_item("sched_ns", vec_bytes(py, &rec.sched_ns))?;
            rd.set_item("issue_ns", vec_bytes(py, &rec.issue_ns))?;
            rd.set_item("done_ns", vec_bytes(py, &rec.done_ns))?;
            rd.set_item("stream", vec_bytes(py, &rec.stream))?;
            rd.set_item("op", vec_bytes(py, &rec.op))?;
            rd.set_item("offset", vec_bytes(py, &rec.offset))?;
            rd.set_item("size", vec_bytes(py, &rec.size))?;
            rd.set_item("file", vec_bytes(py, &rec.file))?;
            rd.set_item("target_offset", vec_bytes(py, &rec.target_offset))?;
            rd.set_item("target_size", vec_bytes(py, &rec.target_size))?;
            d.set_item("record", rd)?;
        }
        Ok(d)
    }
}

/// Whether io_uring works here (kernel, seccomp) with timed waits.
#[pyfunction]
fn io_uring_available() -> bool {
    io_uring::IoUring::new(8).is_ok_and(|r| r.params().is_feature_ext_arg())
}

#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn device_report_to_py<'py>(
    py: Python<'py>,
    r: &crate::sim::device::DeviceReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("busy_ns", r.busy_ns)?;
    d.set_item("servers", r.servers)?;
    d.set_item("cache_hits", r.cache_hits)?;
    d.set_item("cache_misses", r.cache_misses)?;
    d.set_item("writebacks", r.writebacks)?;
    let parts = PyDict::new(py);
    for (name, part) in &r.parts {
        parts.set_item(name, device_report_to_py(py, part)?)?;
    }
    d.set_item("parts", parts)?;
    Ok(d)
}

/// Simulates a trace on a device built from a JSON spec; see `sim::simulate`. Writes every
/// request's response time and demand into `response_ns` and `demand_ns` (writable uint64
/// arrays of the trace's length) and returns the counters. `space` (uint32, one per request)
/// names each request's address space where several volumes share the device.
#[pyfunction]
#[pyo3(signature = (ts_ns, op, offset, size, device_json, seed, intensity, response_ns, demand_ns, space=None))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    ts_ns: &Bound<'py, PyAny>,
    op: &Bound<'py, PyAny>,
    offset: &Bound<'py, PyAny>,
    size: &Bound<'py, PyAny>,
    device_json: &str,
    seed: u64,
    intensity: f64,
    response_ns: &Bound<'py, PyAny>,
    demand_ns: &Bound<'py, PyAny>,
    space: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec: serde_json::Value = serde_json::from_str(device_json)
        .map_err(|e| PyValueError::new_err(format!("device spec is not JSON: {e}")))?;
    let mut device = crate::sim::device::build(&spec, seed).map_err(PyValueError::new_err)?;
    let bufs = (
        PyBuffer::<i64>::get(ts_ns)?,
        PyBuffer::<u8>::get(op)?,
        PyBuffer::<u64>::get(offset)?,
        PyBuffer::<u32>::get(size)?,
    );
    let space_buf = space.map(PyBuffer::<u32>::get).transpose()?;
    let req = crate::sim::Requests {
        ts_ns: buffer_slice(&bufs.0)?,
        op: buffer_slice(&bufs.1)?,
        offset: buffer_slice(&bufs.2)?,
        size: buffer_slice(&bufs.3)?,
        space: space_buf.as_ref().map(buffer_slice).transpose()?,
    };
    let outs = (
        PyBuffer::<u64>::get(response_ns)?,
        PyBuffer::<u64>::get(demand_ns)?,
    );
    let out = crate::sim::PerRequest {
        response_ns: buffer_slice_mut(&outs.0)?,
        demand_ns: buffer_slice_mut(&outs.1)?,
    };
    let res = py
        .detach(|| crate::sim::simulate(device.as_mut(), &req, intensity, out))
        .map_err(PyValueError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("requests", res.requests)?;
    d.set_item("arrival_span_ns", res.arrival_span_ns)?;
    d.set_item("completion_span_ns", res.completion_span_ns)?;
    d.set_item("device", device_report_to_py(py, &res.device)?)?;
    Ok(d)
}

/// (name, about) of every device kind of the simulator, in registry order.
#[pyfunction]
fn device_kinds() -> Vec<(&'static str, &'static str)> {
    crate::sim::device::DEVICE_KINDS
        .iter()
        .map(|k| (k.name, k.about))
        .collect()
}

/// Runs a block stream (uint64 buffer) through a fresh cache policy without the GIL;
/// returns (hits, misses). See `sim::cache`.
#[pyfunction]
fn cache_simulate(
    py: Python<'_>,
    blocks: &Bound<'_, PyAny>,
    policy: &str,
    capacity_blocks: usize,
) -> PyResult<(u64, u64)> {
    use crate::sim::cache::{make_policy, simulate};
    let mut cache = make_policy(policy, capacity_blocks).map_err(PyValueError::new_err)?;
    let buf = PyBuffer::<u64>::get(blocks)?;
    let blocks = buffer_slice(&buf)?;
    Ok(py.detach(|| simulate(cache.as_mut(), blocks)))
}

/// (name, about) of every cache policy, in registry order.
#[pyfunction]
fn cache_policies() -> Vec<(&'static str, &'static str)> {
    crate::sim::cache::POLICIES
        .iter()
        .map(|p| (p.name, p.about))
        .collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(parse_vscsi, m)?)?;
    m.add_function(wrap_pyfunction!(detect_vscsi, m)?)?;
    m.add_function(wrap_pyfunction!(detect_blktrace, m)?)?;
    m.add_class::<BlktraceReader>()?;
    m.add_function(wrap_pyfunction!(parse_blkparse, m)?)?;
    m.add_function(wrap_pyfunction!(detect_fio_iolog, m)?)?;
    m.add_class::<FioIologReader>()?;
    m.add_function(wrap_pyfunction!(inspect_strace, m)?)?;
    m.add_class::<StraceParser>()?;
    m.add_function(wrap_pyfunction!(characterize_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(fit_model, m)?)?;
    m.add_function(wrap_pyfunction!(lru_miss_ratios, m)?)?;
    m.add_function(wrap_pyfunction!(synth_model, m)?)?;
    m.add_class::<SynthStream>()?;
    m.add_class::<PartitionFit>()?;
    m.add_function(wrap_pyfunction!(merge_partitions, m)?)?;
    m.add_function(wrap_pyfunction!(finalize_partitions, m)?)?;
    m.add_class::<TieCounter>()?;
    m.add_class::<PartitionCharacterize>()?;
    m.add_class::<TraceCharacterize>()?;
    m.add_function(wrap_pyfunction!(merge_characterizations, m)?)?;
    m.add_function(wrap_pyfunction!(finalize_characterization, m)?)?;
    m.add_function(wrap_pyfunction!(map_offsets, m)?)?;
    m.add_class::<EngineRun>()?;
    m.add_function(wrap_pyfunction!(io_uring_available, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(device_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(cache_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(cache_policies, m)?)?;
    Ok(())
}
