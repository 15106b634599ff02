//! Injected randomness: lock tokens and jitter never come from a hidden global source.

/// A source of random bytes. Production uses the OS CSPRNG ([`OsRandom`]); tests use a seed.
pub trait RandomSource: Send {
    /// Fills `buf` with random bytes.
    fn fill(&mut self, buf: &mut [u8]);

    /// A uniformly distributed `u64`.
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill(&mut b);
        u64::from_le_bytes(b)
    }
}

/// The operating system's CSPRNG (`getrandom`; `crypto.getRandomValues` on wasm32).
#[cfg(feature = "os-random")]
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

#[cfg(feature = "os-random")]
impl RandomSource for OsRandom {
    fn fill(&mut self, buf: &mut [u8]) {
        // A CSPRNG that cannot produce bytes leaves no safe way to mint owner tokens;
        // this is an environment invariant, not input from a user or server.
        getrandom::fill(buf).expect("the OS random source failed");
    }
}

/// [`OsRandom`] drawn in blocks, for targets where each draw is costly: on wasm32 every
/// `getrandom` call is a call into `crypto.getRandomValues`, which would otherwise cost more than
/// the rest of an acquire (the Node binding's engine). Bytes are served once each, in order.
#[cfg(feature = "os-random")]
pub struct BufferedOsRandom {
    buf: Box<[u8; BufferedOsRandom::BLOCK]>,
    pos: usize,
}

#[cfg(feature = "os-random")]
impl BufferedOsRandom {
    const BLOCK: usize = 4096;

    /// An empty buffer: the first draw fills it.
    pub fn new() -> Self {
        BufferedOsRandom { buf: Box::new([0; Self::BLOCK]), pos: Self::BLOCK }
    }
}

#[cfg(feature = "os-random")]
impl Default for BufferedOsRandom {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "os-random")]
impl RandomSource for BufferedOsRandom {
    fn fill(&mut self, out: &mut [u8]) {
        if out.len() > Self::BLOCK {
            return OsRandom.fill(out);
        }
        if Self::BLOCK - self.pos < out.len() {
            OsRandom.fill(&mut self.buf[..]);
            self.pos = 0;
        }
        out.copy_from_slice(&self.buf[self.pos..self.pos + out.len()]);
        // Served bytes are wiped so a token never stays readable in the buffer.
        self.buf[self.pos..self.pos + out.len()].fill(0);
        self.pos += out.len();
    }
}

/// A deterministic generator (SplitMix64) for simulation tests. Not for production tokens.
#[derive(Debug, Clone)]
pub struct SeededRandom {
    state: u64,
}

impl SeededRandom {
    /// A generator whose whole output is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRandom { state: seed }
    }
}

impl RandomSource for SeededRandom {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(all(test, feature = "os-random"))]
mod tests {
    use super::*;

    #[test]
    fn a_buffered_source_serves_each_byte_once_and_wipes_it() {
        let mut r = BufferedOsRandom::new();
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        r.fill(&mut a);
        r.fill(&mut b);
        assert_ne!(a, b, "two draws of 32 bytes never repeat");
        assert!(r.buf[..64].iter().all(|x| *x == 0), "served bytes are wiped");
        // Draws past the block refill it; one longer than a block bypasses it.
        for _ in 0..200 {
            r.fill(&mut a);
        }
        let mut big = vec![0u8; BufferedOsRandom::BLOCK + 1];
        r.fill(&mut big);
        assert!(big.iter().any(|x| *x != 0));
    }
}
