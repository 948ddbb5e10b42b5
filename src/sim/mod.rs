//! The storage simulator. `cache` holds the SSD-cache replacement policies.
pub mod cache;
