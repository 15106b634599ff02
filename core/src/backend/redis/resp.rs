//! RESP2, the Redis wire format, for drivers that own their socket (the Node binding's lean
//! transport): a pipeline of [`Command`]s as bytes, and the server's byte stream back as
//! [`Reply`] values, one whole reply at a time. Framing comes from the `redis-protocol` crate
//! (RESP2 only: the connections that use this never send `HELLO 3`); this module adds the
//! limits a stream from the network needs and the mapping onto the core's reply type. Pure
//! bytes in and out, no I/O: it builds for wasm32.
//!
//! Bad input is never a panic: a stream that breaks the format, nests arrays deeper than
//! [`MAX_DEPTH`] or announces a length over [`MAX_LEN`] is a `PROTOCOL` error, after which the
//! stream cannot be trusted (the connection must go). A reply that has not fully arrived is
//! kept until more bytes come.

use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::encode::encode_borrowed;
use redis_protocol::resp2::types::{BorrowedFrame, RangeFrame};

use super::reply::Reply;
use super::request::Command;
use crate::error::{Error, Result};

/// Arrays nested deeper than this are refused: the parser recurses once per level, and a
/// crafted stream of `*1\r\n` must not exhaust the stack (lockgate's replies nest two levels).
pub const MAX_DEPTH: usize = 32;
/// The largest bulk string or array length accepted (Redis' own `proto-max-bulk-len` default).
pub const MAX_LEN: usize = 512 * 1024 * 1024;

/// Appends each command of a pipeline to `out` as a RESP array of bulk strings.
pub fn encode(commands: &[Command], out: &mut Vec<u8>) {
    for c in commands {
        encode_command(c.0.iter().map(Vec::as_slice), out);
    }
}

/// Appends one command, given as its arguments' bytes, to `out` as a RESP array of bulk strings.
pub fn encode_command<'a>(args: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let args: Vec<BorrowedFrame<'_>> = args.into_iter().map(BorrowedFrame::BulkString).collect();
    let frame = BorrowedFrame::Array(&args);
    let start = out.len();
    out.resize(start + frame.encode_len(false), 0);
    // The buffer was sized by the frame's own `encode_len`, and bulk strings and arrays have no
    // invalid values: encoding cannot fail.
    encode_borrowed(&mut out[start..], &frame, false).expect("RESP buffer sized for the frame");
}

/// The reply at the start of `buf` and the bytes it took, `None` if it has not fully arrived,
/// or a `PROTOCOL` error if `buf` does not start with a valid RESP2 reply.
pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>> {
    if !within_limits(buf)? {
        return Ok(None);
    }
    match decode_range(buf) {
        Ok(Some((frame, used))) => Ok(Some((reply(buf, frame)?, used))),
        Ok(None) => Ok(None),
        Err(e) => Err(malformed(format_args!("{}", e.details()))),
    }
}

/// An incremental decoder: feed it the stream's bytes as they are read, in any slices.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Received bytes that do not yet make a whole reply.
    partial: Vec<u8>,
}

impl Decoder {
    /// Decodes `data` (the next bytes of the stream) and calls `each` with every reply it
    /// completes, in order; a reply still incomplete at the end waits for the next call. An
    /// `Err` (from the stream or from `each`) leaves the stream unusable: [`Decoder::clear`]
    /// before decoding a new connection's bytes.
    pub fn feed(&mut self, data: &[u8], mut each: impl FnMut(Reply) -> Result<()>) -> Result<()> {
        if self.partial.is_empty() {
            // The common case, a read of whole replies: decoded in place, nothing copied.
            let used = decode_all(data, &mut each)?;
            self.partial.extend_from_slice(&data[used..]);
        } else {
            self.partial.extend_from_slice(data);
            let buf = std::mem::take(&mut self.partial);
            let used = decode_all(&buf, &mut each);
            // Keep the allocation for the next partial reply.
            self.partial = buf;
            self.partial.drain(..used?);
        }
        Ok(())
    }

    /// How many received bytes wait for the rest of their reply.
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Drops the bytes of an unfinished reply (the connection they came from is gone).
    pub fn clear(&mut self) {
        self.partial.clear();
    }
}

/// Decodes every whole reply at the start of `buf`; returns how many bytes they took.
fn decode_all(buf: &[u8], each: &mut impl FnMut(Reply) -> Result<()>) -> Result<usize> {
    let mut pos = 0;
    while pos < buf.len() {
        let Some((reply, used)) = decode(&buf[pos..])? else {
            break;
        };
        pos += used;
        each(reply)?;
    }
    Ok(pos)
}

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::protocol(format!("malformed RESP reply from the server: {why}"))
}

/// The decoded frame as a [`Reply`]. Status and error lines are taken as UTF-8 with invalid
/// bytes replaced (they are only read for their code and shown in messages).
fn reply(buf: &[u8], frame: RangeFrame) -> Result<Reply> {
    let text = |(start, end): (usize, usize)| String::from_utf8_lossy(&buf[start..end]).into_owned();
    Ok(match frame {
        RangeFrame::Null => Reply::Nil,
        RangeFrame::Integer(i) => Reply::Int(i),
        RangeFrame::SimpleString(r) => Reply::Status(text(r)),
        RangeFrame::Error(r) => Reply::Error(text(r)),
        RangeFrame::BulkString((start, end)) => {
            // The parser takes any two bytes after the data; the format says CRLF.
            if buf.get(end..end + 2) != Some(&b"\r\n"[..]) {
                return Err(malformed("a bulk string does not end with CRLF"));
            }
            Reply::Data(buf[start..end].to_vec())
        }
        RangeFrame::Array(items) => {
            Reply::Array(items.into_iter().map(|f| reply(buf, f)).collect::<Result<_>>()?)
        }
    })
}

/// Walks the headers of the reply at the start of `buf`, without recursion, and refuses one
/// that nests arrays deeper than [`MAX_DEPTH`] or announces a length over [`MAX_LEN`]. `false`
/// if the reply has not fully arrived. Anything else wrong is left for the parser to name.
fn within_limits(buf: &[u8]) -> Result<bool> {
    // Items still expected by each array opened and not yet complete, innermost last.
    let mut open: Vec<usize> = Vec::new();
    let mut pos = 0;
    loop {
        let Some(&kind) = buf.get(pos) else {
            return Ok(false);
        };
        let Some(eol) = buf[pos + 1..].windows(2).position(|w| w == b"\r\n") else {
            return Ok(false);
        };
        let header = &buf[pos + 1..pos + 1 + eol];
        pos += eol + 3;
        let length = || -> Option<i64> { std::str::from_utf8(header).ok()?.parse().ok() };
        match kind {
            b'+' | b'-' | b':' => {}
            b'$' | b'*' => match length() {
                Some(n) if n > MAX_LEN as i64 => return Err(malformed(format_args!("length {n}"))),
                Some(n) if n > 0 && kind == b'*' => {
                    if open.len() >= MAX_DEPTH {
                        return Err(malformed("arrays nested too deeply"));
                    }
                    open.push(n as usize);
                    continue;
                }
                Some(n) if n > 0 => pos += n as usize + 2,
                Some(_) => {}
                None => return Ok(true),
            },
            _ => return Ok(true),
        }
        // One item is complete: so is every array it was the last item of.
        loop {
            match open.last_mut() {
                None => return Ok(pos <= buf.len()),
                Some(left) if *left > 1 => {
                    *left -= 1;
                    break;
                }
                Some(_) => {
                    open.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_walk_finds_the_end_of_nested_replies() {
        assert!(within_limits(b"*2\r\n*1\r\n:1\r\n$2\r\nab\r\n").unwrap());
        assert!(!within_limits(b"*2\r\n*1\r\n:1\r\n$2\r\na").unwrap());
        assert!(!within_limits(b"*2\r\n*1\r\n:1\r\n").unwrap());
        assert!(within_limits(b"*0\r\n").unwrap());
        assert!(within_limits(b"*-1\r\n").unwrap());
        let deep = b"*1\r\n".repeat(MAX_DEPTH);
        assert!(!within_limits(&deep).unwrap());
        assert!(within_limits(&[deep.as_slice(), b":1\r\n"].concat()).unwrap());
        assert!(within_limits(&b"*1\r\n".repeat(MAX_DEPTH + 1)).is_err());
    }
}
