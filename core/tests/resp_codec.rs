//! The RESP2 codec of `redis::resp` (the Node binding's lean socket): every reply shape the
//! Redis engine reads survives the trip through bytes, in any split of the stream, and no byte
//! sequence makes the decoder panic.

use lockgate_core::random::{RandomSource, SeededRandom};
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::resp::{self, Decoder, MAX_DEPTH};
use lockgate_core::backend::redis::Command;
use lockgate_core::ErrorKind;

/// The bytes a server sends for `r`, written independently of the codec under test.
fn wire(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Nil => b"$-1\r\n".to_vec(),
        Reply::Int(i) => format!(":{i}\r\n").into_bytes(),
        Reply::Status(s) => format!("+{s}\r\n").into_bytes(),
        Reply::Error(e) => format!("-{e}\r\n").into_bytes(),
        Reply::Data(d) => [format!("${}\r\n", d.len()).as_bytes(), d, b"\r\n"].concat(),
        Reply::Array(items) => {
            let mut out = format!("*{}\r\n", items.len()).into_bytes();
            for i in items {
                out.extend(wire(i));
            }
            out
        }
        Reply::Other(_) => unreachable!("RESP2 has no other reply types"),
    }
}

fn data(s: &str) -> Reply {
    Reply::Data(s.as_bytes().to_vec())
}

/// What the engine reads: script replies (acquire held / busy / mismatch, observe with and
/// without a holder, release and extend flags), NOSCRIPT and transient errors, OK and PONG,
/// SUBSCRIBE confirmations, WAIT counts, nil, binary values with CRLF inside, empty strings.
fn shapes() -> Vec<Reply> {
    vec![
        Reply::Array(vec![Reply::Int(1), data("17"), Reply::Int(500)]),
        Reply::Array(vec![Reply::Int(0), data("0"), Reply::Int(-1)]),
        Reply::Array(vec![Reply::Int(-1), data("permits"), data("3")]),
        Reply::Array(vec![]),
        Reply::Array(vec![data("node-1"), data("9"), Reply::Int(250)]),
        Reply::Int(1),
        Reply::Int(0),
        Reply::Int(i64::MIN),
        Reply::Int(i64::MAX),
        Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()),
        Reply::Error("BUSY Redis is busy running a script.".into()),
        Reply::Status("OK".into()),
        Reply::Status("PONG".into()),
        Reply::Array(vec![data("subscribe"), data("lockgate:{q}:c:abc"), Reply::Int(1)]),
        Reply::Nil,
        Reply::Data(vec![0, 255, b'\r', b'\n', 7]),
        data(""),
        Reply::Array(vec![Reply::Array(vec![Reply::Nil, Reply::Status("x".into())]), Reply::Array(vec![])]),
    ]
}

#[test]
fn every_reply_shape_round_trips() {
    for r in shapes() {
        let bytes = wire(&r);
        let (got, used) = resp::decode(&bytes).unwrap().expect("a whole reply");
        assert_eq!(got, r);
        assert_eq!(used, bytes.len(), "{r:?}");
        // Followed by more bytes, it takes only its own.
        let padded = [bytes.as_slice(), b":7\r\n"].concat();
        assert_eq!(resp::decode(&padded).unwrap(), Some((r.clone(), bytes.len())));
    }
    // The null array decodes to nil too.
    assert_eq!(resp::decode(b"*-1\r\n").unwrap(), Some((Reply::Nil, 5)));
}

/// Every prefix of a reply is "not yet", and a decoder fed the stream split at any byte (or
/// byte by byte) delivers the same replies in order.
#[test]
fn partial_frames_wait_for_the_rest() {
    let replies = shapes();
    let stream: Vec<u8> = replies.iter().flat_map(wire).collect();
    for r in &replies {
        let bytes = wire(r);
        for cut in 0..bytes.len() {
            assert_eq!(resp::decode(&bytes[..cut]).unwrap(), None, "{r:?} cut at {cut}");
        }
    }
    for split in 0..=stream.len() {
        let mut d = Decoder::default();
        let mut got = Vec::new();
        d.feed(&stream[..split], |r| { got.push(r); Ok(()) }).unwrap();
        d.feed(&stream[split..], |r| { got.push(r); Ok(()) }).unwrap();
        assert_eq!(got, replies, "split at {split}");
        assert_eq!(d.buffered(), 0);
    }
    let mut d = Decoder::default();
    let mut got = Vec::new();
    for b in &stream {
        d.feed(std::slice::from_ref(b), |r| { got.push(r); Ok(()) }).unwrap();
    }
    assert_eq!(got, replies);
}

#[test]
fn pipelines_encode_as_arrays_of_bulk_strings() {
    let cmd = |args: &[&[u8]]| Command(args.iter().map(|a| a.to_vec()).collect());
    let mut out = b"kept".to_vec();
    resp::encode(&[cmd(&[b"GET", b"k"]), cmd(&[b"EVALSHA", b"", b"0"]), cmd(&[b"SET", b"\r\n\x00"])], &mut out);
    assert_eq!(
        out,
        b"kept*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$7\r\nEVALSHA\r\n$0\r\n\r\n$1\r\n0\r\n*2\r\n$3\r\nSET\r\n$3\r\n\r\n\x00\r\n"
    );
    // A command is an array of bulk strings, so it decodes back to its arguments.
    let mut one = Vec::new();
    resp::encode(&[cmd(&[b"PING"])], &mut one);
    assert_eq!(resp::decode(&one).unwrap(), Some((Reply::Array(vec![data("PING")]), one.len())));
    let mut none = Vec::new();
    resp::encode(&[], &mut none);
    assert!(none.is_empty());
}

#[test]
fn malformed_streams_are_protocol_errors() {
    let deep = [b"*1\r\n".repeat(MAX_DEPTH + 1), b":1\r\n".to_vec()].concat();
    let bad: [&[u8]; 11] = [
        b"%1\r\n",               // RESP3 map: never asked for
        b"_\r\n",                // RESP3 null
        b"$3\r\nabcd\r\n",       // bulk longer than announced
        b"$3\r\nabcXY",          // bulk not ended by CRLF
        b":x\r\n",               // integer that is not one
        b":99999999999999999999\r\n",
        b"*-2\r\n",              // negative length other than the null
        b"$-7\r\n",
        b"$99999999999\r\n",     // over proto-max-bulk-len
        b"*2\r\n:1\r\n?\r\n",    // bad item inside an array
        &deep,
    ];
    for b in bad {
        let e = resp::decode(b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{:?}", String::from_utf8_lossy(b));
        let mut d = Decoder::default();
        assert!(d.feed(b, |_| Ok(())).is_err());
    }
    // Replies before the bad one are delivered; the error stops the stream.
    let mut d = Decoder::default();
    let mut got = Vec::new();
    assert!(d.feed(b":1\r\n+OK\r\n!x\r\n:2\r\n", |r| { got.push(r); Ok(()) }).is_err());
    assert_eq!(got, vec![Reply::Int(1), Reply::Status("OK".into())]);
    // Status and error lines with invalid UTF-8 are kept, the bad bytes replaced.
    assert_eq!(resp::decode(b"-ERR \xff\r\n").unwrap(), Some((Reply::Error("ERR \u{fffd}".into()), 8)));
}

/// The consumer's own error stops the stream too (the Node transport: a reply nobody waits for).
#[test]
fn the_consumers_error_stops_decoding() {
    let mut d = Decoder::default();
    let mut seen = 0;
    let e = d
        .feed(b":1\r\n:2\r\n", |_| {
            seen += 1;
            Err(lockgate_core::Error::protocol("no request waits"))
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert_eq!(seen, 1);
}

/// Arbitrary bytes (random, and random mutations of valid streams, fed in random slices) never
/// panic: each input ends in replies, a wait for more, or a `PROTOCOL` error.
#[test]
fn decode_never_panics_on_arbitrary_bytes() {
    let mut rng = SeededRandom::new(0x5eed_4e59);
    let mut below = |n: usize| (rng.next_u64() % n as u64) as usize;
    let valid: Vec<u8> = shapes().iter().flat_map(wire).collect();
    // Bytes that steer random input towards RESP's own structure.
    const ALPHABET: &[u8] = b"*$:+-\r\n0123456789-1%_";
    let mut outcomes = [0usize; 3];
    for round in 0..20_000 {
        let input: Vec<u8> = match round % 3 {
            0 => (0..below(64)).map(|_| below(256) as u8).collect(),
            1 => (0..below(64)).map(|_| ALPHABET[below(ALPHABET.len())]).collect(),
            _ => {
                let mut v = valid.clone();
                for _ in 0..1 + below(4) {
                    let at = below(v.len());
                    match below(3) {
                        0 => v[at] = ALPHABET[below(ALPHABET.len())],
                        1 => {
                            v.remove(at);
                        }
                        _ => v.insert(at, below(256) as u8),
                    }
                }
                v
            }
        };
        match resp::decode(&input) {
            Ok(Some((_, used))) => {
                assert!(used > 0 && used <= input.len());
                outcomes[0] += 1;
            }
            Ok(None) => outcomes[1] += 1,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Protocol);
                outcomes[2] += 1;
            }
        }
        let mut d = Decoder::default();
        let mut rest = input.as_slice();
        while !rest.is_empty() {
            let (now, later) = rest.split_at(1 + below(rest.len()));
            if d.feed(now, |_| Ok(())).is_err() {
                break;
            }
            rest = later;
        }
    }
    // The inputs reached all three outcomes, so the loop exercised more than the error path.
    assert!(outcomes.iter().all(|n| *n > 100), "{outcomes:?}");
}
