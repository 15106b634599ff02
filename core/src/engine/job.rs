//! One runner for backends whose calls are chains of requests (ZooKeeper, etcd): each engine
//! call becomes a [`Job`] that sends one request at a time, each tagged with the backend's step
//! its reply answers, and ends in one verdict. Calls of one owner token queue behind each other
//! (a release never races the attempt before it); calls of different tokens run side by side.
//!
//! The backend says what each step is and what its reply means; the runner keeps the jobs on
//! the wire and the per-token queues, the same for every such backend.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::backend::{Answer, Attempt, Ctx, Purpose, Verdict};
use super::ids::RequestId;
use crate::time::{Duration, Instant};

/// How many steps one call may take before it gives up for now (each is progress: a
/// predecessor went, a lease was granted, a lost create was found); a safety net, never
/// reached in practice.
pub(crate) const MAX_STEPS: u32 = 64;

/// One engine call in progress (or, with no purpose, a background step of one), on a lock
/// `T`, at a step `S` of the backend's.
#[derive(Clone, Debug)]
pub(crate) struct Job<T, S> {
    /// Why the engine asked; `None` for a step nobody waits for.
    pub(crate) purpose: Option<Purpose>,
    /// The lock.
    pub(crate) target: Arc<T>,
    /// The owner token (empty for an observe).
    pub(crate) token: Arc<str>,
    /// The backend's session epoch the call runs in: a reply of an older one speaks of what
    /// died with its session.
    pub(crate) epoch: u64,
    /// The lease asked for (an extend's new duration; zero for a release).
    pub(crate) lease: Duration,
    /// A one-shot attempt.
    pub(crate) once: bool,
    /// How many requests the call sent so far.
    pub(crate) steps: u32,
    /// The step the request on the wire is on.
    pub(crate) step: S,
    /// When the current request was sent.
    pub(crate) sent: Instant,
}

impl<T, S> Job<T, S> {
    /// A call that only reads (an observe, an inspect): no owner token, no lease, one attempt,
    /// at its first `step`, sent `now`.
    pub(crate) fn read(purpose: Purpose, target: &Arc<T>, epoch: u64, step: S, now: Instant) -> Self {
        Job {
            purpose: Some(purpose),
            target: Arc::clone(target),
            token: Arc::from(""),
            epoch,
            lease: Duration::ZERO,
            once: true,
            steps: 0,
            step,
            sent: now,
        }
    }
}

/// The jobs of one backend: those on the wire, and per token the call in progress and the
/// calls waiting behind it.
#[derive(Debug)]
pub(crate) struct Jobs<T, S> {
    in_flight: HashMap<RequestId, Job<T, S>>,
    busy: HashMap<Arc<str>, VecDeque<Job<T, S>>>,
}

impl<T, S> Default for Jobs<T, S> {
    fn default() -> Self {
        Jobs { in_flight: HashMap::new(), busy: HashMap::new() }
    }
}

impl<T, S> Jobs<T, S> {
    /// The job whose request `id` was answered, if it is one of these (once).
    pub(crate) fn answered(&mut self, id: RequestId) -> Option<Job<T, S>> {
        self.in_flight.remove(&id)
    }

    /// Puts `job` on the wire as waiting for the reply to `id`, a request sent already
    /// (ZooKeeper's queue listing sent right behind a create).
    pub(crate) fn awaiting(&mut self, id: RequestId, job: Job<T, S>) {
        self.in_flight.insert(id, job);
    }

    /// Whether no job is on the wire or waiting.
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.busy.is_empty()
    }
}

/// A backend that runs its calls as [`Job`]s. It says how a job starts and how a step's
/// request is written; the provided methods queue, send and settle.
pub(crate) trait JobRunner {
    /// The lock, as the backend resolves it.
    type Target;
    /// The step a request is on.
    type Step;
    /// What one request performs.
    type Op;
    /// A request for the driver.
    type Request;

    /// The backend's jobs.
    fn jobs(&mut self) -> &mut Jobs<Self::Target, Self::Step>;

    /// The request performing `op` for `job`, numbered `id` (ZooKeeper: in the session the
    /// job's token lives in).
    fn request(&self, job: &Job<Self::Target, Self::Step>, id: RequestId, op: Self::Op) -> Self::Request;

    /// Takes the first step of `job` (its turn came), in the session as it is now.
    fn start(&mut self, ctx: &mut Ctx<'_, Self::Request>, job: Job<Self::Target, Self::Step>, answers: &mut Vec<Answer>);

    /// A call settled, before the next call of its token starts: tidy what it left (etcd
    /// revokes leases no key uses any more).
    fn settled(&mut self, _ctx: &mut Ctx<'_, Self::Request>) {}

    /// Starts `job` now, or after the call of its token in progress.
    fn submit(&mut self, ctx: &mut Ctx<'_, Self::Request>, job: Job<Self::Target, Self::Step>, answers: &mut Vec<Answer>) {
        let jobs = self.jobs();
        if let Some(queue) = jobs.busy.get_mut(&job.token) {
            queue.push_back(job);
            return;
        }
        jobs.busy.insert(Arc::clone(&job.token), VecDeque::new());
        self.start(ctx, job, answers);
    }

    /// Sends `op` as `job`'s next `step`.
    fn send(&mut self, ctx: &mut Ctx<'_, Self::Request>, mut job: Job<Self::Target, Self::Step>, step: Self::Step, op: Self::Op) {
        let id = ctx.ids.request();
        job.step = step;
        job.sent = ctx.now;
        job.steps += 1;
        let request = self.request(&job, id, op);
        self.jobs().in_flight.insert(id, job);
        ctx.out.push_back(request);
    }

    /// Ends `job` with `verdict` (dated `sent`, or the job's last send), then starts the next
    /// call of its token. A job with no purpose ends silently.
    fn settle(
        &mut self,
        ctx: &mut Ctx<'_, Self::Request>,
        job: Job<Self::Target, Self::Step>,
        sent: Option<Instant>,
        verdict: Verdict,
        answers: &mut Vec<Answer>,
    ) {
        let Some(purpose) = job.purpose else {
            return;
        };
        answers.push(Answer { purpose, sent: sent.unwrap_or(job.sent), verdict });
        self.settled(ctx);
        // An observe, inspect or break takes no token of its own and never queued.
        if matches!(purpose, Purpose::Observe(_) | Purpose::Inspect(_) | Purpose::Break(_)) {
            return;
        }
        let next = self.jobs().busy.get_mut(&job.token).and_then(VecDeque::pop_front);
        match next {
            Some(next) => self.start(ctx, next, answers),
            None => {
                self.jobs().busy.remove(&job.token);
            }
        }
    }

    /// Ends an acquire with `attempt`.
    fn settle_attempt(&mut self, ctx: &mut Ctx<'_, Self::Request>, job: Job<Self::Target, Self::Step>, attempt: Attempt, answers: &mut Vec<Answer>) {
        self.settle(ctx, job, None, Verdict::Attempt(attempt), answers);
    }
}
