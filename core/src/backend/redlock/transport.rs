//! The Redlock transport: one self-replacing connection per master ([`Link`]), each request one
//! command for one master. A master that is not connected answers at once with a `CONNECTION`
//! error (a vote cannot wait for a reconnect) while its link reconnects in the background.

use std::convert::Infallible;

use futures_util::future::{self, FutureExt};
use tokio::sync::mpsc;

use crate::backend::redis::transport::convert;
use crate::backend::redis::transport::link::Link;
use crate::native::transport::{ReplyFuture, Transport};
use crate::connect::{ClientOptions, RedisUrl, Target};
use crate::engine::LockEngine;
use crate::error::{Error, ErrorKind, Result};
use crate::native::driver;
use crate::native::message::Msg;
use crate::random::OsRandom;
use crate::backend::redlock::{NodeRequest, RedlockBackend, RedlockEngine};
use crate::time::Instant;

/// One link per master, in the order of the URL.
pub(crate) struct RedlockTransport {
    links: Vec<Link>,
    urls: Vec<RedisUrl>,
}

/// Connects to every master of `target` it can reach and starts a Redlock client's driver;
/// masters that are down are retried in the background (they count as failed votes
/// meanwhile). Fails if none is reachable or a master refuses the credentials.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> Result<mpsc::UnboundedSender<Msg>> {
    let config = options.redlock_config()?;
    let urls = target.servers().to_vec();
    let links: Vec<Link> = urls
        .iter()
        .map(|u| Link::new(u, options.tls_ca_pem.as_deref(), options.connect_timeout, options.response_timeout, None))
        .collect::<Result<_>>()?;
    let results = future::join_all(links.iter().map(Link::first_connect)).await;
    if let Some(Err(e)) = results.iter().find(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Authentication)) {
        return Err(e.clone());
    }
    if results.iter().all(Result::is_err) {
        let first = results.into_iter().find_map(Result::err).expect("all failed");
        return Err(Error::new(ErrorKind::Connection, format!("no master is reachable: {}", first.message())));
    }
    let engine = RedlockEngine::new(config, Box::new(OsRandom))?;
    Ok(driver::spawn(engine, RedlockTransport { links, urls }, None))
}

impl Transport for RedlockTransport {
    type Backend = RedlockBackend;
    /// Masters push nothing: no waiter queues on them.
    type Push = Infallible;

    fn perform(&self, NodeRequest { id, master, command }: NodeRequest) -> ReplyFuture<RedlockBackend> {
        let link = self.links[master].clone();
        if !link.is_connected() {
            // Down (since connect, or being replaced): answer at once and let the link
            // connect in the background.
            link.kick();
            let e = Error::new(ErrorKind::Connection, format!("master {} is not connected", self.urls[master]));
            return future::ready((id, Err(e))).boxed();
        }
        let mut cmd = redis::Cmd::new();
        for a in &command.0 {
            cmd.arg(a.as_slice());
        }
        let mut pipe = redis::pipe();
        pipe.add_command(cmd);
        async move {
            let r = link.pipeline(&pipe, 1).await;
            (id, r.and_then(|mut v| v.pop().map(convert::reply).ok_or_else(|| Error::protocol("no reply"))))
        }
        .boxed()
    }

    fn push(_: &mut LockEngine<RedlockBackend>, _: Instant, push: Infallible) {
        match push {}
    }
}
