//! Doubly linked lists of slots in one array: the queues of LRU, ARC and S3-FIFO. Slots are
//! `u32` indices, so a node is 16 bytes and moving one costs a few stores, no allocation.

pub const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub struct Node {
    pub block: u64,
    prev: u32,
    next: u32,
}

/// One list: `head` is the newest (most recent) end, `tail` the oldest.
#[derive(Clone, Copy)]
pub struct List {
    pub head: u32,
    pub tail: u32,
    pub len: usize,
}

impl List {
    pub const fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// The nodes of every list of a policy, with a free list of released slots.
pub struct Slab {
    pub nodes: Vec<Node>,
    free: Vec<u32>,
}

impl Slab {
    /// Room for `n` live nodes without reallocating.
    pub fn with_capacity(n: usize) -> Self {
        Slab {
            nodes: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
        }
    }

    /// A detached node holding `block`.
    pub fn alloc(&mut self, block: u64) -> u32 {
        let node = Node {
            block,
            prev: NIL,
            next: NIL,
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Returns a detached node's slot to the free list.
    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    pub fn block(&self, i: u32) -> u64 {
        self.nodes[i as usize].block
    }

    /// The node after `i` towards the head (the next newer; NIL at the head).
    pub fn newer(&self, i: u32) -> u32 {
        self.nodes[i as usize].prev
    }

    pub fn push_head(&mut self, list: &mut List, i: u32) {
        let old = list.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old == NIL {
            list.tail = i;
        } else {
            self.nodes[old as usize].prev = i;
        }
        list.head = i;
        list.len += 1;
    }

    pub fn unlink(&mut self, list: &mut List, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev == NIL {
            list.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        list.len -= 1;
    }

    pub fn move_to_head(&mut self, list: &mut List, i: u32) {
        if list.head != i {
            self.unlink(list, i);
            self.push_head(list, i);
        }
    }

    /// Detaches and returns the oldest node of `list` (which must not be empty).
    pub fn pop_tail(&mut self, list: &mut List) -> u32 {
        let t = list.tail;
        debug_assert!(t != NIL, "pop from an empty list");
        self.unlink(list, t);
        t
    }
}
