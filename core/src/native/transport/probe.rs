//! The probe behind a failed connect's message, for clients whose crate cannot say why it
//! failed (ZooKeeper's and etcd's retry every member until the connect timeout, whatever
//! happened): one TCP connect per member and the protocol's hello, within a second, so
//! [`connect_failed`](crate::connect::failure::connect_failed) can say nothing listens, nothing
//! answers, or a server of another kind answered — and with what.

use std::time::Duration;

use futures_util::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::connect::failure::{foreign_reply, io_answer};
use crate::error::ErrorKind;

/// How long one member's probe may take (connect, hello, first bytes back).
const PROBE_TIME: Duration = Duration::from_secs(1);

/// What the members answer to `hellos` (tried in turn, each on a connection of its own, while
/// a member stays silent: a binary hello can leave a line-based server waiting for a line end
/// it will never read as one), when they do not speak `protocol`: the kind of error
/// (`PROTOCOL` when every member is a server of another kind, else `CONNECTION`) and what each
/// did, each member named when there are several. `None` when one member speaks `protocol`
/// (the client's own words then say more).
pub(crate) async fn probe(members: &[(String, u16)], protocol: &str, hellos: &[&[u8]]) -> Option<(ErrorKind, String)> {
    let answers = join_all(members.iter().map(|(host, port)| member(host, *port, protocol, hellos))).await;
    let mut said = Vec::new();
    let mut foreign = true;
    for ((host, port), answer) in members.iter().zip(answers) {
        let (kind, what) = answer?;
        foreign &= kind == ErrorKind::Protocol;
        said.push(if members.len() > 1 { format!("{host}:{port}: {what}") } else { what });
    }
    Some((if foreign { ErrorKind::Protocol } else { ErrorKind::Connection }, said.join("; ")))
}

/// One member's answer (see [`probe`]).
async fn member(host: &str, port: u16, protocol: &str, hellos: &[&[u8]]) -> Option<(ErrorKind, String)> {
    let each = PROBE_TIME / hellos.len().max(1) as u32;
    for hello in hellos {
        let attempt = async {
            let mut sock = match tokio::net::TcpStream::connect((host, port)).await {
                Ok(s) => s,
                Err(io) => return Some((ErrorKind::Connection, io_answer(&io))),
            };
            // A server that closes or resets on the hello reads as an empty reply.
            let _ = sock.write_all(hello).await;
            let mut buf = [0u8; 128];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                // A ZooKeeper member outside a quorum closes a client's connection so, and an
                // etcd member may too while it starts: maybe only for now.
                let why = format!("the server closed the connection without a {protocol} reply (not serving yet, or another kind of server)");
                return Some((ErrorKind::Connection, why));
            }
            foreign_reply(protocol, &buf[..n]).map(|why| (ErrorKind::Protocol, why))
        };
        if let Ok(answer) = tokio::time::timeout(each, attempt).await {
            return answer;
        }
    }
    Some((ErrorKind::Connection, format!("no answer to the {protocol} hello within {PROBE_TIME:?} (the server is stalled, or another kind of server)")))
}
