//! Per-record statistics over canonical columns.
pub mod characterize;
pub mod footprint;
pub mod mrc;
pub mod partial;
