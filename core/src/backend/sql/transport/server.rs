//! The SQL transport tests' servers: PostgreSQL 15 and MariaDB 10.11 from the project's one
//! launcher (`test-servers postgres|mariadb`), which stops them when this process exits.

use std::sync::Mutex;

// The ZooKeeper transport's tests load the same file: one copy per test module is what a
// `#[path]` module gives.
#[allow(clippy::duplicate_mod)]
#[path = "../../../../tests/support/test_servers.rs"]
mod test_servers;
pub(super) use test_servers::TestServers;

use crate::backend::sql::Dialect;

/// One running server and the launcher's login for it (every right on its database).
pub(super) struct Server {
    pub(super) dialect: Dialect,
    pub(super) port: u16,
    pub(super) user: String,
    pub(super) password: String,
    pub(super) database: Option<String>,
    /// The CA that signed the server's certificate (`--tls`).
    pub(super) ca_file: Option<String>,
    _servers: Mutex<TestServers>,
}

impl Server {
    fn start(args: &[&str], dialect: Dialect) -> Server {
        let servers = TestServers::start(args);
        let text = |k: &str| servers.info[k].as_str().unwrap_or_else(|| panic!("the launcher's {k}")).to_string();
        Server {
            dialect,
            port: servers.port(0),
            user: text("user"),
            password: text("password"),
            database: Some(text("database")),
            ca_file: servers.info["ca_file"].as_str().map(str::to_string),
            _servers: Mutex::new(servers),
        }
    }

    pub(super) fn postgres() -> Server {
        Server::start(&["postgres"], Dialect::Postgres)
    }

    /// PostgreSQL with TLS on (`ssl=on`, a certificate for 127.0.0.1 signed by `ca_file`).
    pub(super) fn postgres_tls() -> Server {
        Server::start(&["postgres", "--tls"], Dialect::Postgres)
    }

    /// MariaDB with TLS on (a certificate for 127.0.0.1 signed by `ca_file`).
    pub(super) fn mariadb_tls() -> Server {
        Server::start(&["mariadb", "--tls"], Dialect::MySql)
    }

    pub(super) fn mariadb() -> Server {
        Server::start(&["mariadb"], Dialect::MySql)
    }
}
