//! `lockgate sql-schema URL`: prints the DDL of lockgate's table for a `postgres://` or
//! `mysql://` URL (its dialect, `schema=` and `table_prefix=`), without connecting, so a DBA can
//! create the table by hand and give the application's user no `CREATE` right. The statements
//! are the ones a client runs at its first use when the table is missing (never a `DROP`).

use lockgate_core::backend::sql::{Dialect, SqlAddress};

/// The script for `url`, or the reason it is refused (never showing a password).
pub(crate) fn script(url: &str) -> Result<String, String> {
    let address = SqlAddress::parse(url).map_err(|e| e.to_string())?;
    let schema = &address.schema;
    let mut out = format!("-- lockgate's table for {} (PROTOCOL.md §11)\n", address.shown());
    match schema.dialect {
        Dialect::Postgres => {
            if let Some(s) = &schema.pg_schema {
                out.push_str(&format!("-- the schema {s:?} must exist (lockgate creates no schema)\n"));
            }
            out.push_str(&format!(
                "-- the application's user needs SELECT, INSERT, UPDATE, DELETE on it; waiters LISTEN on channel {:?}\n",
                schema.channel()
            ));
        }
        Dialect::MySql => {
            out.push_str("-- the application's user needs SELECT, INSERT, UPDATE, DELETE on it (named locks need no grant)\n");
        }
    }
    out.push_str(&schema.ddl_script());
    Ok(out)
}

/// Prints the script for `url`; the process's exit code (a refused URL is a usage error).
pub(crate) fn run(url: &str) -> i32 {
    match script(url) {
        Ok(s) => {
            print!("{s}");
            0
        }
        Err(e) => crate::run::fail(crate::exit_code::USAGE, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_each_dialects_ddl_and_hides_the_password() {
        let pg = script("postgres://app:hunter2@db/orders?schema=locks&table_prefix=app_").unwrap();
        assert!(pg.contains("CREATE TABLE IF NOT EXISTS \"locks\".\"app_entry\""), "{pg}");
        assert!(pg.contains("CREATE INDEX IF NOT EXISTS \"app_entry_key_id\""), "{pg}");
        assert!(!pg.contains("hunter2") && !pg.to_uppercase().contains("DROP"), "{pg}");
        let my = script("mariadb://root@db/app").unwrap();
        assert!(my.contains("CREATE TABLE IF NOT EXISTS `lockgate_entry`") && my.contains("AUTO_INCREMENT"), "{my}");
        let e = script("postgres://app:hunter2@db?table_prefix=Drop-Table").unwrap_err();
        assert!(e.contains("INVALID_ARGUMENT") && !e.contains("hunter2"), "{e}");
        assert!(script("redis://h").is_err());
    }
}
