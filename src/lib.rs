//! iotwin core: the hot paths of iotwin, free of Python except for `bindings`.
//!
//! `columns` holds the canonical trace columns every reader fills, `readers` the parsers for
//! binary and irregular-text formats, `stats` the per-record statistics. `bindings` is the thin
//! PyO3 layer that the Python package `iotwin` calls.

pub mod bindings;
pub mod codec;
pub mod columns;
pub mod engine;
pub mod fenwick;
pub mod hugepages;
pub mod model;
pub mod prefetch;
pub mod rankset;
pub mod readers;
pub mod sim;
pub mod stats;
