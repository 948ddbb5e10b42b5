//! The hierarchical address-space tree of the model (seed 000, section III.B).
//!
//! The address space `[0, capacity)` is cut into `fanout^levels` equal leaves. A node is
//! `(depth, prefix)`: depth 0 is the root, a leaf sits at depth `levels`, and `prefix` is the
//! leaf index divided by `fanout^(levels - depth)`. A transition between two consecutive leaves
//! of a stream lives in the table of their deepest common ancestor, between the two children
//! that hold them; only the finest tables (depth `levels - 1`) hold self-transitions.

/// Geometry of a model's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    pub levels: u32,
    pub fanout: u32,
    pub capacity: u64,
    leaves: u64,
    /// log2(fanout) when the fanout is a power of two (the default 4): the walk asks for
    /// ancestors and digits at every level of every request, and shifts replace divisions.
    shift: Option<u32>,
}

/// Where a transition lives: the table's node and the children it goes between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransKey {
    pub depth: u32,
    pub prefix: u64,
    pub from: u32,
    pub to: u32,
}

impl Tree {
    pub fn new(levels: u32, fanout: u32, capacity: u64) -> Tree {
        let leaves = (fanout as u64).pow(levels);
        Tree {
            levels,
            fanout,
            capacity: capacity.max(1),
            leaves,
            shift: fanout.is_power_of_two().then(|| fanout.trailing_zeros()),
        }
    }

    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// The leaf holding a byte offset (offsets at or past the capacity go to the last leaf).
    pub fn leaf_of(&self, offset: u64) -> u64 {
        // 64-bit arithmetic when the product fits (always, for real devices): 128-bit
        // division dominated sampling
        let idx = match offset.checked_mul(self.leaves) {
            Some(product) => product / self.capacity,
            None => (offset as u128 * self.leaves as u128 / self.capacity as u128) as u64,
        };
        idx.min(self.leaves - 1)
    }

    /// First byte of a leaf, and the byte just past it.
    pub fn leaf_range(&self, leaf: u64) -> (u64, u64) {
        let start = (leaf as u128 * self.capacity as u128).div_ceil(self.leaves as u128) as u64;
        let end = ((leaf + 1) as u128 * self.capacity as u128).div_ceil(self.leaves as u128) as u64;
        (start, end.max(start + 1))
    }

    /// The number of leaves under one node at `depth`.
    pub fn span(&self, depth: u32) -> u64 {
        (self.fanout as u64).pow(self.levels - depth)
    }

    /// The node at `depth` above `leaf`.
    pub fn ancestor(&self, leaf: u64, depth: u32) -> u64 {
        match self.shift {
            Some(k) => leaf >> (k * (self.levels - depth)),
            None => leaf / self.span(depth),
        }
    }

    /// The child digit of `leaf`'s ancestor at `depth` (which child of that node holds it).
    pub fn digit(&self, leaf: u64, depth: u32) -> u32 {
        match self.shift {
            Some(k) => {
                ((leaf >> (k * (self.levels - depth - 1))) & (self.fanout as u64 - 1)) as u32
            }
            None => ((leaf / self.span(depth + 1)) % self.fanout as u64) as u32,
        }
    }

    /// Child `digit` of `node` (one depth below it).
    pub fn child(&self, node: u64, digit: u64) -> u64 {
        node * self.fanout as u64 + digit
    }

    /// The table a transition from leaf `p` to leaf `q` lives in.
    pub fn transition(&self, p: u64, q: u64) -> TransKey {
        let mut depth = self.levels - 1;
        if p != q {
            // deepest depth at which both leaves still share an ancestor
            depth = 0;
            while depth + 1 < self.levels
                && self.ancestor(p, depth + 1) == self.ancestor(q, depth + 1)
            {
                depth += 1;
            }
        }
        TransKey {
            depth,
            prefix: self.ancestor(p, depth),
            from: self.digit(p, depth),
            to: self.digit(q, depth),
        }
    }

    /// The possible transition count of the hierarchical model (seed 000, Table I):
    /// b^(L-1)·b² + Σ_{i=1}^{L-1} b^(i-1)·(b²-b).
    pub fn hierarchical_transition_count(levels: u32, fanout: u32) -> u64 {
        let b = fanout as u64;
        let mut total = b.pow(levels - 1) * b * b;
        for i in 1..levels {
            total += b.pow(i - 1) * (b * b - b);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_one_transition_counts() {
        let counts: Vec<u64> = (1..=5)
            .map(|l| Tree::hierarchical_transition_count(l, 4))
            .collect();
        assert_eq!(counts, vec![16, 76, 316, 1276, 5116]);
        assert_eq!(Tree::hierarchical_transition_count(10, 4), 5_242_876);
    }

    #[test]
    fn transitions_live_in_the_deepest_common_ancestor() {
        let t = Tree::new(2, 4, 1600); // 16 leaves of 100 bytes
        assert_eq!(t.leaf_of(0), 0);
        assert_eq!(t.leaf_of(1599), 15);
        assert_eq!(t.leaf_of(5000), 15);
        // leaves 1 and 2 share the root's child 0: a fine transition 1 -> 2 in node (1, 0)
        assert_eq!(
            t.transition(1, 2),
            TransKey {
                depth: 1,
                prefix: 0,
                from: 1,
                to: 2
            }
        );
        // leaves 1 and 6 only share the root: coarse transition child 0 -> child 1
        assert_eq!(
            t.transition(1, 6),
            TransKey {
                depth: 0,
                prefix: 0,
                from: 0,
                to: 1
            }
        );
        // self transition lives in the finest table
        assert_eq!(
            t.transition(6, 6),
            TransKey {
                depth: 1,
                prefix: 1,
                from: 2,
                to: 2
            }
        );
        assert_eq!(t.leaf_range(1), (100, 200));
    }
}
