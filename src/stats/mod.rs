//! Per-record statistics over canonical columns.
