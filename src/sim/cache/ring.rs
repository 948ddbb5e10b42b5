//! A ring of cache slots with a hand, shared by FIFO and CLOCK: slots fill in order, then the
//! hand replaces blocks in ring order, skipping the slots its policy spares this time round.

use super::blockmap::BlockMap;

pub struct Ring {
    capacity: usize,
    map: BlockMap,
    blocks: Vec<u64>,
    hand: usize,
}

impl Ring {
    pub fn new(capacity: usize) -> Self {
        Ring {
            capacity,
            map: BlockMap::with_capacity(capacity),
            blocks: Vec::with_capacity(capacity),
            hand: 0,
        }
    }

    /// The block's slot, when cached.
    pub fn slot(&self, block: u64) -> Option<usize> {
        self.map.get(block).map(|s| s as usize)
    }

    /// Inserts a block that is not cached (none when the capacity is 0) and returns its slot.
    /// Once the ring is full, the hand passes every slot `spare` returns true for (it may
    /// clear what spared it) and evicts the first it does not spare.
    pub fn insert(
        &mut self,
        block: u64,
        evicted: &mut Vec<u64>,
        mut spare: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        if self.capacity == 0 {
            return None;
        }
        let slot = if self.blocks.len() < self.capacity {
            self.blocks.push(block);
            self.blocks.len() - 1
        } else {
            while spare(self.hand) {
                self.hand = (self.hand + 1) % self.capacity;
            }
            let slot = self.hand;
            let old = std::mem::replace(&mut self.blocks[slot], block);
            self.map.remove(old);
            evicted.push(old);
            self.hand = (self.hand + 1) % self.capacity;
            slot
        };
        self.map.insert(block, slot as u32);
        Some(slot)
    }

    pub fn prefetch(&self, block: u64) {
        self.map.prefetch(block);
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
