//! The native memcached transport: memcached's text protocol over tokio, one pipelined
//! connection per server ([`server`]), each request one command for one server. No crate is
//! used: the maintained async memcached crates either lack `gets`/`cas` or take one request at
//! a time on a borrowed stream with no reconnect, and the four commands lockgate sends are a
//! few lines of the text protocol ([`text`]).

mod server;
mod text;

use std::convert::Infallible;

use futures_util::future::{self, FutureExt};
use tokio::sync::mpsc;

use super::{McRequest, MemcachedBackend, MemcachedEngine};
use crate::connect::{ClientOptions, Target};
use crate::engine::LockEngine;
use crate::error::{Error, ErrorKind, Result};
use crate::native::driver;
use crate::native::message::Msg;
use crate::native::transport::{ReplyFuture, Transport};
use crate::random::OsRandom;
use crate::time::Instant;
use server::Server;

/// One connection task per server, in the URL's order.
pub(crate) struct MemcachedTransport {
    servers: Vec<Server>,
}

/// Connects to the servers of `target` (each answers `version`) and starts the client's
/// driver. A server that is down is tried again by each request for it (its locks fail with
/// `CONNECTION` meanwhile); fails if none is reachable or one is not a memcached.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> Result<mpsc::UnboundedSender<Msg>> {
    let config = options.memcached_config()?;
    let address = target.memcached().ok_or_else(|| Error::invalid("not a memcached:// URL"))?;
    let silences = server::Silences::default();
    let servers: Vec<Server> = address
        .hosts
        .iter()
        .map(|(h, p)| Server::spawn(h.clone(), *p, options.connect_timeout, options.response_timeout, silences.clone()))
        .collect();
    let hellos = future::join_all(servers.iter().map(Server::hello)).await;
    if let Some(Err(e)) = hellos.iter().find(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Protocol)) {
        return Err(Error::protocol(format!("{} is not a memcached server: {}", address.shown(), e.message())));
    }
    if hellos.iter().all(Result::is_err) {
        let first = hellos.into_iter().find_map(Result::err).expect("all failed");
        return Err(Error::new(ErrorKind::Connection, format!("no memcached server is reachable: {}", first.message())));
    }
    let engine = MemcachedEngine::new(config, Box::new(OsRandom))?;
    Ok(driver::spawn(engine, MemcachedTransport { servers }, None))
}

impl Transport for MemcachedTransport {
    type Backend = MemcachedBackend;
    /// memcached pushes nothing.
    type Push = Infallible;

    fn perform(&self, McRequest { id, server, command }: McRequest) -> ReplyFuture<MemcachedBackend> {
        let Some(server) = self.servers.get(server) else {
            return future::ready((id, Err(Error::protocol(format!("no memcached server {server}"))))).boxed();
        };
        let reply = server.call(&command);
        async move { (id, reply.await) }.boxed()
    }

    fn push(_: &mut LockEngine<MemcachedBackend>, _: Instant, push: Infallible) {
        match push {}
    }
}
