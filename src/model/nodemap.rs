//! Values kept per node of the model's tree, looked up by (depth, node) at every level of
//! every request the sampler walks: a table indexed by node where the tree is small enough
//! for one, else a hash map (hashing them was a tenth of sampling).

use rustc_hash::FxHashMap;

use super::tree::Tree;

/// A table is used while it has at most this many slots, or at most `DENSE_PER_VALUE` slots
/// per value held (sparse deep trees keep the map: a stream of few rows at 8 levels would
/// otherwise hold 87,381 slots, and models have thousands of streams).
const DENSE_SLOTS: u64 = 1 << 12;
const DENSE_PER_VALUE: u64 = 16;

#[derive(Debug, Clone)]
pub enum NodeMap<T> {
    Dense {
        /// The first slot of each depth's nodes, and one past the last slot.
        base: Vec<u64>,
        slots: Vec<Option<T>>,
    },
    Sparse(FxHashMap<(u32, u64), T>),
}

impl<T> Default for NodeMap<T> {
    fn default() -> NodeMap<T> {
        NodeMap::Sparse(FxHashMap::default())
    }
}

impl<T: Clone> NodeMap<T> {
    /// The map of `values` over the nodes of `tree`, dense or sparse by their count.
    pub fn new(tree: &Tree, values: FxHashMap<(u32, u64), T>) -> NodeMap<T> {
        let fanout = tree.fanout as u64;
        let mut base = Vec::with_capacity(tree.levels as usize + 2);
        let mut total = 0u64;
        for depth in 0..=tree.levels {
            base.push(total);
            total = total.saturating_add(fanout.saturating_pow(depth));
        }
        base.push(total); // where the slots end
        let limit = DENSE_SLOTS.max(DENSE_PER_VALUE.saturating_mul(values.len() as u64));
        // a node its depth does not have (a document's leaf past the tree) keeps the map,
        // which holds any key, rather than landing in another node's slot
        let fits = values.keys().all(|&(d, n)| slot(&base, d, n).is_some());
        if total > limit || !fits {
            return NodeMap::Sparse(values);
        }
        let mut slots = vec![None; total as usize];
        for ((depth, node), v) in values {
            if let Some(at) = slot(&base, depth, node) {
                slots[at] = Some(v);
            }
        }
        NodeMap::Dense { base, slots }
    }

    pub fn get(&self, depth: u32, node: u64) -> Option<&T> {
        match self {
            NodeMap::Dense { base, slots } => slots.get(slot(base, depth, node)?)?.as_ref(),
            NodeMap::Sparse(map) => map.get(&(depth, node)),
        }
    }

    pub fn get_mut(&mut self, depth: u32, node: u64) -> Option<&mut T> {
        match self {
            NodeMap::Dense { base, slots } => slots.get_mut(slot(base, depth, node)?)?.as_mut(),
            NodeMap::Sparse(map) => map.get_mut(&(depth, node)),
        }
    }
}

/// A node's slot in a dense table (None for a node its depth does not have).
fn slot(base: &[u64], depth: u32, node: u64) -> Option<usize> {
    let (first, end) = (*base.get(depth as usize)?, *base.get(depth as usize + 1)?);
    let at = first.checked_add(node)?;
    (at < end).then_some(at as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[((u32, u64), u32)]) -> FxHashMap<(u32, u64), u32> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn dense_and_sparse_maps_hold_the_same_values() {
        let pairs = [((0, 0), 7), ((1, 3), 8), ((2, 0), 9), ((2, 15), 10)];
        let small = NodeMap::new(&Tree::new(2, 4, 1600), values(&pairs));
        assert!(matches!(small, NodeMap::Dense { .. }));
        // 4^8 leaves: a table of 87,381 slots for four values is not worth it
        let deep = NodeMap::new(&Tree::new(8, 4, 1 << 30), values(&pairs));
        assert!(matches!(deep, NodeMap::Sparse(_)));
        for map in [&small, &deep] {
            for &((d, n), v) in &pairs {
                assert_eq!(map.get(d, n), Some(&v));
            }
            assert_eq!(map.get(1, 2), None);
            assert_eq!(map.get(2, 14), None);
        }
        assert_eq!(small.get(3, 0), None); // below the leaves
        assert_eq!(small.get(1, 4), None); // depth 1 has 4 nodes: not depth 2's node 0
        let mut m = small.clone();
        *m.get_mut(2, 15).unwrap() += 1;
        assert_eq!(m.get(2, 15), Some(&11));
        assert_eq!(m.get_mut(1, 0), None);
        // node 16 does not exist at depth 2 of a fanout-4 tree: kept apart, not in a slot
        let past = NodeMap::new(&Tree::new(2, 4, 1600), values(&[((1, 3), 8), ((2, 16), 1)]));
        assert!(matches!(past, NodeMap::Sparse(_)));
        assert_eq!((past.get(2, 16), past.get(3, 0)), (Some(&1), None));
    }
}
