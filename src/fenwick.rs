//! Fenwick (binary indexed) trees of counts: prefix sums and the k-th unit in O(log n). One
//! walk for every counter width: the sampler's budgets keep `i64` counts, the rank sets'
//! chunk counts `u32` (`rankset.rs`).

/// A counter a tree holds: added to with wrapping (a `u32` counter takes -1 as `u32::MAX`)
/// and read as a signed sum.
pub trait Count: Copy + Default {
    fn plus(self, delta: i64) -> Self;
    fn get(self) -> i64;
}

impl Count for i64 {
    #[inline]
    fn plus(self, delta: i64) -> i64 {
        self.wrapping_add(delta)
    }
    #[inline]
    fn get(self) -> i64 {
        self
    }
}

impl Count for u32 {
    #[inline]
    fn plus(self, delta: i64) -> u32 {
        self.wrapping_add(delta as u32)
    }
    #[inline]
    fn get(self) -> i64 {
        self as i64
    }
}

/// Counts at positions 0..n.
#[derive(Debug, Clone)]
pub struct Fenwick<T> {
    /// 1-based: node i covers the positions (i - lowbit(i), i].
    tree: Vec<T>,
}

impl<T: Count> Fenwick<T> {
    pub fn new(n: usize) -> Fenwick<T> {
        Fenwick {
            tree: vec![T::default(); n + 1],
        }
    }

    /// Adds `delta` at position `i`.
    #[inline]
    pub fn add(&mut self, i: usize, delta: i64) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].plus(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// The sum of positions [0, i).
    #[inline]
    pub fn prefix(&self, i: usize) -> u64 {
        let mut i = i;
        let mut s = 0i64;
        while i > 0 {
            s += self.tree[i].get();
            i -= i & i.wrapping_neg();
        }
        s as u64
    }

    pub fn len(&self) -> usize {
        self.tree.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The smallest position p with prefix(p + 1) >= k (k >= 1, counts non-negative): where
    /// the k-th unit lies. Returns `len()` when the total is below k.
    #[inline]
    pub fn find_kth(&self, k: u64) -> usize {
        self.descend(k).0
    }

    /// `find_kth`'s position and how many units of k are left at it (k minus the sum below).
    #[inline]
    pub fn descend(&self, k: u64) -> (usize, u64) {
        let mut pos = 0usize;
        let mut rem = k as i64;
        let mut step = self.tree.len().next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next < self.tree.len() && self.tree[next].get() < rem {
                pos = next;
                rem -= self.tree[next].get();
            }
            step >>= 1;
        }
        (pos, rem as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Count>() {
        let mut f = Fenwick::<T>::new(10);
        for p in [1, 4, 4, 7, 9] {
            f.add(p, 1);
        }
        f.add(4, -1);
        let prefixes: Vec<u64> = (0..=10).map(|i| f.prefix(i)).collect();
        assert_eq!(prefixes, vec![0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4]);
        let kth: Vec<usize> = (1..=5).map(|k| f.find_kth(k)).collect();
        assert_eq!(kth, vec![1, 4, 7, 9, 10]);
        assert_eq!(f.descend(3), (7, 1));
    }

    #[test]
    fn every_width_counts_alike() {
        check::<i64>();
        check::<u32>();
    }
}
