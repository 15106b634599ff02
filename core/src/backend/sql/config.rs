//! A SQL client's settings: where its table lives (the [`Schema`]) and how long the session
//! open waits for its own notification (PostgreSQL's check that `LISTEN` works on this path).

use super::request::Schema;
use super::statement::Dialect;
use crate::time::Duration;

/// How long a PostgreSQL session open waits for the notification it sent itself before it
/// concludes that notifications do not reach its listening connection (PgBouncer in transaction
/// or statement mode): a local server delivers it in milliseconds.
pub const DEFAULT_NOTIFY_CHECK: Duration = Duration::from_secs(5);

/// Settings of one SQL client's engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlConfig {
    /// The dialect, table prefix and PostgreSQL schema.
    pub schema: Schema,
    /// How long the session open waits for its own notification (PostgreSQL).
    pub notify_check: Duration,
    /// The holder label written in the `value` column of every row this client inserts but an
    /// election candidate's (whose `value` is its published value); empty: `NULL`.
    pub label: String,
}

impl SqlConfig {
    /// The settings for `schema` with the default notification check.
    pub fn new(schema: Schema) -> SqlConfig {
        SqlConfig { schema, notify_check: DEFAULT_NOTIFY_CHECK, label: String::new() }
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.schema.dialect
    }
}
