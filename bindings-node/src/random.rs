//! Lock tokens from the OS CSPRNG, drawn in blocks: on wasm32 every `getrandom` call is a call
//! into `crypto.getRandomValues`, which would otherwise cost more than the rest of an acquire.

use lockgate_core::random::{OsRandom, RandomSource};

const BLOCK: usize = 4096;

/// [`OsRandom`] with a block buffer; bytes are served once each, in order.
pub struct BufferedOsRandom {
    buf: Box<[u8; BLOCK]>,
    pos: usize,
}

impl BufferedOsRandom {
    pub fn new() -> Self {
        BufferedOsRandom { buf: Box::new([0; BLOCK]), pos: BLOCK }
    }
}

impl RandomSource for BufferedOsRandom {
    fn fill(&mut self, out: &mut [u8]) {
        if out.len() > BLOCK {
            return OsRandom.fill(out);
        }
        if BLOCK - self.pos < out.len() {
            OsRandom.fill(&mut self.buf[..]);
            self.pos = 0;
        }
        out.copy_from_slice(&self.buf[self.pos..self.pos + out.len()]);
        // Served bytes are wiped so a token never stays readable in the buffer.
        self.buf[self.pos..self.pos + out.len()].fill(0);
        self.pos += out.len();
    }
}
