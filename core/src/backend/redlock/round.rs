//! One round of votes: the same script sent to every master, and what each answered.

use std::sync::Arc;

use crate::error::Error;
use crate::backend::redis::Script;
use crate::time::Instant;

/// What one master answered in a round.
#[derive(Clone, Debug)]
pub(super) enum Vote {
    /// No answer yet.
    Pending,
    /// Granted / extended / released there.
    Yes,
    /// Held by another owner there (acquire), or our key is gone there (extend, release).
    No,
    /// The master has been up for less than the maximum lease and grants nothing yet.
    Restarting,
    /// Held there by a client that counts this many masters, not as many as we do.
    Mismatch(String),
    /// Transport or protocol error.
    Failed(Error),
}

/// The counts a decision is made on; at the node timeout, `pending` counts as failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub yes: usize,
    pub no: usize,
    pub restarting: usize,
    pub failed: usize,
    pub pending: usize,
}

pub(super) struct Round<P> {
    pub purpose: P,
    pub script: &'static Script,
    pub key: Arc<str>,
    pub args: Vec<String>,
    /// The lease an acquire or extend round asks for (zero for a release).
    pub lease: crate::time::Duration,
    /// When the round was sent: every master's lease started no earlier.
    pub sent: Instant,
    /// The node timeout: masters silent by then count as failed for the decision.
    pub deadline: Instant,
    pub votes: Vec<Vote>,
    /// An inspect round's replies, per master (read once every master answered or timed out).
    pub reads: Vec<Option<crate::backend::redis::reply::Reply>>,
    /// Whether the script body was already sent to a master after a NOSCRIPT.
    pub sent_full: Vec<bool>,
    /// The round's result was acted on; later votes are only recorded.
    pub decided: bool,
    pub timed_out: bool,
}

impl<P> Round<P> {
    pub fn new(purpose: P, script: &'static Script, key: Arc<str>, args: Vec<String>, sent: Instant, deadline: Instant, masters: usize) -> Self {
        Round {
            purpose,
            script,
            key,
            args,
            lease: crate::time::Duration::ZERO,
            sent,
            deadline,
            votes: vec![Vote::Pending; masters],
            reads: vec![None; masters],
            sent_full: vec![false; masters],
            decided: false,
            timed_out: false,
        }
    }

    /// The first transport or protocol error a master answered with, for messages.
    pub fn first_error(&self) -> Option<&Error> {
        self.votes.iter().find_map(|v| match v {
            Vote::Failed(e) => Some(e),
            _ => None,
        })
    }

    /// The master count of a holder that disagrees with ours, if a master reported one.
    pub fn mismatch(&self) -> Option<&str> {
        self.votes.iter().find_map(|v| match v {
            Vote::Mismatch(n) => Some(n.as_str()),
            _ => None,
        })
    }

    pub fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for v in &self.votes {
            match v {
                Vote::Pending => t.pending += 1,
                Vote::Yes => t.yes += 1,
                // Held by someone else there, whatever their configuration.
                Vote::No | Vote::Mismatch(_) => t.no += 1,
                Vote::Restarting => t.restarting += 1,
                Vote::Failed(_) => t.failed += 1,
            }
        }
        t
    }
}
