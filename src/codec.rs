//! Little-endian encoding shared by the partition formats (model fit statistics, characterize
//! parts): writers that append to a buffer, and a reader that names the byte where bad input
//! stops it.

pub fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}
pub fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}
pub fn put_i64(w: &mut Vec<u8>, v: i64) {
    w.extend_from_slice(&v.to_le_bytes());
}
pub fn put_u128(w: &mut Vec<u8>, v: u128) {
    w.extend_from_slice(&v.to_le_bytes());
}

pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn u128(&mut self) -> Result<u128, String> {
        Ok(u128::from_le_bytes(self.array()?))
    }
    /// A count of items of at least `item` bytes each that follow; bounded by the bytes left,
    /// so bad input cannot make the reader reserve or loop without end.
    pub fn len(&mut self, item: usize) -> Result<usize, String> {
        let n = self.u64()?;
        if n.saturating_mul(item as u64) > (self.buf.len() - self.at) as u64 {
            return Err(format!("bad item count {n} at byte {}", self.at - 8));
        }
        Ok(n as usize)
    }
    pub fn flag(&mut self) -> Result<bool, String> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("bad flag {v} at byte {}", self.at - 1)),
        }
    }
}
