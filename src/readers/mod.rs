//! Parsers for binary and irregular-text trace formats, one file each. Delimited text formats
//! are read with polars on the Python side.

pub mod blkparse;
pub mod blktrace;
pub mod fio_iolog;
pub mod strace;
pub mod vscsi;
