//! Telemetry's fixed parts numbered once, for the bindings that hand events to another runtime
//! (the JVM, Python): an event's shape (its kind, backend and primitive) and a metric series
//! (an instrument with one set of attributes). A binding converts what a number means into its
//! runtime's objects the first time it meets it and keeps them by number, so an event costs a
//! lookup of static strings instead of new strings, maps and labels each time.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use super::metrics::{Instrument, Measured};
use super::telemetry::{EventKind, Telemetry, EVENTS};

/// Keys numbered in the order first seen, each with its value. Numbers fit an `i32` (a JVM
/// `int`). As many as the logger's and the metrics backend's own tables hold (with lock names
/// on, a series per name), and no more.
#[derive(Debug)]
pub struct Numbered<K, V> {
    ids: HashMap<K, u32>,
    values: Vec<V>,
}

impl<K: Hash + Eq, V> Default for Numbered<K, V> {
    fn default() -> Self {
        Numbered { ids: HashMap::new(), values: Vec::new() }
    }
}

impl<K: Hash + Eq, V> Numbered<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of `key`, numbering it (with its value, `make()`) if it is new; `None` once
    /// every number an `i32` holds is taken.
    pub fn number(&mut self, key: K, make: impl FnOnce() -> V) -> Option<u32> {
        if let Some(&id) = self.ids.get(&key) {
            return Some(id);
        }
        let id = u32::try_from(self.values.len()).ok().filter(|&id| i32::try_from(id).is_ok())?;
        self.values.push(make());
        self.ids.insert(key, id);
        Some(id)
    }

    /// The value numbered `id`.
    pub fn get(&self, id: u32) -> Option<&V> {
        self.values.get(usize::try_from(id).ok()?)
    }
}

/// What every event of one kind, backend and primitive has in common.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Its kind's place in [`EVENTS`].
    pub kind: usize,
    /// The backend (see [`Telemetry::backend`]).
    pub backend: &'static str,
    /// The primitive (see [`Telemetry::primitive`]).
    pub primitive: Option<&'static str>,
}

impl Shape {
    /// Its kind: name, text, level and measurement keys.
    pub fn kind(&self) -> &'static EventKind {
        &EVENTS[self.kind]
    }
}

impl Telemetry {
    /// This event's shape.
    pub fn shape(&self) -> Shape {
        Shape { kind: self.what.kind(), backend: self.backend, primitive: self.primitive }
    }
}

/// The event shapes one process has met, numbered.
pub type Shapes = Numbered<Shape, Shape>;

/// A series as an event gives it, all static or shared: looking one up copies no attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    instrument: &'static str,
    backend: &'static str,
    primitive: Option<&'static str>,
    name: Option<Arc<str>>,
    extra: [Option<(&'static str, &'static str)>; 2],
}

/// One metric series: an instrument with one set of attributes (those of
/// [`Telemetry::metric_updates`], in the same order).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The instrument.
    pub instrument: &'static Instrument,
    /// Its attributes, keys first.
    pub attributes: Vec<(&'static str, String)>,
}

/// The metric series one process has met, numbered.
#[derive(Debug, Default)]
pub struct SeriesTable(Numbered<SeriesKey, Series>);

impl SeriesTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of the series `m` (one of `t`'s [`Telemetry::measured`]) updates, numbering
    /// it if it is new; `None` once every number is taken.
    pub fn number(&mut self, t: &Telemetry, m: &Measured) -> Option<u32> {
        let key = SeriesKey { instrument: m.instrument.name, backend: t.backend, primitive: t.primitive, name: t.name.clone(), extra: m.extra };
        self.0.number(key, || Series {
            instrument: m.instrument,
            attributes: t.attributes_with(&m.extra).map(|a| (a.key(), a.value().to_string())).collect(),
        })
    }

    /// The series numbered `id`.
    pub fn get(&self, id: u32) -> Option<&Series> {
        self.0.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Happened, OpId};
    use std::time::Duration;

    fn granted(name: Option<&str>) -> Telemetry {
        Telemetry {
            what: Happened::Granted { op: OpId(1), lease: crate::engine::LeaseId(1), waited: Duration::from_millis(3), queued: true },
            backend: "redis",
            primitive: Some("mutex"),
            name: name.map(Arc::from),
        }
    }

    #[test]
    fn a_series_is_numbered_once_with_the_attributes_of_its_update() {
        let mut table = SeriesTable::new();
        let t = granted(None);
        let ids: Vec<u32> = t.measured().iter().map(|m| table.number(&t, m).unwrap()).collect();
        assert_eq!(ids, (0..ids.len() as u32).collect::<Vec<_>>(), "each update of one event is its own series");
        let again: Vec<u32> = t.measured().iter().map(|m| table.number(&t, m).unwrap()).collect();
        assert_eq!(again, ids, "the same event meets the same series");
        for (id, u) in ids.iter().zip(t.metric_updates()) {
            let s = table.get(*id).unwrap();
            assert_eq!((s.instrument.name, &s.attributes), (u.instrument.name, &u.attributes));
        }
        let named = granted(Some("orders:42"));
        let first = table.number(&named, &named.measured()[0]).unwrap();
        assert_eq!(first as usize, ids.len(), "a lock name (opted in) is a series of its own");
        assert!(table.get(first).unwrap().attributes.contains(&("lockgate.lock.name", "orders:42".to_string())));
        assert_eq!(table.get(first + 1), None);
    }

    #[test]
    fn a_shape_is_an_events_kind_backend_and_primitive() {
        let mut shapes = Shapes::new();
        let t = granted(Some("a"));
        let id = shapes.number(t.shape(), || t.shape()).unwrap();
        assert_eq!(shapes.number(granted(Some("b")).shape(), || unreachable!()), Some(id), "a name is not part of a shape");
        let shape = *shapes.get(id).unwrap();
        assert_eq!((shape.kind().name, shape.backend, shape.primitive), ("acquire.granted", "redis", Some("mutex")));
        assert_eq!(shape.kind().measures, &["wait_s", "queued"]);
    }
}
