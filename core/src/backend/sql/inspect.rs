//! A lock name's live rows as a [`Snapshot`] (PROTOCOL.md §14): each row holds or waits by the
//! recipe's own predicate (`recipe::place`), so inspect says what an acquire would decide.
//! Rows record no grant or arrival time: `held_for` and `waiting_for` are unknown on SQL.

use super::recipe::{place, Place};
use super::request::{EntryKind, EntryRow};
use super::target::SqlTarget;
use crate::inspect::{Holder, Kind, Mode, Snapshot, Waiter};
use crate::time::Duration;

/// The snapshot of `target`'s name from its live `rows` in id order.
pub fn snapshot(target: &SqlTarget, rows: &[EntryRow]) -> Snapshot {
    let mut s = Snapshot::empty(kind_of(target.kind));
    for row in rows {
        // A kind this version does not know blocks like a writer (recipe.rs).
        let kind = row.kind.unwrap_or(EntryKind::Write);
        let permits = u32::try_from(row.permits).unwrap_or(1);
        let mode = if matches!(kind, EntryKind::Read | EntryKind::Semaphore) { Mode::Shared } else { Mode::Exclusive };
        // A leader's `value` is what it published; every other row's is its label (§12).
        let (label, value) = if kind == EntryKind::Leader { (None, row.value.clone()) } else { (row.value.clone(), None) };
        match place(kind, permits, rows, &row.owner) {
            Place::Holds(_) => {
                let mut h = Holder::new(Some(row.owner.clone()), label, u64::try_from(row.id).ok(), mode);
                h.remaining = Some(Duration::from_millis(row.remaining_ms.max(0) as u64));
                h.value = value;
                s.holders.push(h);
            }
            _ => s.waiters.push(Waiter { label, waiting_for: None, mode }),
        }
    }
    if s.kind == Kind::Semaphore {
        s.permits = rows.first().and_then(|r| u32::try_from(r.permits).ok());
    }
    s
}

fn kind_of(kind: EntryKind) -> Kind {
    match kind {
        EntryKind::Mutex => Kind::Mutex,
        EntryKind::Read | EntryKind::Write => Kind::ReadWrite,
        EntryKind::Semaphore => Kind::Semaphore,
        EntryKind::Leader => Kind::Election,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitive::Primitive;

    fn row(id: i64, owner: &str, kind: EntryKind, permits: i64, value: Option<&str>) -> EntryRow {
        EntryRow { id, owner: owner.into(), kind: Some(kind), permits, value: value.map(String::from), remaining_ms: 900 }
    }

    #[test]
    fn rows_hold_or_wait_as_the_recipe_decides() {
        let t = SqlTarget::new("rw", &Primitive::Write).unwrap();
        let rows = [
            row(1, "r1", EntryKind::Read, 1, Some("a")),
            row(2, "r2", EntryKind::Read, 1, None),
            row(3, "w", EntryKind::Write, 1, Some("c")),
            row(4, "r3", EntryKind::Read, 1, Some("d")),
        ];
        let s = snapshot(&t, &rows);
        assert_eq!(s.kind, Kind::ReadWrite);
        let h: Vec<_> = s.holders.iter().map(|h| (h.label.clone(), h.fencing_token, h.mode, h.remaining)).collect();
        assert_eq!(h, vec![(Some("a".into()), Some(1), Mode::Shared, Some(Duration::from_millis(900))), (None, Some(2), Mode::Shared, Some(Duration::from_millis(900)))]);
        let w: Vec<_> = s.waiters.iter().map(|w| (w.label.clone(), w.mode)).collect();
        assert_eq!(w, vec![(Some("c".into()), Mode::Exclusive), (Some("d".into()), Mode::Shared)]);
    }

    #[test]
    fn a_semaphore_counts_its_permits_and_a_leader_shows_its_value() {
        let t = SqlTarget::new("s", &Primitive::Semaphore { permits: 1 }).unwrap();
        let rows = [row(5, "a", EntryKind::Semaphore, 2, None), row(6, "b", EntryKind::Semaphore, 2, None), row(7, "c", EntryKind::Semaphore, 2, None)];
        let s = snapshot(&t, &rows);
        assert_eq!((s.holders.len(), s.waiters.len(), s.permits), (2, 1, Some(2)));
        let t = SqlTarget::new("e", &Primitive::Leader { value: String::new() }).unwrap();
        let s = snapshot(&t, &[row(8, "a", EntryKind::Leader, 1, Some("10.0.0.1")), row(9, "b", EntryKind::Leader, 1, Some("10.0.0.2"))]);
        assert_eq!(s.writer().unwrap().value.as_deref(), Some("10.0.0.1"));
        assert_eq!((s.writer().unwrap().label.clone(), s.waiters.len()), (None, 1));
        assert_eq!(snapshot(&t, &[]), Snapshot::empty(Kind::Election));
    }

    #[test]
    fn bad_rows_are_protocol_errors_never_panics() {
        use super::super::request::{SqlOp, SqlReply};
        use super::super::statement::{Rows, SqlFailure, Value};
        let op = SqlOp::Inspect { lock_key: "mutex/m".into() };
        let good = vec![Value::Int(1), Value::Text("a".into()), Value::Text("mutex".into()), Value::Int(1), Value::Null, Value::Int(5)];
        assert!(matches!(op.parse(vec![Rows { affected: 0, rows: vec![good.clone()] }]), Ok(SqlReply::Entries { rows }) if rows.len() == 1));
        let mut bad_id = good.clone();
        bad_id[0] = Value::Text("x".into());
        for rows in [vec![], vec![Rows { affected: 0, rows: vec![good[..3].to_vec()] }], vec![Rows { affected: 0, rows: vec![bad_id] }]] {
            match op.parse(rows) {
                Err(SqlFailure::Other(e)) => assert_eq!(e.code(), "PROTOCOL"),
                other => panic!("{other:?}"),
            }
        }
    }
}
