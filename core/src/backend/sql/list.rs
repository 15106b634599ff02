//! Listing the locks under a name prefix on SQL (PROTOCOL.md §16): one `SELECT DISTINCT
//! lock_key` of live rows per page, keyset-paginated on `lock_key` (`WHERE lock_key > <cursor>
//! ORDER BY lock_key LIMIT n`: the `(lock_key, id)` index, a plain read that locks no row or
//! table). The cursor is the page's last `lock_key`.

use super::request::{SqlOp, LIST_DIRS};
use crate::error::Result;
use crate::inspect::Kind;
use crate::listing::{bad_cursor, Found, Query};

/// The operation reading a page of `query`.
pub fn op(query: &Query) -> Result<SqlOp> {
    let after = query.cursor.clone().unwrap_or_default();
    if query.cursor.is_some() && lock_of(&after).is_none() {
        return Err(bad_cursor());
    }
    Ok(SqlOp::List { prefix: query.prefix.clone(), after, limit: query.limit })
}

/// The page the `keys` read for `query` make: their locks, and the last key as the cursor when
/// the page is full (a shorter one is the last).
pub fn found(query: &Query, keys: Vec<String>) -> Found {
    let next = (keys.len() >= query.limit as usize).then(|| keys.last().cloned()).flatten();
    Found { locks: keys.iter().filter_map(|k| lock_of(k)).collect(), next }
}

/// The lock a `lock_key` (`<kind>/<name>`) names.
fn lock_of(key: &str) -> Option<(String, Kind)> {
    let (dir, name) = key.split_once('/')?;
    let kind = match dir {
        "mutex" => Kind::Mutex,
        "rw" => Kind::ReadWrite,
        "semaphore" => Kind::Semaphore,
        "election" => Kind::Election,
        _ => return None,
    };
    debug_assert!(LIST_DIRS.contains(&dir));
    (!name.is_empty()).then(|| (name.to_string(), kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sql::request::Schema;
    use crate::backend::sql::statement::Dialect;

    #[test]
    fn pages_follow_the_last_key_and_name_each_kind() {
        let q = Query::new("o_1", Some(2), None).unwrap();
        let f = found(&q, vec!["mutex/o_1a".into(), "rw/o_1b".into()]);
        assert_eq!(f.locks, vec![("o_1a".into(), Kind::Mutex), ("o_1b".into(), Kind::ReadWrite)]);
        assert_eq!(f.next.as_deref(), Some("rw/o_1b"));
        assert_eq!(found(&q, vec!["semaphore/o_1c".into()]).next, None);
        let SqlOp::List { after, .. } = op(&Query::new("o", Some(2), f.next.as_deref()).unwrap()).unwrap() else { panic!() };
        assert_eq!(after, "rw/o_1b");
        assert_eq!(op(&Query::new("o", None, Some("nokind")).unwrap()).unwrap_err().code(), "INVALID_ARGUMENT");
        for dialect in [Dialect::Postgres, Dialect::MySql] {
            let batch = op(&q).unwrap().render(&Schema::default_for(dialect));
            let stmt = &batch.statements[0];
            assert!(stmt.sql.contains("ORDER BY lock_key LIMIT 2") && stmt.sql.contains("ESCAPE '!'"), "{}", stmt.sql);
            assert!(stmt.params.iter().any(|p| format!("{p:?}").contains("mutex/o!_1%")), "{:?}", stmt.params);
        }
    }
}
