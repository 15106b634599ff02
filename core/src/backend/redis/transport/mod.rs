//! The Redis transport: one server over one self-replacing RESP3 connection that carries both
//! the scripts and the grant notifications ([`Link`]), or a Redis Cluster ([`ClusterLink`]:
//! each script routed by its first key, since all keys of one lock share a slot).

use futures_util::future::FutureExt;
use tokio::sync::mpsc;

pub(crate) mod cluster_link;
pub(crate) mod convert;
pub(crate) mod link;

use self::cluster_link::ClusterLink;
use self::link::Link;
use crate::native::transport::{ReplyFuture, Transport};
use crate::connect::{Backend, ClientOptions, Target};
use crate::engine::LockEngine;
use crate::error::Result;
use crate::native::driver;
use crate::native::message::Msg;
use crate::random::OsRandom;
use crate::backend::redis::reply::Reply;
use crate::backend::redis::{Engine, EngineConfig, RedisBackend, Request, RequestKind};
use crate::time::Instant;

/// The connection a Redis engine's requests go on (each replaced when it breaks or goes
/// silent). Clones share it.
#[derive(Clone)]
pub(crate) enum RedisTransport {
    Single(Link),
    Cluster(ClusterLink),
}

/// Connects to the server (or the cluster's seed node) of `target` and starts a Redis client's
/// driver.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> Result<mpsc::UnboundedSender<Msg>> {
    let cluster = options.backend()? == Backend::RedisCluster;
    let (url, tls) = (&target.servers()[0], options.tls_ca_pem.as_deref());
    let (push_tx, push_rx) = mpsc::unbounded_channel();
    let transport = if cluster {
        let link = ClusterLink::connect(url, tls, options.connect_timeout, options.response_timeout, push_tx).await?;
        RedisTransport::Cluster(link)
    } else {
        let link = Link::connect(url, tls, options.connect_timeout, options.response_timeout, Some(push_tx)).await?;
        RedisTransport::Single(link)
    };
    let config = EngineConfig {
        key_prefix: options.key_prefix.clone(),
        replica_acks: options.replica_acks,
        split_pipelines: cluster,
        label: options.label(),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, Box::new(OsRandom))?;
    Ok(driver::spawn(engine, transport, Some(push_rx)))
}

impl Transport for RedisTransport {
    type Backend = RedisBackend;
    type Push = redis::PushInfo;

    fn perform(&self, Request { id, kind }: Request) -> ReplyFuture<RedisBackend> {
        let conn = self.clone();
        match kind {
            RequestKind::Pipeline(commands) => {
                let pipe = pipeline_of(&commands);
                async move {
                    let r = match &conn {
                        RedisTransport::Single(link) => link.pipeline(&pipe, commands.len()).await,
                        RedisTransport::Cluster(link) => link.pipeline(&pipe).await,
                    };
                    (id, r.map(|values| values.into_iter().map(convert::reply).collect()))
                }
                .boxed()
            }
            RequestKind::Masters => async move {
                let r = match &conn {
                    RedisTransport::Cluster(link) => link.masters().await,
                    RedisTransport::Single(_) => Err(crate::error::Error::protocol("a single server has no masters to list")),
                };
                (id, r.map(|masters| masters.into_iter().map(|m| Reply::Data(m.into_bytes())).collect()))
            }
            .boxed(),
            RequestKind::OnNode { node, commands } => {
                let pipe = pipeline_of(&commands);
                async move {
                    let r = match &conn {
                        RedisTransport::Cluster(link) => link.on_node(&node, &pipe).await,
                        RedisTransport::Single(_) => Err(crate::error::Error::protocol("a single server has no nodes to address")),
                    };
                    (id, r.map(|values| values.into_iter().map(convert::reply).collect()))
                }
                .boxed()
            }
            RequestKind::Subscribe(channel) => async move {
                let r = match &conn {
                    RedisTransport::Single(link) => link.subscribe(channel.as_bytes()).await,
                    RedisTransport::Cluster(link) => link.subscribe(channel.as_bytes()).await,
                };
                (id, r.map(|()| Vec::new()))
            }
            .boxed(),
        }
    }

    /// A message on the grant channel goes to the engine; a `Disconnection` (the connection
    /// was replaced, and its subscription with it) makes the engine subscribe again and
    /// re-check its waiters.
    fn push(engine: &mut LockEngine<RedisBackend>, now: Instant, push: redis::PushInfo) {
        match push.kind {
            redis::PushKind::Message => {
                if let [redis::Value::BulkString(channel), redis::Value::BulkString(payload)] = push.data.as_slice() {
                    engine.handle_notification(now, channel, payload);
                }
            }
            redis::PushKind::Disconnection => engine.handle_disconnect(now),
            _ => {}
        }
    }
}

/// The engine's commands as one `redis` pipeline.
fn pipeline_of(commands: &[crate::backend::redis::Command]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for c in commands {
        let mut cmd = redis::Cmd::new();
        for a in &c.0 {
            cmd.arg(a.as_slice());
        }
        pipe.add_command(cmd);
    }
    pipe
}
