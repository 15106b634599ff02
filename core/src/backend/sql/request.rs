//! What the SQL backend asks a driver to do, as structured operations ([`SqlOp`]), and what they
//! mean when answered ([`SqlReply`]). A transport renders an operation to the server's dialect
//! with [`SqlOp::render`], runs the [`Batch`] (see `statement.rs`) and turns the statements'
//! [`Rows`] back into a reply with [`SqlOp::parse`]; the in-memory simulator of the tests works
//! on the operations directly. Which operation to send and what a reply means for a lock is the
//! backend's; the SQL text is here, once, for both dialects.
//!
//! The table (PROTOCOL.md §11), one per table prefix (and PostgreSQL schema):
//! `<prefix>entry (id, lock_key, owner, kind, permits, value, expires_ms)`, `id` an identity /
//! `AUTO_INCREMENT` key (the queue order and the fencing token), `UNIQUE (lock_key, owner)`,
//! an index on `(lock_key, id)`. `expires_ms` is on the SERVER's clock (milliseconds since the
//! epoch): every expiry is set and compared in SQL, and only remaining times (integers) come
//! back. On MySQL/MariaDB one more row per lock name, the *anchor* (`owner = ''`, kind
//! `anchor`), is the row an acquire locks to serialize the inserts of one name.

use std::fmt::Write as _;

use super::statement::{Batch, Conn, Dialect, Rows, SqlFailure, Statement, Value};
use crate::engine::RequestId;
use crate::error::{Error, Result};

/// One request for the driver.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlRequest {
    /// Pass back with the reply.
    pub id: RequestId,
    /// What to do.
    pub op: SqlOp,
}

/// The table prefix unless configured.
pub const DEFAULT_TABLE_PREFIX: &str = "lockgate_";
/// The longest table prefix (the table's name, `<prefix>entry_key_owner`, must fit in
/// PostgreSQL's 63-byte identifiers).
pub const MAX_PREFIX_LEN: usize = 40;
/// The longest PostgreSQL schema name.
pub const MAX_SCHEMA_LEN: usize = 63;
/// The longest `lock_key` (`<kind>/<name>`), in characters (the column's `VARCHAR(255)`).
pub const MAX_LOCK_KEY_CHARS: usize = 255;
/// The prefix of a MySQL doorbell's name: `lockgate:<owner token>` (at most 64 characters,
/// MySQL's limit for a named lock).
pub const DOORBELL_PREFIX: &str = "lockgate:";
/// The `owner` of a MySQL anchor row (never an owner token, which is hex).
pub const ANCHOR_OWNER: &str = "";
/// The most row ids one refresh statement lists. MySQL's `IN` lists are padded to a power of
/// two up to it (repeating an id), so a few statement texts serve every size (each text is
/// prepared once per connection).
pub const REFRESH_CHUNK: usize = 512;
/// PostgreSQL's advisory-lock class for serializing one lock name's inserts (`'lkga'`).
pub const ADVISORY_CLASS: i32 = 0x6c6b_6761;

/// Where lockgate's table lives and how its identifiers are written in one dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The dialect.
    pub dialect: Dialect,
    /// The table prefix (`[a-z_][a-z0-9_]*`, at most [`MAX_PREFIX_LEN`]).
    pub table_prefix: String,
    /// The PostgreSQL schema (`None`: the connection's `search_path`, normally `public`);
    /// always `None` for MySQL (the URL's database is the schema).
    pub pg_schema: Option<String>,
}

/// Checks one identifier part: lower-case ASCII letters, digits and `_`, not starting with a
/// digit, so it means the same quoted or not in both dialects.
fn check_identifier(what: &str, s: &str, max: usize, may_be_empty: bool) -> Result<()> {
    if s.is_empty() && may_be_empty {
        return Ok(());
    }
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} must be 1 to {max} lower-case ASCII letters, digits or '_', not starting with a digit, got {s:?}"
        )))
    }
}

impl Schema {
    /// A schema for `dialect`, checking the identifiers (`INVALID_ARGUMENT`: nothing is ever
    /// spliced into SQL that is not a plain identifier).
    pub fn new(dialect: Dialect, table_prefix: &str, pg_schema: Option<&str>) -> Result<Schema> {
        check_identifier("table_prefix", table_prefix, MAX_PREFIX_LEN, true)?;
        if let Some(s) = pg_schema {
            if dialect == Dialect::MySql {
                return Err(Error::invalid("schema is a PostgreSQL setting: on MySQL/MariaDB the URL's database is the schema"));
            }
            check_identifier("schema", s, MAX_SCHEMA_LEN, false)?;
        }
        Ok(Schema { dialect, table_prefix: table_prefix.to_string(), pg_schema: pg_schema.map(str::to_string) })
    }

    /// The default schema of `dialect` (prefix `lockgate_`).
    pub fn default_for(dialect: Dialect) -> Schema {
        Schema { dialect, table_prefix: DEFAULT_TABLE_PREFIX.to_string(), pg_schema: None }
    }

    /// An identifier quoted for the dialect (`"x"` or `` `x` ``); identifiers are checked, so
    /// no quote can occur inside.
    pub fn quote(&self, ident: &str) -> String {
        match self.dialect {
            Dialect::Postgres => format!("\"{ident}\""),
            Dialect::MySql => format!("`{ident}`"),
        }
    }

    /// The table's unqualified name, `<prefix>entry`.
    pub fn table_name(&self) -> String {
        format!("{}entry", self.table_prefix)
    }

    /// The table, qualified and quoted.
    pub fn table(&self) -> String {
        match &self.pg_schema {
            Some(s) => format!("{}.{}", self.quote(s), self.quote(&self.table_name())),
            None => self.quote(&self.table_name()),
        }
    }

    /// PostgreSQL's notification channel, `<prefix>wake` (as `pg_notify` takes it, unquoted).
    pub fn channel(&self) -> String {
        format!("{}wake", self.table_prefix)
    }

    /// A placeholder for parameter `n` (1-based): `$n` or `?`.
    fn ph(&self, n: usize) -> String {
        match self.dialect {
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql => "?".to_string(),
        }
    }

    /// An integer placeholder: PostgreSQL infers `BIGINT` so an `i64` binds as is.
    fn int(&self, n: usize) -> String {
        match self.dialect {
            Dialect::Postgres => format!("${n}::BIGINT"),
            Dialect::MySql => "?".to_string(),
        }
    }

    /// The server's clock in milliseconds since the epoch, as an SQL expression:
    /// `clock_timestamp()` (the actual time, not the transaction's start) on PostgreSQL; on
    /// MySQL the statement's start, whole seconds from `UNIX_TIMESTAMP()` and the fraction
    /// from `NOW(6)` (both the same instant, and neither depends on the session's time zone
    /// — `UNIX_TIMESTAMP(NOW(3))` would be off by an hour around a DST change).
    pub fn now_ms(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => "(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)",
            Dialect::MySql => "(UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)",
        }
    }

    /// The statements creating the table and its index if absent (never `DROP`): what session
    /// open runs when the table is missing, and what `lockgate-cli sql-schema` prints.
    pub fn ddl(&self) -> Vec<String> {
        let t = self.table();
        let p = &self.table_prefix;
        match self.dialect {
            Dialect::Postgres => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (\n  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n  \
                     lock_key VARCHAR(255) NOT NULL,\n  owner VARCHAR(64) NOT NULL,\n  kind VARCHAR(16) NOT NULL,\n  \
                     permits INTEGER NOT NULL,\n  value TEXT NULL,\n  expires_ms BIGINT NOT NULL,\n  \
                     CONSTRAINT {} UNIQUE (lock_key, owner)\n)",
                    self.quote(&format!("{p}entry_key_owner"))
                ),
                format!("CREATE INDEX IF NOT EXISTS {} ON {t} (lock_key, id)", self.quote(&format!("{p}entry_key_id"))),
            ],
            Dialect::MySql => vec![format!(
                "CREATE TABLE IF NOT EXISTS {t} (\n  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n  \
                 lock_key VARCHAR(255) NOT NULL,\n  owner VARCHAR(64) NOT NULL,\n  kind VARCHAR(16) NOT NULL,\n  \
                 permits INT NOT NULL,\n  value TEXT NULL,\n  expires_ms BIGINT NOT NULL,\n  \
                 UNIQUE KEY {} (lock_key, owner),\n  KEY {} (lock_key, id)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 \
                 COLLATE=utf8mb4_bin",
                self.quote(&format!("{p}entry_key_owner")),
                self.quote(&format!("{p}entry_key_id"))
            )],
        }
    }

    /// The DDL as one script (statements ended by `;`), for a DBA.
    pub fn ddl_script(&self) -> String {
        let mut s = String::new();
        for stmt in self.ddl() {
            let _ = writeln!(s, "{stmt};");
        }
        s
    }
}

/// What kind of entry a row is (the `kind` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A mutex holder or waiter.
    Mutex,
    /// A reader of a read-write lock.
    Read,
    /// A writer of a read-write lock.
    Write,
    /// A semaphore permit holder or waiter.
    Semaphore,
    /// An election candidate (the first one is the leader).
    Leader,
}

impl EntryKind {
    /// The `kind` column's text.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Mutex => "mutex",
            EntryKind::Read => "read",
            EntryKind::Write => "write",
            EntryKind::Semaphore => "semaphore",
            EntryKind::Leader => "leader",
        }
    }

    /// The kind a `kind` column's text names.
    pub fn parse(s: &str) -> Option<EntryKind> {
        Some(match s {
            "mutex" => EntryKind::Mutex,
            "read" => EntryKind::Read,
            "write" => EntryKind::Write,
            "semaphore" => EntryKind::Semaphore,
            "leader" => EntryKind::Leader,
            _ => return None,
        })
    }
}

/// One acquire attempt (or a queued waiter's re-check): everything its batch writes and reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireOp {
    /// `<kind>/<name>`.
    pub lock_key: String,
    /// The owner token.
    pub owner: String,
    /// The entry's kind.
    pub kind: EntryKind,
    /// A semaphore's permits (1 for every other kind).
    pub permits: u32,
    /// An election candidate's published value.
    pub value: Option<String>,
    /// The lease: the row's expiry, from the server's now, if it holds after this batch.
    pub lease_ms: u64,
    /// A waiter's entry lease: the row's expiry if it does not hold.
    pub entry_ttl_ms: u64,
}

impl AcquireOp {
    /// The entry holds while fewer than this many live entries that block it are ahead: the
    /// permits for a semaphore, else 1 (a reader counts only the writers ahead).
    pub fn holds_below(&self) -> u32 {
        match self.kind {
            EntryKind::Semaphore => self.permits.max(1),
            _ => 1,
        }
    }
}

/// One structured operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlOp {
    /// Whether the table exists with lockgate's columns: a query of every column that returns
    /// nothing (Main). Reply [`SqlReply::Done`]; a missing table fails with the server's
    /// "undefined table" (`42P01`, `1146`), see [`is_missing_table`].
    Probe,
    /// Creates the table and its index if absent (Main; [`Schema::ddl`]). Reply
    /// [`SqlReply::Done`].
    CreateSchema,
    /// PostgreSQL: `LISTEN` on the channel (Listen). Reply [`SqlReply::Done`].
    Listen,
    /// PostgreSQL: a notification to our own channel with `payload` (Main): the check at
    /// session open that notifications reach the listening connection (they do not behind
    /// PgBouncer in transaction mode). Reply [`SqlReply::Done`].
    NotifySelf {
        /// A payload no release sends (`check:<nonce>`).
        payload: String,
    },
    /// A round trip that changes nothing (`SELECT 1` on Main). Reply [`SqlReply::Done`].
    Ping,
    /// One attempt: under the name's serialization lock (PostgreSQL: a transaction-scoped
    /// advisory lock on the name, for the insert's one statement; MySQL: the name's anchor
    /// row, locked by an upsert in a transaction), so rows of one name commit in id order,
    /// take the doorbell (MySQL) and insert the own row if absent; then, after the commit, the
    /// re-check of [`Check`](Self::Check): delete the name's expired rows (PostgreSQL:
    /// notifying their ids), set the own row's expiry to `now + lease` if it holds by the
    /// recipe's count, else `now + entry_ttl` (MySQL sets it at the insert from a count read
    /// under the anchor), and read the name's live rows up to the own one. Reply
    /// [`SqlReply::Entries`].
    Acquire(AcquireOp),
    /// A queued waiter's re-check of a row it knows it has (its id was read): without the
    /// transaction, the serialization or the insert of [`Acquire`](Self::Acquire) — every row
    /// with a smaller id committed before this row was inserted, so the read is safe alone —
    /// delete the name's dead rows, set the own row's expiry by the recipe's count as `Acquire`
    /// does (only while it is live: an expired row is never revived), and read the name's
    /// live rows. Reply
    /// [`SqlReply::Entries`] (without the own row if it expired).
    Check(AcquireOp),
    /// Sets the expiry of row `id` to `now + ttl` if it is still `owner`'s and live (an
    /// expired row is never revived: someone may hold after it). Reply [`SqlReply::Renewed`].
    Renew {
        /// The row (the fence).
        id: i64,
        /// The owner token.
        owner: String,
        /// The new remaining lease.
        ttl_ms: u64,
    },
    /// Deletes `owner`'s row of `lock_key`, if any, and rings: PostgreSQL notifies its id,
    /// MySQL releases the owner's doorbell (and deletes in a transaction that locks the name's
    /// anchor first, as an acquire does, so the two cannot deadlock). Reply [`SqlReply::Released`].
    Release {
        /// `<kind>/<name>`.
        lock_key: String,
        /// The owner token.
        owner: String,
    },
    /// Reads the first live row of `lock_key` (an election's leader). Reply
    /// [`SqlReply::Leader`].
    Observe {
        /// `<kind>/<name>`.
        lock_key: String,
    },
    /// Reads the live rows of `lock_key` in id order, at most [`INSPECT_ROWS`] (inspecting a
    /// lock, PROTOCOL.md §14). Reply [`SqlReply::Entries`].
    Inspect {
        /// `<kind>/<name>`.
        lock_key: String,
    },
    /// Reads the distinct `lock_key`s of live rows after `after` whose name (after the kind's
    /// `/`) starts with `prefix`, in `lock_key` order, at most `limit` (one page of a listing,
    /// PROTOCOL.md §16; keyset pagination, a plain read that locks nothing). Reply
    /// [`SqlReply::Keys`].
    List {
        /// The name prefix.
        prefix: String,
        /// The last `lock_key` of the previous page (`""` for the first).
        after: String,
        /// The most keys to read.
        limit: u32,
    },
    /// MySQL: waits up to `timeout_secs` for `owner`'s doorbell (`GET_LOCK` then
    /// `RELEASE_LOCK` at once, on a Wait connection). Reply [`SqlReply::Rang`].
    WaitDoorbell {
        /// The predecessor's owner token.
        owner: String,
        /// How long to block, in whole seconds (at least 1).
        timeout_secs: u64,
    },
    /// MySQL: takes the doorbells of these owners again on Main (after it was replaced, its
    /// named locks went with the old connection). Reply [`SqlReply::Doorbells`].
    TakeDoorbells {
        /// The owner tokens whose rows this client has.
        owners: Vec<String>,
    },
    /// The heartbeat of a client's waiters (Refresh): sets each listed row's expiry to at least
    /// `now + ttl` of its group, only while it is live (an expired row is never revived) and
    /// never shortening it (a row granted meanwhile keeps its lease). One statement per group
    /// (per chunk of [`REFRESH_CHUNK`] ids), instead of one re-check per waiter. Then reads
    /// which of the rows in `watch` (what the waiters wait behind) are live and their remaining
    /// milliseconds, by primary key (one statement per chunk; `watch.rs`). Reply
    /// [`SqlReply::Refreshed`].
    Refresh {
        /// `(ttl_ms, row ids)`: the rows refreshed to `now + ttl_ms`.
        groups: Vec<(u64, Vec<i64>)>,
        /// The rows whose liveness is read after the refresh, in id order.
        watch: Vec<i64>,
    },
    /// Deletes every row of these owners (a client closing) and rings for each; MySQL also
    /// releases every named lock of Main. Reply [`SqlReply::Deleted`].
    DeleteOwners {
        /// The owner tokens.
        owners: Vec<String>,
    },
}

/// A live row of a lock name, as an acquire or observe reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRow {
    /// The id: queue order and fencing token.
    pub id: i64,
    /// The owner token.
    pub owner: String,
    /// The kind (`None`: a kind this version does not know, which blocks like a writer).
    pub kind: Option<EntryKind>,
    /// A semaphore's permits as its entry said.
    pub permits: i64,
    /// An election candidate's value.
    pub value: Option<String>,
    /// Its remaining lease on the server's clock when read (positive: only live rows are
    /// read).
    pub remaining_ms: i64,
}

/// A successful reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlReply {
    /// Done, nothing to read.
    Done,
    /// The name's live rows in id order up to the own row, after the attempt (none if the own
    /// row expired meanwhile).
    Entries {
        /// The rows.
        rows: Vec<EntryRow>,
    },
    /// Whether the renewal found the row live and set its expiry.
    Renewed {
        /// 1 row updated.
        renewed: bool,
    },
    /// What the release deleted.
    Released {
        /// A row was deleted.
        deleted: bool,
        /// It was live when deleted.
        was_held: bool,
    },
    /// The first live row, if any.
    Leader(Option<EntryRow>),
    /// Whether the doorbell was free (rung: its owner released it or its connection died)
    /// within the wait, or the wait timed out.
    Rang {
        /// Free within the wait.
        rang: bool,
    },
    /// A listing page's `lock_key`s, in order.
    Keys {
        /// The keys.
        keys: Vec<String>,
    },
    /// Which doorbells were taken, in the order asked.
    Doorbells {
        /// Taken (or already ours) per owner.
        taken: Vec<bool>,
    },
    /// How many rows a refresh found live and refreshed, and which watched rows it read live.
    Refreshed {
        /// The count.
        count: u64,
        /// `(id, remaining_ms)` of each watched row that was live when read (positive).
        live: Vec<(i64, i64)>,
    },
    /// How many rows were deleted.
    Deleted {
        /// The count.
        count: u64,
    },
}

/// What the driver hands back for a [`SqlRequest`].
pub type SqlResult = std::result::Result<SqlReply, SqlFailure>;

/// The doorbell (MySQL named lock) of an owner token.
pub fn doorbell(owner: &str) -> String {
    format!("{DOORBELL_PREFIX}{owner}")
}

/// Whether a failure says the table (or one of its columns) does not exist.
pub fn is_missing_table(f: &SqlFailure) -> bool {
    matches!(f, SqlFailure::Server { code, .. } if code == "42P01" || code == "1146" || code == "3F000")
}

/// A statement builder: SQL text with its parameters, numbered as they are added.
struct Stmt<'s> {
    schema: &'s Schema,
    sql: String,
    params: Vec<Value>,
}

impl<'s> Stmt<'s> {
    fn new(schema: &'s Schema) -> Self {
        Stmt { schema, sql: String::new(), params: Vec::new() }
    }

    /// Appends SQL text.
    fn s(mut self, text: &str) -> Self {
        self.sql.push_str(text);
        self
    }

    /// Appends a text parameter.
    fn text(mut self, v: &str) -> Self {
        self.params.push(Value::Text(v.to_string()));
        let ph = self.schema.ph(self.params.len());
        self.sql.push_str(&ph);
        self
    }

    /// Appends a nullable text parameter.
    fn opt_text(mut self, v: Option<&str>) -> Self {
        self.params.push(v.map_or(Value::Null, |v| Value::Text(v.to_string())));
        let ph = match self.schema.dialect {
            Dialect::Postgres => format!("${}::TEXT", self.params.len()),
            Dialect::MySql => "?".to_string(),
        };
        self.sql.push_str(&ph);
        self
    }

    /// Appends an integer parameter.
    fn int(mut self, v: i64) -> Self {
        self.params.push(Value::Int(v));
        let ph = self.schema.int(self.params.len());
        self.sql.push_str(&ph);
        self
    }

    /// Appends the server's clock.
    fn now(self) -> Self {
        let now = self.schema.now_ms();
        self.s(now)
    }

    fn done(self) -> Statement {
        Statement { sql: self.sql, params: self.params }
    }
}

fn plain(sql: &str) -> Statement {
    Statement { sql: sql.to_string(), params: Vec::new() }
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The columns an acquire or observe reads, in [`EntryRow`]'s order.
const ROW_COLUMNS: &str = "id, owner, kind, permits, value, ";

/// The most rows one inspect reads (holders first, then waiters in queue order): a snapshot
/// for people, bounded so that a name with a runaway queue cannot make it a large read.
pub const INSPECT_ROWS: u32 = 10_000;

/// The `lock_key` directories a listing reads, one per kind (`target.rs`).
pub const LIST_DIRS: [&str; 4] = ["mutex", "rw", "semaphore", "election"];

impl SqlOp {
    /// The batch that performs this operation on `schema`'s table, in its dialect.
    pub fn render(&self, schema: &Schema) -> Batch {
        let t = schema.table();
        let pg = schema.dialect == Dialect::Postgres;
        let main = |statements| Batch { conn: Conn::Main, statements };
        match self {
            SqlOp::Probe => main(vec![plain(&format!(
                "SELECT id, lock_key, owner, kind, permits, value, expires_ms FROM {t} WHERE 1 = 0"
            ))]),
            SqlOp::CreateSchema => main(schema.ddl().iter().map(|s| plain(s)).collect()),
            SqlOp::Listen => Batch { conn: Conn::Listen, statements: vec![plain(&format!("LISTEN {}", schema.quote(&schema.channel())))] },
            SqlOp::NotifySelf { payload } => {
                main(vec![Stmt::new(schema).s("SELECT pg_notify(").text(&schema.channel()).s(", ").text(payload).s(")::TEXT").done()])
            }
            SqlOp::Ping => main(vec![plain("SELECT 1")]),
            SqlOp::Acquire(a) => main(render_acquire(schema, a)),
            SqlOp::Check(a) => main(render_check(schema, a)),
            SqlOp::Renew { id, owner, ttl_ms } => main(vec![Stmt::new(schema)
                .s(&format!("UPDATE {t} SET expires_ms = "))
                .now()
                .s(" + ")
                .int(ms(*ttl_ms))
                .s(" WHERE id = ")
                .int(*id)
                .s(" AND owner = ")
                .text(owner)
                .s(" AND expires_ms > ")
                .now()
                .done()]),
            SqlOp::Release { lock_key, owner } => {
                if pg {
                    main(vec![Stmt::new(schema)
                        .s(&format!("WITH d AS (DELETE FROM {t} WHERE lock_key = "))
                        .text(lock_key)
                        .s(" AND owner = ")
                        .text(owner)
                        .s(" RETURNING id, expires_ms) SELECT d.id, CASE WHEN d.expires_ms > ")
                        .now()
                        .s(" THEN 1 ELSE 0 END, pg_notify(")
                        .text(&schema.channel())
                        .s(", d.id::TEXT)::TEXT FROM d")
                        .done()])
                } else {
                    // The name's anchor is locked first, as an acquire locks it: a delete
                    // outside it deadlocks with an acquire's upsert of the anchor and insert.
                    main(vec![
                        plain("BEGIN"),
                        Stmt::new(schema)
                            .s(&format!("SELECT id FROM {t} WHERE lock_key = "))
                            .text(lock_key)
                            .s(&format!(" AND owner = '{ANCHOR_OWNER}' FOR UPDATE"))
                            .done(),
                        Stmt::new(schema)
                            .s("SELECT id, CASE WHEN expires_ms > ")
                            .now()
                            .s(&format!(" THEN 1 ELSE 0 END FROM {t} WHERE lock_key = "))
                            .text(lock_key)
                            .s(" AND owner = ")
                            .text(owner)
                            .done(),
                        Stmt::new(schema).s(&format!("DELETE FROM {t} WHERE lock_key = ")).text(lock_key).s(" AND owner = ").text(owner).done(),
                        plain("COMMIT"),
                        Stmt::new(schema).s("SELECT RELEASE_LOCK(").text(&doorbell(owner)).s(")").done(),
                    ])
                }
            }
            SqlOp::Observe { lock_key } => main(vec![Stmt::new(schema)
                .s(&format!("SELECT {ROW_COLUMNS}expires_ms - "))
                .now()
                .s(&format!(" FROM {t} WHERE lock_key = "))
                .text(lock_key)
                .s(&format!(" AND owner <> '{ANCHOR_OWNER}' AND expires_ms > "))
                .now()
                .s(" ORDER BY id LIMIT 1")
                .done()]),
            SqlOp::Inspect { lock_key } => main(vec![Stmt::new(schema)
                .s(&format!("SELECT {ROW_COLUMNS}expires_ms - "))
                .now()
                .s(&format!(" FROM {t} WHERE lock_key = "))
                .text(lock_key)
                .s(&format!(" AND owner <> '{ANCHOR_OWNER}' AND expires_ms > "))
                .now()
                .s(&format!(" ORDER BY id LIMIT {INSPECT_ROWS}"))
                .done()]),
            SqlOp::List { prefix, after, limit } => {
                // `!` escapes LIKE's wildcards the same way in both dialects (a backslash is
                // also a string escape on MySQL).
                let like: String = prefix.chars().fold(String::new(), |mut out, c| {
                    if matches!(c, '!' | '%' | '_') {
                        out.push('!');
                    }
                    out.push(c);
                    out
                });
                let mut stmt = Stmt::new(schema)
                    .s(&format!("SELECT DISTINCT lock_key FROM {t} WHERE lock_key > "))
                    .text(after)
                    .s(" AND (");
                for (i, dir) in LIST_DIRS.iter().enumerate() {
                    stmt = stmt.s(if i == 0 { "lock_key LIKE " } else { " OR lock_key LIKE " }).text(&format!("{dir}/{like}%")).s(" ESCAPE '!'");
                }
                main(vec![stmt
                    .s(&format!(") AND owner <> '{ANCHOR_OWNER}' AND expires_ms > "))
                    .now()
                    .s(&format!(" ORDER BY lock_key LIMIT {limit}"))
                    .done()])
            }
            SqlOp::WaitDoorbell { owner, timeout_secs } => {
                let name = doorbell(owner);
                Batch {
                    conn: Conn::Wait,
                    statements: vec![
                        Stmt::new(schema).s("SELECT GET_LOCK(").text(&name).s(", ").int(ms(*timeout_secs).max(1)).s(")").done(),
                        Stmt::new(schema).s("SELECT RELEASE_LOCK(").text(&name).s(")").done(),
                    ],
                }
            }
            SqlOp::TakeDoorbells { owners } => main(owners.iter().map(|o| take_doorbell(schema, o)).collect()),
            SqlOp::Refresh { groups, watch } => Batch {
                conn: Conn::Refresh,
                statements: groups
                    .iter()
                    .flat_map(|(ttl, ids)| ids.chunks(REFRESH_CHUNK).map(move |chunk| refresh(schema, *ttl, chunk)))
                    .chain(watch.chunks(REFRESH_CHUNK).map(|chunk| watch_rows(schema, chunk)))
                    .collect(),
            },
            SqlOp::DeleteOwners { owners } => {
                let mut stmt = Stmt::new(schema);
                stmt = if pg { stmt.s(&format!("WITH d AS (DELETE FROM {t} WHERE owner IN (")) } else { stmt.s(&format!("DELETE FROM {t} WHERE owner IN (")) };
                for (i, o) in owners.iter().enumerate() {
                    if i > 0 {
                        stmt = stmt.s(", ");
                    }
                    stmt = stmt.text(o);
                }
                if owners.is_empty() {
                    // `IN ()` is no SQL: an owner no row can have.
                    stmt = stmt.text(ANCHOR_OWNER);
                }
                if pg {
                    stmt = stmt.s(") RETURNING id) SELECT pg_notify(").text(&schema.channel()).s(", d.id::TEXT)::TEXT FROM d");
                    main(vec![stmt.done()])
                } else {
                    main(vec![stmt.s(")").done(), plain("SELECT RELEASE_ALL_LOCKS()")])
                }
            }
        }
    }

    /// What the statements' results mean: the reply, or a failure if they make no sense. Reads
    /// results by their place from the end of the batch, so it needs no dialect.
    pub fn parse(&self, rows: Vec<Rows>) -> SqlResult {
        let bad = |why: String| Err(SqlFailure::Other(Error::protocol(format!("the database answered {why}"))));
        match self {
            SqlOp::Probe | SqlOp::CreateSchema | SqlOp::Listen | SqlOp::NotifySelf { .. } | SqlOp::Ping => Ok(SqlReply::Done),
            SqlOp::Acquire(a) | SqlOp::Check(a) => {
                // Both end with the re-check, whose last statement reads the rows (MySQL's
                // newest first: sorted here).
                let Some(select) = rows.last() else {
                    return bad(format!("an acquire with {} results", rows.len()));
                };
                let mut out = Vec::with_capacity(select.rows.len());
                for r in &select.rows {
                    match entry_row(r) {
                        Some(e) => out.push(e),
                        None => return bad(format!("an acquire with the row {r:?}")),
                    }
                }
                out.sort_by_key(|e| e.id);
                // MySQL's read has a row more than the bound when the own row is not among
                // them (gone, or dead): the oldest of those is not just ahead of it.
                let bound = a.holds_below() as usize;
                if out.len() > bound && !out.iter().any(|e| e.owner == a.owner) {
                    out.drain(..out.len() - bound);
                }
                Ok(SqlReply::Entries { rows: out })
            }
            SqlOp::Renew { .. } => match rows.first() {
                Some(r) => Ok(SqlReply::Renewed { renewed: r.affected >= 1 }),
                None => bad("a renewal with no result".into()),
            },
            // PostgreSQL: [DELETE .. RETURNING]; MySQL: [BEGIN, anchor, SELECT, DELETE, COMMIT,
            // RELEASE_LOCK].
            SqlOp::Release { .. } => match rows.get(if rows.len() > 1 { 2 } else { 0 }) {
                Some(r) => {
                    let was_held = r.rows.iter().any(|row| row.get(1).and_then(Value::as_int) == Some(1));
                    Ok(SqlReply::Released { deleted: !r.rows.is_empty(), was_held })
                }
                None => bad("a release with no result".into()),
            },
            SqlOp::Observe { .. } => match rows.first() {
                Some(r) => match r.rows.first() {
                    None => Ok(SqlReply::Leader(None)),
                    Some(row) => match entry_row(row) {
                        Some(e) => Ok(SqlReply::Leader(Some(e))),
                        None => bad(format!("an observe with the row {row:?}")),
                    },
                },
                None => bad("an observe with no result".into()),
            },
            SqlOp::Inspect { .. } => {
                let Some(select) = rows.first() else {
                    return bad("an inspect with no result".into());
                };
                let mut out = Vec::with_capacity(select.rows.len());
                for r in &select.rows {
                    match entry_row(r) {
                        Some(e) => out.push(e),
                        None => return bad(format!("an inspect with the row {r:?}")),
                    }
                }
                Ok(SqlReply::Entries { rows: out })
            }
            SqlOp::List { .. } => {
                let Some(select) = rows.first() else {
                    return bad("a listing with no result".into());
                };
                let mut keys = Vec::with_capacity(select.rows.len());
                for r in &select.rows {
                    match r.as_slice() {
                        [Value::Text(k)] => keys.push(k.clone()),
                        _ => return bad(format!("a listing with the row {r:?}")),
                    }
                }
                Ok(SqlReply::Keys { keys })
            }
            SqlOp::WaitDoorbell { .. } => {
                let got = rows.first().and_then(|r| r.rows.first()).and_then(|row| row.first()).and_then(Value::as_int);
                Ok(SqlReply::Rang { rang: got == Some(1) })
            }
            SqlOp::TakeDoorbells { owners } => {
                let taken: Vec<bool> = (0..owners.len())
                    .map(|i| rows.get(i).and_then(|r| r.rows.first()).and_then(|row| row.first()).and_then(Value::as_int) == Some(1))
                    .collect();
                Ok(SqlReply::Doorbells { taken })
            }
            SqlOp::Refresh { watch, .. } => {
                // The watch's reads are the batch's last statements.
                let reads = watch.chunks(REFRESH_CHUNK).count();
                let Some(updates) = rows.len().checked_sub(reads) else {
                    return bad(format!("a refresh with {} results", rows.len()));
                };
                let count = rows[..updates].iter().map(|r| r.affected).sum();
                let mut live = Vec::new();
                for r in rows[updates..].iter().flat_map(|r| &r.rows) {
                    match r.as_slice() {
                        [id, remaining] => match (id.as_int(), remaining.as_int()) {
                            (Some(id), Some(remaining)) => live.push((id, remaining)),
                            _ => return bad(format!("a watched row {r:?}")),
                        },
                        _ => return bad(format!("a watched row {r:?}")),
                    }
                }
                Ok(SqlReply::Refreshed { count, live })
            }
            SqlOp::DeleteOwners { .. } => match rows.first() {
                Some(r) => Ok(SqlReply::Deleted { count: r.affected.max(r.rows.len() as u64) }),
                None => bad("a delete with no result".into()),
            },
        }
    }
}

/// One refresh statement: rows `ids` (at most [`REFRESH_CHUNK`]) live until at least
/// `now + ttl_ms`. By primary key only: it reads no other row, so it waits for no reap or
/// insert of the names.
fn refresh(schema: &Schema, ttl_ms: u64, ids: &[i64]) -> Statement {
    let t = schema.table();
    let stmt = Stmt::new(schema)
        .s(&format!("UPDATE {t} SET expires_ms = GREATEST(expires_ms, "))
        .now()
        .s(" + ")
        .int(ms(ttl_ms))
        .s(") WHERE ");
    by_ids(stmt, ids).s(" AND expires_ms > ").now().done()
}

/// One read of the heartbeat's watch: which of rows `ids` (at most [`REFRESH_CHUNK`]) are live,
/// with their remaining milliseconds. By primary key, a plain read: it locks nothing and waits
/// for nothing, whatever the names' queues are doing.
fn watch_rows(schema: &Schema, ids: &[i64]) -> Statement {
    let t = schema.table();
    let stmt = Stmt::new(schema).s("SELECT id, expires_ms - ").now().s(&format!(" FROM {t} WHERE "));
    by_ids(stmt, ids).s(" AND expires_ms > ").now().done()
}

/// `id` is one of `ids`, appended to `stmt`: PostgreSQL takes the ids as one text parameter (one
/// prepared statement for any count); MySQL as an `IN` list padded to a power of two (a few
/// statement texts for every size).
fn by_ids<'s>(stmt: Stmt<'s>, ids: &[i64]) -> Stmt<'s> {
    match stmt.schema.dialect {
        Dialect::Postgres => {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            stmt.s("id = ANY(string_to_array(").text(&list.join(",")).s(", ',')::BIGINT[])")
        }
        Dialect::MySql => {
            let padded = ids.len().max(1).next_power_of_two().min(REFRESH_CHUNK.max(ids.len()));
            let mut stmt = stmt.s("id IN (");
            for i in 0..padded {
                if i > 0 {
                    stmt = stmt.s(", ");
                }
                stmt = stmt.int(ids.get(i).or(ids.last()).copied().unwrap_or(0));
            }
            stmt.s(")")
        }
    }
}

/// MySQL: takes `owner`'s doorbell unless this connection has it already (`GET_LOCK` nests: a
/// second take would need a second release).
fn take_doorbell(schema: &Schema, owner: &str) -> Statement {
    let name = doorbell(owner);
    Stmt::new(schema)
        .s("SELECT CASE WHEN IS_USED_LOCK(")
        .text(&name)
        .s(") = CONNECTION_ID() THEN 1 ELSE GET_LOCK(")
        .text(&name)
        .s(", 0) END")
        .done()
}

/// The acquire batch. The insert is serialized per name so that rows of one name commit in id
/// order (a row read as first cannot be overtaken by a smaller id committing later); what
/// follows the insert is the re-check ([`render_check`]), after the serialization has ended:
/// every row with a smaller id committed before the own row was inserted, so reading after
/// the commit is as safe as a waiter's re-check, and the name's lock is held for the insert
/// alone.
/// - PostgreSQL, two autocommit statements a transport may pipeline: the advisory lock and the
///   insert in one statement (the lock is taken in a materialized CTE before the insert draws
///   its id; the lock ends with the statement's commit), then the one-statement re-check. The
///   re-check cannot share the insert's statement: a statement's snapshot is taken before it
///   waits for the lock, and would miss rows committed meanwhile.
/// - MySQL/MariaDB: `BEGIN`, the name's anchor row upserted (an exclusive row lock until
///   `COMMIT`; `INSERT IGNORE` would take a shared one, and two shared lockers would deadlock),
///   the own doorbell taken, the insert, `COMMIT`, then the re-check's statements.
fn render_acquire(schema: &Schema, a: &AcquireOp) -> Vec<Statement> {
    let t = schema.table();
    let columns = "(lock_key, owner, kind, permits, value, expires_ms)";
    /// The own row's values up to its expiry's `now`, which the caller completes.
    fn values<'s>(stmt: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
        stmt.text(&a.lock_key)
            .s(", ")
            .text(&a.owner)
            .s(", ")
            .text(a.kind.as_str())
            .s(", ")
            .int(i64::from(a.permits))
            .s(", ")
            .opt_text(a.value.as_deref())
            .s(", ")
            .now()
    }
    let mut out = match schema.dialect {
        Dialect::Postgres => {
            let insert = Stmt::new(schema)
                .s("WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(")
                .int(i64::from(ADVISORY_CLASS))
                .s("::INTEGER, hashtext(")
                .text(&format!("{}{}", schema.table_name(), a.lock_key))
                .s(&format!(")) AS locked) INSERT INTO {t} {columns} SELECT "));
            vec![values(insert, a).s(" + ").int(ms(a.entry_ttl_ms)).s(" FROM l ON CONFLICT (lock_key, owner) DO NOTHING").done()]
        }
        Dialect::MySql => {
            let anchor = Stmt::new(schema)
                .s(&format!("INSERT INTO {t} {columns} VALUES ("))
                .text(&a.lock_key)
                .s(&format!(", '{ANCHOR_OWNER}', 'anchor', 0, NULL, 0) ON DUPLICATE KEY UPDATE expires_ms = 0"))
                .done();
            // The new row's expiry is chosen by the recipe's count as it is inserted: under the
            // anchor every row with a smaller id has committed, and the transaction's snapshot
            // is taken by the count (its first read), after the anchor's lock, so the count
            // sees them all. This spares the re-check's `UPDATE .. JOIN`, MySQL's costliest
            // statement here. The count goes through a session variable: an `INSERT .. SELECT`
            // reading its own table would take InnoDB's table-wide AUTO-INC lock (and fail
            // with 1467 under a thousand concurrent inserts). A row that was there already (a
            // retry after a lost reply) keeps its expiry; the read reports what is left of it.
            let blocking = blocking_only(a, "");
            // Whether the recipe's bound is reached is all the count tells, so it reads whether
            // the bound's last row exists ([`FULL`]).
            let count = Stmt::new(schema)
                .s(&format!("SELECT (SELECT 1 FROM {t} WHERE lock_key = "))
                .text(&a.lock_key)
                .s(&format!(" AND owner <> '{ANCHOR_OWNER}'{blocking} AND expires_ms > "))
                .now()
                .s(&format!(" LIMIT {}, 1) INTO {FULL}", a.holds_below() - 1))
                .done();
            let insert = values(Stmt::new(schema).s(&format!("INSERT IGNORE INTO {t} {columns} VALUES (")), a)
                .s(&format!(" + CASE WHEN {FULL} IS NULL THEN "))
                .int(ms(a.lease_ms))
                .s(" ELSE ")
                .int(ms(a.entry_ttl_ms))
                .s(" END)")
                .done();
            // The own row's id for the read after the commit: the insert's, or (a retry whose
            // row was there already) looked up. The read then finds its rows by the id alone,
            // which halves its cost on MariaDB.
            let own = own_id(Stmt::new(schema).s(&format!("SET {OWN} = IF(ROW_COUNT() > 0, LAST_INSERT_ID(), ")), a).s(")").done();
            return vec![
                plain("BEGIN"),
                anchor,
                take_doorbell(schema, &a.owner),
                count,
                insert,
                own,
                plain("COMMIT"),
                plain(READ_COMMITTED),
                reap(schema, &a.lock_key),
                read_rows(schema, a),
            ];
        }
    };
    out.extend(render_check(schema, a));
    out
}

/// A re-check of a row the client has (after an acquire's insert, or a waiter's): delete the
/// name's dead rows (PostgreSQL: notifying their ids), set the own row's expiry by the
/// recipe's count while it is live, and read the name's live rows up to the own one, in id
/// order (none if the own row expired). PostgreSQL does it in one statement; MySQL, which
/// has neither data-modifying CTEs nor `UPDATE .. RETURNING`, in three.
fn render_check(schema: &Schema, a: &AcquireOp) -> Vec<Statement> {
    match schema.dialect {
        Dialect::Postgres => vec![check_pg(schema, a)],
        Dialect::MySql => {
            // The own row's id, looked up once for the count and the read after it, which then
            // find their rows by the id alone (a subquery in each cost MariaDB twice as much).
            let own = own_id(Stmt::new(schema).s(&format!("SET {OWN} = ")), a).done();
            let [count, update] = set_expiry_my(schema, a);
            vec![plain(READ_COMMITTED), reap(schema, &a.lock_key), own, count, update, read_rows(schema, a)]
        }
    }
}

/// PostgreSQL's re-check in one statement. Every part sees the statement's one snapshot: the
/// rows the reap deletes are expired, so neither the count nor the read would take them
/// anyway, and the own row comes from the update's `RETURNING` (its new expiry), appended to
/// the live rows ahead of it. Data-modifying CTEs run to completion whether read or not.
fn check_pg(schema: &Schema, a: &AcquireOp) -> Statement {
    let t = schema.table();
    let reap = Stmt::new(schema)
        .s(&format!("WITH d AS (DELETE FROM {t} WHERE lock_key = "))
        .text(&a.lock_key)
        .s(" AND expires_ms <= ")
        .now()
        .s(" RETURNING pg_notify(")
        .text(&schema.channel())
        .s(", id::TEXT)::TEXT), u AS (");
    let update = expiry_update(reap, a)
        .s(&format!(" RETURNING me.{}, me.expires_ms - ", ROW_COLUMNS.trim_end_matches(", ").replace(", ", ", me.")))
        .now()
        .s(") SELECT * FROM (");
    rows_ahead(update, a).s(") AS ahead UNION ALL SELECT * FROM u ORDER BY 1").done()
}

/// The condition that keeps only the rows that block an entry like `a`'s (a reader: the
/// non-readers), on the table's alias `alias` (`""`: unqualified).
fn blocking_only(a: &AcquireOp, alias: &str) -> String {
    if a.kind == EntryKind::Read { format!(" AND {alias}kind <> 'read'") } else { String::new() }
}

/// Where the re-check looks: `FROM` the nearest live rows ahead of `a`'s own row that block it,
/// at most `holds_below` of them (by the (lock_key, id) index, newest first), appended to a
/// `SELECT` of what the caller needs from them (alias `b`). Fewer than that many means it
/// holds, and a waiter waits behind those alone (`recipe.rs`), so neither the count nor the
/// read covers the whole queue ahead. The limit is written out, not bound: a small number of
/// the options (never text), and some drivers bind integers in a way `LIMIT` refuses.
fn nearest_ahead<'s>(select: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
    ahead(select, a, OwnId::Lookup).s(&format!(" ORDER BY b.id DESC LIMIT {}", a.holds_below()))
}

/// [`nearest_ahead`]'s rows without their order and bound, which the caller adds: `FROM` the
/// live rows ahead of `a`'s own row (its id from `own`) that block it (alias `b`).
fn ahead<'s>(select: Stmt<'s>, a: &AcquireOp, own: OwnId) -> Stmt<'s> {
    let t = select.schema.table();
    let select = select
        .s(&format!(" FROM {t} AS b WHERE b.lock_key = "))
        .text(&a.lock_key)
        .s(&format!(" AND b.owner <> '{ANCHOR_OWNER}'{} AND b.expires_ms > ", blocking_only(a, "b.")))
        .now()
        .s(" AND b.id < ");
    match own {
        OwnId::Lookup => own_id(select, a),
        OwnId::Kept => select.s(OWN),
    }
}

/// `a`'s own row's id as a scalar subquery (alias `o`): NULL once the row is gone, which no
/// comparison matches.
fn own_id<'s>(stmt: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
    let t = stmt.schema.table();
    stmt.s(&format!("(SELECT o.id FROM {t} AS o WHERE o.lock_key = ")).text(&a.lock_key).s(" AND o.owner = ").text(&a.owner).s(")")
}

/// The rows [`read_rows`] and PostgreSQL's re-check report, with their remaining milliseconds:
/// [`nearest_ahead`]'s rows, appended to `stmt`.
fn rows_ahead<'s>(stmt: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
    nearest_ahead(stmt.s(&format!("SELECT {ROW_COLUMNS}expires_ms - ")).now(), a)
}

/// PostgreSQL: the own row's expiry, `now + lease` if it holds by the recipe's count, else
/// `now + entry_ttl`, only while it is live (an expired row is never revived); appended to
/// `update` (the re-check's one statement).
fn expiry_update<'s>(update: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
    let t = update.schema.table();
    let update = nearest_ahead(update.s(&format!("UPDATE {t} AS me SET expires_ms = ")).now().s(" + CASE WHEN (SELECT COUNT(*) FROM (SELECT 1"), a)
        .s(") AS x) < ");
    own_expiry(update.int(i64::from(a.holds_below())).s(" THEN "), a)
}

/// The end of an expiry update: the lease, else the entry lease, for `a`'s own row while it
/// is live.
fn own_expiry<'s>(update: Stmt<'s>, a: &AcquireOp) -> Stmt<'s> {
    update
        .int(ms(a.lease_ms))
        .s(" ELSE ")
        .int(ms(a.entry_ttl_ms))
        .s(" END WHERE me.lock_key = ")
        .text(&a.lock_key)
        .s(" AND me.owner = ")
        .text(&a.owner)
        .s(" AND me.expires_ms > ")
        .now()
}

/// MySQL: the own row's expiry as [`expiry_update`] sets it, in two statements: the count into
/// a session variable ([`FULL`]: a plain read, which locks nothing), then the update of the
/// own row by its key. One `UPDATE .. JOIN` over a derived count took shared locks on every row it
/// scanned, even at READ COMMITTED, and deadlocked with the reaps' deletes of expired rows
/// (hundreds of InnoDB deadlocks in a burst of 1,500 waiters). Apart is as safe: the rows
/// ahead of a row all committed before it was inserted and can only leave, so a count below
/// the bound stays below it; one that drops below between the two statements leaves the row
/// its entry lease, and the read after reports the row's real remaining time (a grant shorter
/// than the lease is extended like a renewal).
fn set_expiry_my(schema: &Schema, a: &AcquireOp) -> [Statement; 2] {
    let t = schema.table();
    let count = ahead(Stmt::new(schema).s("SELECT (SELECT 1"), a, OwnId::Kept)
        .s(&format!(" ORDER BY b.id DESC LIMIT {}, 1) INTO {FULL}", a.holds_below() - 1))
        .done();
    let update = Stmt::new(schema).s(&format!("UPDATE {t} AS me SET me.expires_ms = ")).now().s(&format!(" + CASE WHEN {FULL} IS NULL THEN "));
    [count, own_expiry(update, a).done()]
}

/// MySQL: the next statement (the reap, in autocommit) runs at READ COMMITTED. At InnoDB's
/// REPEATABLE READ a `DELETE .. WHERE lock_key = ?` locks every row it scans with its gap —
/// the whole queue of the name and its anchor, which an acquire's transaction holds — and the
/// acquire's insert then waits for the reap's gap lock: a deadlock (1213; 2,727 in one burst
/// of 1,500 waiters), whose re-run sends that acquire's insert behind the client's later ones.
/// At READ COMMITTED the reap locks only the rows it deletes (expired ones) and skips a locked
/// row that does not match (the anchor) without waiting.
const READ_COMMITTED: &str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// MySQL: the session variable the count sets for the statement after it: NULL while fewer
/// live rows that block the entry are there than the recipe's bound (it holds), else 1. The
/// count reads whether the bound's last row exists, by a scalar subquery: a `COUNT(*)` over a
/// `LIMIT`ed derived table, as before, cost MariaDB a temporary table each time.
const FULL: &str = "@lockgate_full";

/// MySQL: the session variable a batch keeps the own row's id in for its reads (an acquire's
/// from its insert, a re-check's looked up), so each finds its rows by the id alone.
const OWN: &str = "@lockgate_own";

/// Where a read of the rows ahead of the own row takes the own row's id from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnId {
    /// A subquery by the row's key (PostgreSQL, whose re-check is one statement).
    Lookup,
    /// [`OWN`], set earlier in the batch (MySQL).
    Kept,
}

/// Deletes the name's expired entries (never the anchor); PostgreSQL wakes whoever waits
/// behind them (their ids notified).
fn reap(schema: &Schema, lock_key: &str) -> Statement {
    let t = schema.table();
    if schema.dialect == Dialect::Postgres {
        Stmt::new(schema)
            .s(&format!("WITH d AS (DELETE FROM {t} WHERE lock_key = "))
            .text(lock_key)
            .s(" AND expires_ms <= ")
            .now()
            .s(" RETURNING id) SELECT pg_notify(")
            .text(&schema.channel())
            .s(", d.id::TEXT)::TEXT FROM d")
            .done()
    } else {
        Stmt::new(schema)
            .s(&format!("DELETE FROM {t} WHERE lock_key = "))
            .text(lock_key)
            .s(&format!(" AND owner <> '{ANCHOR_OWNER}' AND expires_ms <= "))
            .now()
            .done()
    }
}

/// The own row if live, and the live rows just ahead of it that block it — as many as the
/// recipe needs (`holds_below`: fewer of them means it holds, and a waiter waits behind them
/// alone, `recipe.rs`) — with their remaining milliseconds, newest first: one read of the
/// (lock_key, id) index from the own row's id back ([`OWN`], kept earlier in the batch), at
/// most one row more than the bound. With the
/// own row gone or dead that is one row ahead too many, which [`SqlOp::parse`] drops. A waiter
/// far back in a long queue reads a few rows, not the whole queue ahead, on every re-check:
/// the reads of a queue of n handed over grow with n, not n². (A union of the rows ahead and
/// the own row, as before, cost MariaDB twice the time; sorting that union on the server, a
/// temporary table, a third of an uncontended pair's.)
fn read_rows(schema: &Schema, a: &AcquireOp) -> Statement {
    let t = schema.table();
    let read = Stmt::new(schema)
        .s(&format!("SELECT {ROW_COLUMNS}expires_ms - "))
        .now()
        .s(&format!(" FROM {t} WHERE lock_key = "))
        .text(&a.lock_key)
        .s(&format!(" AND owner <> '{ANCHOR_OWNER}' AND expires_ms > "))
        .now()
        .s(&format!(" AND id <= {OWN}"));
    // A reader's own row is a read; the rows ahead of it that block it are not.
    let read = if a.kind == EntryKind::Read { read.s(" AND (kind <> 'read' OR owner = ").text(&a.owner).s(")") } else { read };
    // With a bound of 1, a count that found no live row that blocks (FULL is NULL) leaves
    // only the own row to read: rows ahead of it all committed before it and can only leave.
    // Said in the statement, the server reads that row by its id alone instead of walking
    // the index back past every row of the name it has not purged yet (InnoDB purges deleted
    // rows in bursts, so a name taken and released a thousand times a second has hundreds).
    let read = if a.holds_below() == 1 { read.s(&format!(" AND ({FULL} IS NOT NULL OR id = {OWN})")) } else { read };
    read.s(&format!(" ORDER BY id DESC LIMIT {}", a.holds_below() + 1)).done()
}

/// A row of [`ROW_COLUMNS`] + remaining.
fn entry_row(r: &[Value]) -> Option<EntryRow> {
    let [id, owner, kind, permits, value, remaining] = r else { return None };
    Some(EntryRow {
        id: id.as_int()?,
        owner: owner.as_text()?.to_string(),
        kind: EntryKind::parse(kind.as_text()?),
        permits: permits.as_int()?,
        value: match value {
            Value::Null => None,
            Value::Text(t) => Some(t.clone()),
            Value::Int(i) => Some(i.to_string()),
        },
        remaining_ms: remaining.as_int()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn op() -> AcquireOp {
        AcquireOp {
            lock_key: "mutex/orders".into(),
            owner: "ab12".into(),
            kind: EntryKind::Mutex,
            permits: 1,
            value: None,
            lease_ms: 30_000,
            entry_ttl_ms: 10_000,
        }
    }

    /// A re-check reads and counts only the rows the recipe needs just ahead of its own (1, a
    /// semaphore `permits`), never the whole queue ahead: every read goes newest first from the
    /// own row back and stops at the bound (the count at its last row; MySQL's read of the own
    /// row with them at one more); MySQL's update locks only its row.
    #[test]
    fn a_recheck_reads_only_the_rows_just_ahead() {
        let sem = AcquireOp { lock_key: "semaphore/s".into(), kind: EntryKind::Semaphore, permits: 3, ..op() };
        for (a, n) in [(op(), 1), (sem, 3)] {
            let bounds = [format!("DESC LIMIT {n}"), format!("DESC LIMIT {}, 1", n - 1), format!("DESC LIMIT {}", n + 1)];
            for schema in [Schema::new(Dialect::Postgres, "app_", None).unwrap(), Schema::new(Dialect::MySql, "app_", None).unwrap()] {
                let check = SqlOp::Check(a.clone()).render(&schema).statements;
                let reads: Vec<&str> = check.iter().map(|s| s.sql.as_str()).filter(|s| s.contains("ORDER BY")).collect();
                assert!(!reads.is_empty() && reads.iter().all(|s| bounds.iter().any(|b| s.contains(b.as_str()))), "{reads:?}");
                // Rows after a bound (`id <=`) only with the bound of the own row and the rows
                // just ahead of it, newest first.
                assert!(check.iter().all(|s| !s.sql.contains("id <= ") || s.sql.ends_with(&format!("ORDER BY id DESC LIMIT {}", n + 1))), "{check:?}");
                assert!(check.iter().all(|s| !s.sql.contains(" id >") && !s.sql.contains(" id >=")), "{check:?}");
                if schema.dialect == Dialect::MySql {
                    assert!(check.iter().all(|s| !s.sql.contains(" JOIN ")), "{check:?}");
                    assert!(check[2].sql.starts_with("SET @lockgate_own = (SELECT o.id FROM"), "{check:?}");
                    assert!(check[3].sql.starts_with("SELECT (SELECT 1 FROM") && check[3].sql.ends_with("INTO @lockgate_full"), "{check:?}");
                    assert!(check[4].sql.starts_with("UPDATE") && check[4].sql.contains("@lockgate_full IS NULL"), "{check:?}");
                    assert!(check[3].sql.contains("b.id < @lockgate_own") && check[5].sql.contains("id <= @lockgate_own"), "{check:?}");
                }
            }
        }
    }

    /// MySQL: with a bound of 1, the read takes the own row alone by its id when the count
    /// before it in the batch found nothing that blocks; a semaphore's read always walks back.
    #[test]
    fn a_free_name_is_read_by_the_own_id_alone() {
        let my = Schema::default_for(Dialect::MySql);
        let sem = AcquireOp { kind: EntryKind::Semaphore, permits: 3, ..op() };
        let reader = AcquireOp { kind: EntryKind::Read, ..op() };
        for (a, by_id) in [(op(), true), (reader, true), (sem, false)] {
            for batch in [SqlOp::Acquire(a.clone()).render(&my), SqlOp::Check(a.clone()).render(&my)] {
                let sql: Vec<&str> = batch.statements.iter().map(|s| s.sql.as_str()).collect();
                let read = sql.last().unwrap();
                assert_eq!(read.contains("(@lockgate_full IS NOT NULL OR id = @lockgate_own)"), by_id, "{read}");
                let count = sql.iter().position(|s| s.ends_with("INTO @lockgate_full")).unwrap();
                let own = sql.iter().position(|s| s.starts_with("SET @lockgate_own")).unwrap();
                assert!(count < sql.len() - 1 && own < sql.len() - 1, "{sql:?}");
            }
        }
    }

    /// MySQL's read has one row more than the bound when the own row is not among them (gone
    /// or dead): the reply keeps the bound's newest, as the rows just ahead of the own one; with
    /// the own row there it keeps them all.
    #[test]
    fn a_recheck_without_its_own_row_keeps_the_rows_just_ahead() {
        let row = |id: i64, owner: &str| {
            vec![Value::Int(id), Value::Text(owner.into()), Value::Text("mutex".into()), Value::Int(1), Value::Null, Value::Int(900)]
        };
        let ids = |reply: SqlResult| match reply.unwrap() {
            SqlReply::Entries { rows } => rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let gone = Rows { affected: 0, rows: vec![row(7, "cc"), row(4, "dd")] };
        assert_eq!(ids(SqlOp::Check(op()).parse(vec![Rows::default(), gone])), vec![7]);
        let own = Rows { affected: 0, rows: vec![row(9, "ab12"), row(7, "cc")] };
        assert_eq!(ids(SqlOp::Check(op()).parse(vec![Rows::default(), own])), vec![7, 9]);
        let sem = AcquireOp { kind: EntryKind::Semaphore, permits: 2, ..op() };
        let gone = Rows { affected: 0, rows: vec![row(8, "cc"), row(6, "dd"), row(5, "ee")] };
        assert_eq!(ids(SqlOp::Acquire(sem).parse(vec![Rows::default(), gone])), vec![6, 8]);
    }

    /// The heartbeat: its refreshes, then the watch's reads by primary key (a chunk each, after
    /// them), which lock nothing; the reply counts the refreshed rows and lists the live watched
    /// ones from the batch's end.
    #[test]
    fn a_heartbeat_refreshes_then_reads_the_watched_rows() {
        let watch: Vec<i64> = (1..=REFRESH_CHUNK as i64 + 1).collect();
        let op = SqlOp::Refresh { groups: vec![(4000, vec![4, 9])], watch };
        for schema in [Schema::default_for(Dialect::Postgres), Schema::default_for(Dialect::MySql)] {
            let batch = op.render(&schema);
            assert_eq!(batch.conn, Conn::Refresh);
            let sql: Vec<&str> = batch.statements.iter().map(|s| s.sql.as_str()).collect();
            assert_eq!(sql.len(), 3, "{sql:?}");
            assert!(sql[0].starts_with("UPDATE"), "{sql:?}");
            for read in &sql[1..] {
                assert!(read.starts_with("SELECT id, expires_ms - ") && !read.contains("FOR UPDATE") && !read.contains("lock_key"), "{read}");
            }
        }
        let live = |ids: &[(i64, i64)]| Rows { affected: 0, rows: ids.iter().map(|(id, r)| vec![Value::Int(*id), Value::Text(r.to_string())]).collect() };
        let results = vec![Rows { affected: 2, rows: vec![] }, live(&[(3, 3900)]), live(&[(513, 120)])];
        assert_eq!(op.parse(results).unwrap(), SqlReply::Refreshed { count: 2, live: vec![(3, 3900), (513, 120)] });
        let no_watch = SqlOp::Refresh { groups: vec![(4000, vec![4])], watch: vec![] };
        assert_eq!(no_watch.render(&Schema::default_for(Dialect::MySql)).statements.len(), 1);
        assert_eq!(no_watch.parse(vec![Rows { affected: 1, rows: vec![] }]).unwrap(), SqlReply::Refreshed { count: 1, live: vec![] });
        assert!(op.parse(vec![Rows::default()]).is_err());
    }

    fn placeholders(dialect: Dialect, s: &Statement) -> usize {
        match dialect {
            Dialect::Postgres => (1..=s.params.len() + 1).filter(|n| s.sql.contains(&format!("${n}"))).count(),
            Dialect::MySql => s.sql.matches('?').count(),
        }
    }

    #[test]
    fn every_statement_binds_each_parameter_once_in_both_dialects() {
        let ops = [
            SqlOp::Probe,
            SqlOp::CreateSchema,
            SqlOp::NotifySelf { payload: "check:1".into() },
            SqlOp::Acquire(op()),
            SqlOp::Check(op()),
            SqlOp::Acquire(AcquireOp { kind: EntryKind::Semaphore, permits: 3, ..op() }),
            SqlOp::Acquire(AcquireOp { kind: EntryKind::Leader, value: Some("me".into()), ..op() }),
            SqlOp::Renew { id: 7, owner: "ab12".into(), ttl_ms: 5000 },
            SqlOp::Release { lock_key: "mutex/orders".into(), owner: "ab12".into() },
            SqlOp::Observe { lock_key: "election/e".into() },
            SqlOp::DeleteOwners { owners: vec!["a".into(), "b".into()] },
            SqlOp::DeleteOwners { owners: vec![] },
            SqlOp::Refresh { groups: vec![(4000, vec![4, 9, 12])], watch: vec![3, 8, 11] },
        ];
        for dialect in [Dialect::Postgres, Dialect::MySql] {
            let schema = Schema::default_for(dialect);
            for o in &ops {
                for s in o.render(&schema).statements {
                    assert_eq!(placeholders(dialect, &s), s.params.len(), "{dialect:?} {s:?}");
                    if dialect == Dialect::MySql {
                        assert!(!s.sql.contains('$'), "{s:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn dialects_differ_where_they_must() {
        let pg = Schema::new(Dialect::Postgres, "app_", Some("locks")).unwrap();
        let my = Schema::new(Dialect::MySql, "app_", None).unwrap();
        assert_eq!(pg.table(), "\"locks\".\"app_entry\"");
        assert_eq!(my.table(), "`app_entry`");
        let a = SqlOp::Acquire(op());
        let pgs = a.render(&pg);
        let mys = a.render(&my);
        assert_eq!(pgs.conn, Conn::Main);
        let pg_sql: Vec<&str> = pgs.statements.iter().map(|s| s.sql.as_str()).collect();
        let my_sql: Vec<&str> = mys.statements.iter().map(|s| s.sql.as_str()).collect();
        assert!(pg_sql.iter().any(|s| s.contains("ON CONFLICT (lock_key, owner) DO NOTHING")), "{pg_sql:?}");
        assert!(pg_sql.iter().any(|s| s.contains("pg_advisory_xact_lock")));
        assert!(pg_sql.iter().any(|s| s.contains("clock_timestamp()")));
        assert!(my_sql.iter().any(|s| s.starts_with("INSERT IGNORE INTO `app_entry`")), "{my_sql:?}");
        assert!(my_sql.iter().any(|s| s.contains("GET_LOCK(?, 0)")));
        assert!(my_sql.iter().any(|s| s.contains("NOW(6)")));
        // PostgreSQL: the locked insert, then the one-statement re-check; no transaction.
        assert_eq!(pg_sql.len(), 2, "{pg_sql:?}");
        assert!(pg_sql[0].starts_with("WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock("), "{pg_sql:?}");
        assert!(pg_sql[1].starts_with("WITH d AS (DELETE") && pg_sql[1].contains("UNION ALL SELECT * FROM u"), "{pg_sql:?}");
        assert_eq!(SqlOp::Check(op()).render(&pg).statements, pgs.statements[1..].to_vec());
        // MySQL: the insert inside the anchor's transaction, its expiry chosen by the count
        // read there; after its COMMIT the reap and the read of the re-check (not its update).
        assert_eq!((my_sql.first(), my_sql.get(6)), (Some(&"BEGIN"), Some(&"COMMIT")), "{my_sql:?}");
        assert!(my_sql[3].starts_with("SELECT (SELECT 1 FROM") && my_sql[3].ends_with("INTO @lockgate_full"), "{my_sql:?}");
        assert!(my_sql[4].starts_with("INSERT IGNORE INTO `app_entry`") && my_sql[4].contains("@lockgate_full IS NULL"), "{my_sql:?}");
        let my_check = SqlOp::Check(op()).render(&my).statements;
        assert_eq!(my_check[0].sql, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
        assert!(my_check[1].sql.starts_with("DELETE"), "{my_check:?}");
        // The own row's id for the read is kept from the insert (or looked up, if the row was
        // there already) inside the transaction; the read is the re-check's, by that id.
        assert!(my_sql[5].starts_with("SET @lockgate_own = IF(ROW_COUNT() > 0, LAST_INSERT_ID(), (SELECT o.id FROM"), "{my_sql:?}");
        assert_eq!(mys.statements[7..9].to_vec(), vec![my_check[0].clone(), my_check[1].clone()]);
        assert_eq!(mys.statements[9], my_check[5]);
        let rel = SqlOp::Release { lock_key: "k".into(), owner: "o".into() };
        assert!(rel.render(&pg).statements[0].sql.contains("pg_notify"));
        let my_rel = rel.render(&my).statements;
        assert_eq!(my_rel.last().unwrap().params, vec![Value::Text("lockgate:o".into())]);
        assert!(my_rel[0].sql == "BEGIN" && my_rel[1].sql.ends_with("FOR UPDATE") && my_rel[4].sql == "COMMIT", "{my_rel:?}");
        assert_eq!(SqlOp::Listen.render(&pg).conn, Conn::Listen);
        assert_eq!(SqlOp::Listen.render(&pg).statements[0].sql, "LISTEN \"app_wake\"");
        assert_eq!(SqlOp::WaitDoorbell { owner: "o".into(), timeout_secs: 0 }.render(&my).conn, Conn::Wait);
        assert!(pg.ddl_script().contains("GENERATED ALWAYS AS IDENTITY") && !pg.ddl_script().contains("DROP"));
        assert!(my.ddl_script().contains("AUTO_INCREMENT") && my.ddl_script().contains("utf8mb4_bin"));
    }

    #[test]
    fn bad_identifiers_are_refused() {
        for bad in ["App_", "a-b", "1x", "x;drop", "a\"b", "a`b", &"x".repeat(MAX_PREFIX_LEN + 1)] {
            let e = Schema::new(Dialect::Postgres, bad, None).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert!(Schema::new(Dialect::Postgres, "", None).is_ok());
        assert_eq!(Schema::new(Dialect::Postgres, "p_", Some("")).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(Schema::new(Dialect::Postgres, "p_", Some("Locks")).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(Schema::new(Dialect::MySql, "p_", Some("locks")).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn replies_parse_from_the_end_of_the_batch() {
        let row = vec![
            Value::Int(5),
            Value::Text("ab12".into()),
            Value::Text("mutex".into()),
            Value::Text("1".into()),
            Value::Null,
            Value::Text("29999".into()),
        ];
        let mut results = vec![Rows::default(); 7];
        results.push(Rows { affected: 0, rows: vec![row] });
        let got = SqlOp::Acquire(op()).parse(results).unwrap();
        let SqlReply::Entries { rows } = got else { panic!("{got:?}") };
        assert_eq!((rows[0].id, rows[0].kind, rows[0].permits, rows[0].remaining_ms), (5, Some(EntryKind::Mutex), 1, 29999));
        assert!(SqlOp::Acquire(op()).parse(vec![]).is_err());
        let rel = SqlOp::Release { lock_key: "k".into(), owner: "o".into() };
        let held = Rows { affected: 0, rows: vec![vec![Value::Int(5), Value::Int(1)]] };
        assert_eq!(rel.parse(vec![held.clone()]).unwrap(), SqlReply::Released { deleted: true, was_held: true });
        let my_held = vec![Rows::default(), Rows::default(), held, Rows::default(), Rows::default(), Rows::default()];
        assert_eq!(rel.parse(my_held).unwrap(), SqlReply::Released { deleted: true, was_held: true });
        assert_eq!(rel.parse(vec![Rows::default()]).unwrap(), SqlReply::Released { deleted: false, was_held: false });
        let renew = SqlOp::Renew { id: 1, owner: "o".into(), ttl_ms: 1 };
        assert_eq!(renew.parse(vec![Rows { affected: 1, rows: vec![] }]).unwrap(), SqlReply::Renewed { renewed: true });
        let wait = SqlOp::WaitDoorbell { owner: "o".into(), timeout_secs: 1 };
        assert_eq!(wait.parse(vec![Rows { affected: 0, rows: vec![vec![Value::Int(0)]] }]).unwrap(), SqlReply::Rang { rang: false });
        assert!(is_missing_table(&SqlFailure::Server { code: "42P01".into(), message: String::new() }));
    }

    #[test]
    fn a_recheck_reply_is_put_in_id_order() {
        // MySQL's read is a union without an outer sort: the own row may come first.
        let row = |id: i64, owner: &str| {
            vec![Value::Int(id), Value::Text(owner.into()), Value::Text("semaphore".into()), Value::Int(2), Value::Null, Value::Int(900)]
        };
        let read = Rows { affected: 0, rows: vec![row(9, "ab12"), row(7, "cc"), row(4, "dd")] };
        let SqlReply::Entries { rows } = SqlOp::Check(op()).parse(vec![Rows::default(), read]).unwrap() else { panic!() };
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), vec![4, 7, 9]);
        let my = Schema::default_for(Dialect::MySql);
        assert!(!read_rows(&my, &op()).sql.contains("ORDER BY 1"), "no sort on the server");
    }
}
