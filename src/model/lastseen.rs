//! Where each block was last seen, in the fitter's stack-distance pass and in the sampler's
//! re-reference history: a table indexed by block when the blocks are few enough, a hash map
//! otherwise. The table takes no hashing and one memory access per request, which made it
//! several times faster than the map on the bench traces.

use rustc_hash::FxHashMap;

/// Tables take at most this many cells more than the stream has requests (4 bytes each).
const TABLE_SLACK: u64 = 1 << 24;
/// A table cell: 0 never seen, else the stored value + 1 (u32::MAX stays u32::MAX).
const NEVER: u32 = 0;

#[derive(Debug, Clone)]
pub enum LastSeen {
    Table(Vec<u32>),
    Map(FxHashMap<u64, u32>),
}

impl LastSeen {
    /// For a stream of `requests` accesses to blocks below `blocks`.
    pub fn new(requests: usize, blocks: u64) -> LastSeen {
        let limit = (requests as u64)
            .saturating_mul(4)
            .saturating_add(TABLE_SLACK);
        LastSeen::with_limit(blocks, limit)
    }

    /// For blocks below `blocks`: a table where they are at most `limit`, else a map.
    pub fn with_limit(blocks: u64, limit: u64) -> LastSeen {
        if blocks <= limit {
            // zeroed memory comes untouched from the kernel: pages appear as blocks are seen
            let table = vec![NEVER; blocks as usize];
            crate::hugepages::advise(&table);
            LastSeen::Table(table)
        } else {
            LastSeen::Map(FxHashMap::default())
        }
    }

    /// Records `value` for `block` and returns the previous one, as `HashMap::insert` does.
    /// `value` is a position below u32::MAX - 1, or u32::MAX.
    #[inline]
    pub fn insert(&mut self, block: u64, value: u32) -> Option<u32> {
        match self {
            LastSeen::Table(t) => {
                let b = block as usize;
                if b >= t.len() {
                    t.resize(b + 1, NEVER); // a block past the space (an aligned offset)
                }
                decode(std::mem::replace(&mut t[b], value.saturating_add(1)))
            }
            LastSeen::Map(m) => m.insert(block, value),
        }
    }

    /// Asks the memory for `block`'s cell of a table, to be read a few requests later (the
    /// table is too large for the caches, and its cells are the distance pass's wait).
    #[inline]
    pub fn prefetch(&self, block: u64) {
        if let LastSeen::Table(t) = self {
            if let Some(cell) = t.get(block as usize) {
                crate::prefetch::prefetch(cell);
            }
        }
    }

    /// The value recorded for `block`, if any.
    pub fn get(&self, block: u64) -> Option<u32> {
        match self {
            LastSeen::Table(t) => decode(t.get(block as usize).copied().unwrap_or(NEVER)),
            LastSeen::Map(m) => m.get(&block).copied(),
        }
    }
}

/// The value a table cell holds (see NEVER).
#[inline]
fn decode(cell: u32) -> Option<u32> {
    match cell {
        NEVER => None,
        u32::MAX => Some(u32::MAX),
        v => Some(v - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_map_agree() {
        let mut table = LastSeen::new(10, 100);
        let mut map = LastSeen::new(0, u64::MAX);
        assert!(matches!(table, LastSeen::Table(_)));
        assert!(matches!(map, LastSeen::Map(_)));
        for (b, v) in [
            (5u64, 0u32),
            (7, u32::MAX),
            (5, 3),
            (7, 4),
            (99, 0),
            (5, u32::MAX),
        ] {
            assert_eq!(table.insert(b, v), map.insert(b, v), "{b} {v}");
            assert_eq!(table.get(b), map.get(b));
        }
    }
}
