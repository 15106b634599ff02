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
