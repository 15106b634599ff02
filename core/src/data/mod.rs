//! One engine type for every backend whose wire speaks [`Data`]: [`DynEngine`] is an object-safe
//! face of [`LockEngine<B>`](crate::engine::LockEngine) whose requests come out as `Data` and whose replies and pushed
//! notices go in as `Data`, and [`connect`] builds the one a client's URL selects. A binding that
//! performs requests in another language (the Node binding, whose transports are JavaScript)
//! then converts `Data` once, instead of one request/reply/event conversion per backend.
//!
//! A backend joins by implementing [`DataBackend`] (its requests, replies and notices as plain
//! data; each in its backend's folder, e.g.
//! [`crate::backend::zookeeper::data`]) and one line in its registry spec (`connect_data`, see
//! `crate::connect::Spec`). A backend whose protocol the core speaks to the byte on a binding's
//! own connection (Redis's RESP) gives its [`DynEngine`] the wire methods (`poll_wire`,
//! `handle_wire`, `wire_closed`).

mod engine;
mod event;
mod value;

pub use engine::{neutral, Connected, DataBackend, DynEngine};
pub use event::{capabilities_data, measure_key, millis, telemetry_row, EventFields};
pub use value::Data;
/// The data engine of the backend a client's URL selects, with its transport plan; `None` for
/// the backends bindings drive through their typed engines (the registry's part: see
/// [`crate::connect::connect_data`]).
pub use crate::connect::connect_data as connect;
