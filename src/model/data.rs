//! Where a file-level model's data lies on its virtual device.
//!
//! A file-level trace is fitted with its files laid end to end, each on a 1 MiB boundary
//! (`layout.py`), so the space between one file's end and the next file's start holds no
//! data. The tree's leaves do not follow files: a leaf may begin in one file's padding and
//! end in the next file. Placed by leaf alone, new data would land in padding, where a
//! replay credits it to the file before (pgbench's `pg_internal.init` lost 3.4% of its
//! requests to its neighbour, six seeds' mean). The sampler keeps new data, random requests
//! and sequential runs inside the files with this map. Block-level models have no map: all
//! space is data.

use rand::RngExt;
use rand_pcg::Pcg64Mcg;
use serde_json::Value;

/// The files' byte ranges [start, end), sorted and disjoint; empty for block-level models.
#[derive(Debug, Clone, Default)]
pub struct DataMap {
    pieces: Vec<(u64, u64)>,
    /// Bytes of the pieces before each piece (one more entry: all of them).
    before: Vec<u64>,
}

impl DataMap {
    /// From the model's `files` (each with `base` and `size`); empty without them.
    pub fn from_json(files: Option<&Value>) -> Result<DataMap, String> {
        let Some(list) = files.and_then(Value::as_array) else {
            return Ok(DataMap::default());
        };
        let mut pieces = Vec::with_capacity(list.len());
        for (i, f) in list.iter().enumerate() {
            let field = |k: &str| {
                f.get(k)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("files[{i}]: missing integer '{k}'"))
            };
            let base = field("base")?;
            pieces.push((base, base + field("size")?.max(1)));
        }
        pieces.sort_unstable();
        let before = std::iter::once(0)
            .chain(pieces.iter().scan(0, |sum, p| {
                *sum += p.1 - p.0;
                Some(*sum)
            }))
            .collect();
        Ok(DataMap { pieces, before })
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The first piece ending after `off`.
    fn first_after(&self, off: u64) -> usize {
        self.pieces.partition_point(|p| p.1 <= off)
    }

    /// Whether a request of `size` bytes at `off` lies inside one file (always, without a map).
    pub fn holds(&self, off: u64, size: u64) -> bool {
        if self.is_empty() {
            return true;
        }
        self.pieces
            .get(self.first_after(off))
            .is_some_and(|&(lo, hi)| lo <= off && off + size <= hi)
    }

    /// The data inside `room` to place a random request in: one file's part of it, chosen in
    /// proportion to its bytes there (so offsets stay uniform over the data). `room` itself
    /// without a map or where it holds no data; no draw where one file covers it.
    pub fn room(&self, (lo, hi): (u64, u64), rng: &mut Pcg64Mcg) -> (u64, u64) {
        let first = self.first_after(lo);
        let end = self.pieces.partition_point(|p| p.0 < hi);
        if first >= end {
            return (lo, hi);
        }
        let clip = |i: usize| (self.pieces[i].0.max(lo), self.pieces[i].1.min(hi));
        if end - first == 1 {
            return clip(first);
        }
        // bytes of whole pieces from the prefix sums, less what lies outside the room
        let head = lo.saturating_sub(self.pieces[first].0);
        let tail = self.pieces[end - 1].1.saturating_sub(hi);
        let bytes = self.before[end] - self.before[first] - head - tail;
        let at = self.before[first] + head + rng.random_range(0..bytes);
        clip(self.before.partition_point(|&b| b <= at) - 1)
    }

    /// The first aligned offset at or after `off` where `size` bytes fit inside one file (a
    /// file smaller than the request takes it at its start); `off` itself without a map.
    pub fn next_fit(&self, off: u64, size: u64, align: u64) -> Option<u64> {
        if self.is_empty() {
            return Some(off);
        }
        for &(lo, hi) in &self.pieces[self.first_after(off)..] {
            let at = off.max(lo).div_ceil(align) * align;
            let start = lo.div_ceil(align) * align;
            if at + size <= hi || (at == start && at < hi) {
                return Some(at);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    fn two_files() -> DataMap {
        // 10 KiB at 0, 4 KiB at 1 MiB
        let files = json!([{"base": 1 << 20, "size": 4096}, {"base": 0, "size": 10240}]);
        DataMap::from_json(Some(&files)).unwrap()
    }

    #[test]
    fn requests_fit_inside_one_file() {
        let m = two_files();
        assert!(m.holds(0, 10240));
        assert!(!m.holds(8192, 4096)); // runs 2 KiB past the first file's end
        assert!(!m.holds(20000, 512)); // padding
        assert!(m.holds((1 << 20) + 512, 512));
        assert!(DataMap::default().holds(20000, 512));
    }

    #[test]
    fn a_room_across_two_files_is_split_by_their_bytes() {
        let m = two_files();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let room = (8192, (1 << 20) + 65536);
        let mut first = 0;
        for _ in 0..6000 {
            match m.room(room, &mut rng) {
                (8192, 10240) => first += 1,
                r => assert_eq!(r, (1 << 20, (1 << 20) + 4096)),
            }
        }
        // 2 KiB of the first file against 4 KiB of the second: a third
        assert!((1800..2200).contains(&first), "{first}");
        assert_eq!(m.room((20000, 30000), &mut rng), (20000, 30000)); // no data: as it was
    }

    #[test]
    fn a_room_clipped_at_both_ends_draws_by_the_bytes_inside_it() {
        let files = json!([
            {"base": 0, "size": 10240},
            {"base": 1 << 20, "size": 4096},
            {"base": 2 << 20, "size": 8192}
        ]);
        let m = DataMap::from_json(Some(&files)).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        // 2 KiB of the first file, all 4 KiB of the second, 4 of the third's 8
        let room = (8192, (2 << 20) + 4096);
        let mut seen = std::collections::HashMap::new();
        for _ in 0..10_000 {
            *seen.entry(m.room(room, &mut rng)).or_insert(0) += 1;
        }
        let share = |r: (u64, u64)| seen[&r] as f64 / 10_000.0;
        assert_eq!(seen.len(), 3);
        assert!((share((8192, 10240)) - 0.2).abs() < 0.02);
        assert!((share((1 << 20, (1 << 20) + 4096)) - 0.4).abs() < 0.02);
        assert!((share((2 << 20, (2 << 20) + 4096)) - 0.4).abs() < 0.02);
    }

    #[test]
    fn new_data_skips_padding_to_the_next_file() {
        let m = two_files();
        assert_eq!(m.next_fit(4096, 4096, 4096), Some(4096));
        assert_eq!(m.next_fit(8192, 4096, 4096), Some(1 << 20)); // 2 KiB left: next file
        assert_eq!(m.next_fit(1 << 20, 8192, 4096), Some(1 << 20)); // a file smaller than it
        assert_eq!(m.next_fit((1 << 20) + 1, 4096, 4096), None);
        assert_eq!(DataMap::default().next_fit(5, 4096, 4096), Some(5));
    }
}
