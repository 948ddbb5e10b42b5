//! Cache policies (interface; the policies land from the cache branch).

/// A fixed-capacity cache of equal-sized blocks (4 KiB in the simulator).
pub trait CachePolicy: Send {
    /// Looks `block` up; on a miss inserts it. Returns true on a hit. Blocks pushed out
    /// to make room are appended to `evicted` (the tiered device writes back dirty ones).
    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn capacity(&self) -> usize;
}

pub struct PolicyInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub make: fn(usize) -> Box<dyn CachePolicy>,
}

pub const POLICIES: &[PolicyInfo] = &[];

pub fn make_policy(name: &str, capacity_blocks: usize) -> Result<Box<dyn CachePolicy>, String> {
    POLICIES
        .iter()
        .find(|p| p.name == name)
        .map(|p| (p.make)(capacity_blocks))
        .ok_or_else(|| format!("unknown cache policy {name:?}"))
}
