//! The address of a SQL database, checked before any connection and never shown with a
//! password:
//!
//! - `postgres://` / `postgresql://[user[:password]@]host[:port][,host[:port]...][/dbname][?params]`
//!   (libpq's URL form; hosts tried in order; port 5432): `sslmode` = `disable`, `prefer` (the
//!   default, as libpq's), `require`, `verify-ca`, `verify-full` (the last two verify the
//!   server's certificate, `verify-full` its name too), `sslrootcert` (a CA file), `schema`
//!   (where lockgate's table lives; the `search_path`'s first schema unless given; it must
//!   exist), `table_prefix`, `application_name`, `connect_timeout` (seconds).
//! - `mysql://` / `mariadb://[user[:password]@]host[:port]/dbname[?params]` (port 3306; one
//!   host): `ssl-mode` = `DISABLED`, `PREFERRED` (the default, as the mysql client's),
//!   `REQUIRED`, `VERIFY_CA`, `VERIFY_IDENTITY`, `ssl-ca` (a CA file), `table_prefix`.
//!
//! Any other parameter is refused rather than ignored. `table_prefix` and `schema` are checked
//! as plain identifiers ([`Schema::new`]).

use std::fmt;

use super::request::{Schema, DEFAULT_TABLE_PREFIX};
use super::statement::Dialect;
use crate::address::{host_port, parse_host_port, percent_decode};
use crate::error::{Error, Result};

/// PostgreSQL's port unless the URL says otherwise.
pub const POSTGRES_PORT: u16 = 5432;
/// MySQL's and MariaDB's port unless the URL says otherwise.
pub const MYSQL_PORT: u16 = 3306;
/// Most hosts a PostgreSQL URL may list.
pub const MAX_HOSTS: usize = 16;

/// How the connections are secured (libpq's `sslmode`; MySQL's `ssl-mode` maps onto it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP (`disable`, `DISABLED`).
    Disable,
    /// TLS if the server offers it, unverified (`prefer`, `PREFERRED`).
    Prefer,
    /// TLS, unverified (`require`, `REQUIRED`).
    Require,
    /// TLS with a certificate chaining to the trusted roots (`verify-ca`, `VERIFY_CA`).
    VerifyCa,
    /// TLS with a certificate chaining to the roots and naming the host (`verify-full`,
    /// `VERIFY_IDENTITY`).
    VerifyFull,
}

impl SslMode {
    fn parse(dialect: Dialect, v: &str) -> Option<SslMode> {
        Some(match (dialect, v) {
            (Dialect::Postgres, "disable") => SslMode::Disable,
            (Dialect::Postgres, "prefer") => SslMode::Prefer,
            (Dialect::Postgres, "require") => SslMode::Require,
            (Dialect::Postgres, "verify-ca") => SslMode::VerifyCa,
            (Dialect::Postgres, "verify-full") => SslMode::VerifyFull,
            (Dialect::MySql, v) => match v.to_ascii_uppercase().as_str() {
                "DISABLED" => SslMode::Disable,
                "PREFERRED" => SslMode::Prefer,
                "REQUIRED" => SslMode::Require,
                "VERIFY_CA" => SslMode::VerifyCa,
                "VERIFY_IDENTITY" => SslMode::VerifyFull,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// Whether the server's certificate is verified.
    pub fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// Where a SQL client connects. Its `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct SqlAddress {
    /// The scheme as given, lower-cased (`postgres`, `postgresql`, `mysql`, `mariadb`).
    pub scheme: String,
    /// Every host given, in URL order (lower-cased, IPv6 without brackets).
    pub hosts: Vec<(String, u16)>,
    /// The user, if given.
    pub user: Option<String>,
    /// The password, if given.
    pub password: Option<String>,
    /// The database (`dbname`; required on MySQL).
    pub database: Option<String>,
    /// TLS.
    pub ssl_mode: SslMode,
    /// A CA file to verify the server's certificate with (`sslrootcert`, `ssl-ca`).
    pub ssl_root_cert: Option<String>,
    /// PostgreSQL's `application_name`.
    pub application_name: Option<String>,
    /// PostgreSQL's `connect_timeout`, in seconds.
    pub connect_timeout_secs: Option<u64>,
    /// Where lockgate's table lives.
    pub schema: Schema,
    /// The query string as given, with nothing secret in it (for [`shown`](Self::shown)).
    query: String,
}

impl SqlAddress {
    /// Parses a whole `postgres://`, `postgresql://`, `mysql://` or `mariadb://` URL.
    pub fn parse(url: &str) -> Result<SqlAddress> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::invalid("malformed URL: it has no scheme"));
        };
        let scheme = scheme.to_ascii_lowercase();
        let dialect = match scheme.as_str() {
            "postgres" | "postgresql" => Dialect::Postgres,
            "mysql" | "mariadb" => Dialect::MySql,
            _ => return Err(Error::invalid(format!("{scheme}:// is not a SQL URL (postgres://, postgresql://, mysql://, mariadb://)"))),
        };
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, q),
            None => (rest, ""),
        };
        if before_query.contains('#') || query.contains('#') {
            return Err(Error::invalid(format!("a {scheme}:// URL takes no fragment")));
        }
        let (authority, path) = match before_query.find('/') {
            Some(i) => (&before_query[..i], &before_query[i + 1..]),
            None => (before_query, ""),
        };
        let (login, hosts) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let what = |part: &str| format!("{part} of a {scheme}:// URL");
        let (user, password) = match login {
            None => (None, None),
            Some(l) => {
                let (u, p) = match l.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (l, None),
                };
                if u.is_empty() {
                    return Err(Error::invalid(format!("a {scheme}:// login names a user before '@'")));
                }
                let password = p.map(|p| percent_decode(p, &what("the password"))).transpose()?;
                (Some(percent_decode(u, &what("the user"))?), password)
            }
        };
        let default_port = if dialect == Dialect::Postgres { POSTGRES_PORT } else { MYSQL_PORT };
        if hosts.is_empty() {
            return Err(Error::invalid(format!(
                "a {scheme}:// URL names its host ({scheme}://host:{default_port}/dbname); Unix sockets are not supported"
            )));
        }
        let mut parsed = Vec::new();
        for host in hosts.split(',') {
            let entry = parse_host_port(host, default_port).map_err(|why| {
                Error::invalid(format!("a {scheme}:// URL has {}", why.replace("member", "host").replace("members", "hosts")))
            })?;
            if parsed.contains(&entry) {
                return Err(Error::invalid(format!("a {scheme}:// URL lists {} twice", host_port(&entry.0, entry.1))));
            }
            parsed.push(entry);
        }
        if dialect == Dialect::MySql && parsed.len() > 1 {
            return Err(Error::invalid(format!("a {scheme}:// URL names one server (MySQL clients have no host list)")));
        }
        if parsed.len() > MAX_HOSTS {
            return Err(Error::invalid(format!("a {scheme}:// URL lists more than {MAX_HOSTS} hosts")));
        }
        let database = if path.is_empty() { None } else { Some(percent_decode(path, &what("the database name"))?) };
        if database.as_deref().is_some_and(|d| d.contains('/')) {
            return Err(Error::invalid(format!("a {scheme}:// URL's path is one database name")));
        }
        if dialect == Dialect::MySql && database.is_none() {
            return Err(Error::invalid(format!("a {scheme}:// URL names its database ({scheme}://host:3306/dbname): lockgate's table lives there")));
        }
        let mut ssl_mode = SslMode::Prefer;
        let mut ssl_root_cert = None;
        let mut application_name = None;
        let mut connect_timeout_secs = None;
        let mut prefix = DEFAULT_TABLE_PREFIX.to_string();
        let mut pg_schema = None;
        let mut seen: Vec<String> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = percent_decode(k, &what("a parameter name"))?;
            let v = percent_decode(v, &format!("value of {k}"))?;
            if seen.contains(&k) {
                return Err(Error::invalid(format!("a {scheme}:// URL gives {k} twice")));
            }
            seen.push(k.clone());
            match (dialect, k.as_str()) {
                (Dialect::Postgres, "sslmode") | (Dialect::MySql, "ssl-mode" | "sslmode") => {
                    ssl_mode = SslMode::parse(dialect, &v).ok_or_else(|| {
                        Error::invalid(match dialect {
                            Dialect::Postgres => format!("sslmode must be disable, prefer, require, verify-ca or verify-full, got {v:?}"),
                            Dialect::MySql => format!("ssl-mode must be DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY, got {v:?}"),
                        })
                    })?;
                }
                (Dialect::Postgres, "sslrootcert") | (Dialect::MySql, "ssl-ca") if !v.is_empty() => ssl_root_cert = Some(v),
                (_, "table_prefix") => prefix = v,
                (Dialect::Postgres, "schema") => pg_schema = Some(v),
                (Dialect::Postgres, "application_name") => application_name = Some(v),
                (Dialect::Postgres, "connect_timeout") => match v.parse::<u64>() {
                    Ok(n) if n > 0 && n <= 3600 => connect_timeout_secs = Some(n),
                    _ => return Err(Error::invalid(format!("connect_timeout must be whole seconds from 1 to 3600, got {v:?}"))),
                },
                (Dialect::MySql, "schema") => {
                    return Err(Error::invalid(format!(
                        "schema is a PostgreSQL parameter: a {scheme}:// URL's database ({scheme}://host/dbname) is the schema"
                    )))
                }
                _ => {
                    let known = match dialect {
                        Dialect::Postgres => "sslmode, sslrootcert, schema, table_prefix, application_name, connect_timeout",
                        Dialect::MySql => "ssl-mode, ssl-ca, table_prefix",
                    };
                    return Err(Error::invalid(format!("a {scheme}:// URL does not take the parameter {k:?} (it takes {known})")));
                }
            }
        }
        let schema = Schema::new(dialect, &prefix, pg_schema.as_deref())?;
        Ok(SqlAddress {
            scheme,
            hosts: parsed,
            user,
            password,
            database,
            ssl_mode,
            ssl_root_cert,
            application_name,
            connect_timeout_secs,
            schema,
            query: query.to_string(),
        })
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.schema.dialect
    }

    /// The URL with the password replaced by `***`.
    pub fn shown(&self) -> String {
        let login = match (&self.user, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (Some(u), None) => format!("{u}@"),
            _ => String::new(),
        };
        let hosts: Vec<String> = self.hosts.iter().map(|(h, p)| host_port(h, *p)).collect();
        let db = self.database.as_ref().map(|d| format!("/{d}")).unwrap_or_default();
        let query = if self.query.is_empty() { String::new() } else { format!("?{}", self.query) };
        format!("{}://{login}{}{db}{query}", self.scheme, hosts.join(","))
    }

    /// Replaces the password in `message` (server and I/O errors may echo input).
    pub fn scrub(&self, message: &str) -> String {
        match &self.password {
            Some(p) if !p.is_empty() => message.replace(p.as_str(), "***"),
            _ => message.to_string(),
        }
    }
}

impl fmt::Debug for SqlAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn postgres_urls_in_libpq_form() {
        let a = SqlAddress::parse("postgresql://app:s%40cret@DB1:5433,db2/orders?sslmode=verify-full&schema=locks&table_prefix=x_").unwrap();
        assert_eq!(a.hosts, vec![("db1".to_string(), 5433), ("db2".to_string(), 5432)]);
        assert_eq!((a.user.as_deref(), a.password.as_deref(), a.database.as_deref()), (Some("app"), Some("s@cret"), Some("orders")));
        assert_eq!(a.ssl_mode, SslMode::VerifyFull);
        assert_eq!(a.schema.table(), "\"locks\".\"x_entry\"");
        assert!(!a.shown().contains("cret") && a.shown().starts_with("postgresql://app:***@db1:5433,db2:5432/orders?"));
        assert!(!format!("{a:?}").contains("cret"));
        assert_eq!(a.scrub("no s@cret here"), "no *** here");
        let d = SqlAddress::parse("postgres://h").unwrap();
        assert_eq!((d.ssl_mode, d.schema.table_prefix.as_str(), d.database.as_deref()), (SslMode::Prefer, "lockgate_", None));
    }

    #[test]
    fn mysql_urls() {
        let a = SqlAddress::parse("mariadb://root:pw@127.0.0.1:3307/app?ssl-mode=VERIFY_CA&table_prefix=lg_").unwrap();
        assert_eq!((a.dialect(), a.hosts[0].1, a.ssl_mode), (Dialect::MySql, 3307, SslMode::VerifyCa));
        assert_eq!(a.schema.table(), "`lg_entry`");
        assert_eq!(SqlAddress::parse("mysql://h/db").unwrap().hosts[0].1, 3306);
    }

    #[test]
    fn bad_urls_are_refused_without_the_password() {
        for (bad, says) in [
            ("postgres://u:hunter2@", "names its host"),
            ("postgres://u:hunter2@h?sslmode=allow", "sslmode must be"),
            ("postgres://u:hunter2@h?table_prefix=Bad-", "table_prefix must be"),
            ("postgres://u:hunter2@h?schema=a.b", "schema must be"),
            ("postgres://u:hunter2@h?options=-c", "does not take the parameter"),
            ("postgres://u:hunter2@h:0", "invalid port"),
            ("postgres://u:hunter2@h,h", "twice"),
            ("mysql://u:hunter2@h", "names its database"),
            ("mysql://u:hunter2@a,b/db", "one server"),
            ("mysql://u:hunter2@h/db?schema=x", "PostgreSQL parameter"),
            ("mysql://u:hunter2@h/db?ssl-mode=maybe", "ssl-mode must be"),
            ("postgres://u:hunter2@h/db?sslmode=require&sslmode=disable", "twice"),
            ("postgres://u:hunt%zz@h", "malformed %-escape"),
        ] {
            let e = SqlAddress::parse(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
            assert!(e.message().contains(says), "{bad}: {e}");
            assert!(!e.message().contains("hunter2"), "{bad}: {e}");
        }
    }
}
