//! One engine type for every backend whose wire speaks [`Data`]: [`DynEngine`] is an object-safe
//! face of [`LockEngine<B>`] whose requests come out as `Data` and whose replies and pushed
//! notices go in as `Data`, and [`connect`] builds the one a client's URL selects. A binding that
//! performs requests in another language (the Node binding, whose transports are JavaScript)
//! then converts `Data` once, instead of one request/reply/event conversion per backend.
//!
//! A backend joins by implementing [`DataBackend`] (its requests, replies and notices as plain
//! data; each in its backend's folder, e.g.
//! [`crate::zookeeper::data`]) and one line in its registry spec (`connect_data`, see `crate::connect::Spec`). The single-server and Cluster Redis backends keep their
//! typed engines in the Node binding (its lean RESP socket hands the core bytes, not values);
//! nothing stops them from joining too.

mod engine;
mod value;

pub use engine::{neutral, Connected, DataBackend, DynEngine};
pub use value::Data;
/// The data engine of the backend a client's URL selects, with its transport plan; `None` for
/// the backends bindings drive through their typed engines (the registry's part: see
/// [`crate::connect::connect_data`]).
pub use crate::connect::connect_data as connect;
