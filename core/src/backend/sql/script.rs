//! A MySQL/MariaDB batch as one multi-statement text script, so a transport sends a whole
//! batch in one round trip (one `COM_QUERY`, the server answering each statement in turn and
//! stopping at the first error) instead of one per statement.
//!
//! Each `?` placeholder is replaced by its parameter written as a literal: an integer in
//! decimal (a negative one in parentheses, so no `-` can meet another and start a `--`
//! comment), `NULL`, and text as a hex literal with a charset introducer, `_utf8mb4 X'6162'`.
//! A hex literal has no escaping rules that depend on the session (`NO_BACKSLASH_ESCAPES`,
//! `ANSI_QUOTES`, the connection's character set), so no value can break out of it; the
//! introducer makes it utf8mb4 text (not a binary string) of a coercible collation, so a
//! comparison with a `utf8mb4_bin` column uses the column's collation and its indexes, as a
//! bound parameter does. Placeholders are only looked for outside quoted literals
//! (`'..'`, `".."`), quoted identifiers (`` `..` ``) and comments (`-- `, `#`, `/* .. */`;
//! the executable `/*! .. */` and `/*M! .. */` are code to the server and scanned as code).
//!
//! The statements are joined with `;\n`. Because the reply is split back into one result per
//! statement by counting the server's results, a statement must be exactly one statement: a
//! `;` outside a literal is refused unless it only ends the statement.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::backend::sql::{Statement, Value};

/// `statements` as one MySQL/MariaDB script: each statement's `?` placeholders replaced by its
/// parameters as literals (see the module doc), the statements joined with `;\n`.
/// `INVALID_ARGUMENT` if a statement's placeholders and parameters differ in number, if a
/// statement holds more than one statement (a `;` before its end), an unterminated literal or
/// comment, or a backslash inside a quoted literal (whose meaning, and so where the literal
/// ends, depends on the session's `NO_BACKSLASH_ESCAPES`).
pub fn mysql_script(statements: &[Statement]) -> Result<String> {
    let mut out = String::new();
    for (i, statement) in statements.iter().enumerate() {
        if i > 0 {
            out.push_str(";\n");
        }
        render(statement, i, &mut out)?;
    }
    Ok(out)
}

/// Appends statement `index` with its parameters in place.
fn render(statement: &Statement, index: usize, out: &mut String) -> Result<()> {
    let fail = |why: String| Error::invalid(format!("statement {} of a MySQL script ({}): {why}", index + 1, preview(&statement.sql)));
    let sql = statement.sql.trim_end();
    // One trailing `;` (or several) only ends the statement: the joiner adds its own.
    let sql = sql.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    let bytes = sql.as_bytes();
    let mut params = statement.params.iter();
    let mut used = 0usize;
    // The start of the text not yet copied to `out` (copied in runs: every boundary is ASCII).
    let mut copied = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'\'' | b'"' | b'`') => i = skip_quoted(bytes, i, quote).map_err(fail)?,
            b'#' => i = skip_line(bytes, i),
            b'-' if bytes.get(i + 1) == Some(&b'-') && bytes.get(i + 2).is_none_or(|c| c.is_ascii_whitespace() || c.is_ascii_control()) => {
                i = skip_line(bytes, i)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let executable = bytes.get(i + 2) == Some(&b'!') || bytes[i + 2..].starts_with(b"M!");
                if executable {
                    // Code to the server: scan on inside it (its closing `*/` holds no `?`).
                    i += 2;
                } else {
                    let end = sql[i + 2..].find("*/").ok_or_else(|| fail("an unterminated /* comment".into()))?;
                    i += 2 + end + 2;
                }
            }
            b';' => return Err(fail("a `;` inside it: one statement each (the reply is split by statement)".into())),
            b'?' => {
                out.push_str(&sql[copied..i]);
                used += 1;
                let value = params.next().ok_or_else(|| fail(format!("more placeholders than its {} parameters", statement.params.len())))?;
                literal(value, out);
                i += 1;
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    if params.next().is_some() {
        return Err(fail(format!("{} parameters for {used} placeholders", statement.params.len())));
    }
    Ok(())
}

/// The index just past the quoted literal or identifier opening at `start`. A doubled quote
/// stands for one; a backslash in a `'` or `"` literal is refused (its meaning depends on the
/// session's `NO_BACKSLASH_ESCAPES`); in a backquoted identifier it is an ordinary character.
fn skip_quoted(bytes: &[u8], start: usize, quote: u8) -> std::result::Result<usize, String> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote != b'`' => return Err("a backslash inside a quoted literal (NO_BACKSLASH_ESCAPES decides its meaning)".into()),
            c if c == quote => {
                if bytes.get(i + 1) == Some(&quote) {
                    i += 2;
                    continue;
                }
                return Ok(i + 1);
            }
            _ => i += 1,
        }
    }
    Err(format!("an unterminated {} literal", quote as char))
}

/// The index of the end of the line a comment starts on (its newline stays: it separates).
fn skip_line(bytes: &[u8], start: usize) -> usize {
    bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| start + n)
}

/// Appends `value` as a MySQL literal.
fn literal(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("NULL"),
        Value::Int(n) if *n < 0 => {
            let _ = write!(out, "({n})");
        }
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Text(t) => {
            out.reserve(t.len() * 2 + 12);
            out.push_str("_utf8mb4 X'");
            for b in t.bytes() {
                let _ = write!(out, "{b:02X}");
            }
            out.push('\'');
        }
    }
}

/// The statement's first words, for messages (never its parameters).
fn preview(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().take(4).collect();
    format!("`{} ...`", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::backend::sql::Value::{Int, Null, Text};

    fn st(sql: &str, params: Vec<Value>) -> Statement {
        Statement { sql: sql.into(), params }
    }

    #[test]
    fn placeholders_become_literals_and_statements_are_joined() {
        let script = mysql_script(&[
            st("BEGIN", vec![]),
            st("INSERT INTO t (k, n, v, w) VALUES (?, ?, ?, ?)", vec![Text("ab".into()), Int(7), Null, Int(-3)]),
            st("SELECT GET_LOCK(?, ?);", vec![Text("".into()), Int(0)]),
            st("COMMIT ;  \n", vec![]),
        ])
        .unwrap();
        assert_eq!(
            script,
            "BEGIN;\nINSERT INTO t (k, n, v, w) VALUES (_utf8mb4 X'6162', 7, NULL, (-3));\nSELECT GET_LOCK(_utf8mb4 X'', 0);\nCOMMIT"
        );
        assert_eq!(mysql_script(&[]).unwrap(), "");
        assert_eq!(mysql_script(&[st("SELECT ?", vec![Int(i64::MIN)])]).unwrap(), "SELECT (-9223372036854775808)");
    }

    #[test]
    fn text_is_hex_whatever_it_holds() {
        let nasty = "it's a \"quote\" \\ back`tick ? ; -- é 鍵 🔒\0";
        let script = mysql_script(&[st("SELECT ?", vec![Text(nasty.into())])]).unwrap();
        let hex = script.strip_prefix("SELECT _utf8mb4 X'").and_then(|s| s.strip_suffix('\'')).expect("a hex literal");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase()), "{hex}");
        let decoded: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        assert_eq!(String::from_utf8(decoded).unwrap(), nasty);
    }

    #[test]
    fn question_marks_in_literals_identifiers_and_comments_are_not_placeholders() {
        let sql = "SELECT '?', 'it''s ?', \"?\", `a?b`, ? /* ? */ # ?\n, ? -- ?\n, `x``?` , ?";
        let script = mysql_script(&[st(sql, vec![Int(1), Int(2), Int(3)])]).unwrap();
        assert_eq!(script, "SELECT '?', 'it''s ?', \"?\", `a?b`, 1 /* ? */ # ?\n, 2 -- ?\n, `x``?` , 3");
        // `--` not followed by a space is no comment (it is two minus signs), and an executable
        // comment is code.
        assert_eq!(mysql_script(&[st("SELECT 1--?", vec![Int(2)])]).unwrap(), "SELECT 1--2");
        assert_eq!(mysql_script(&[st("SELECT /*!50000 ? */ 1", vec![Int(2)])]).unwrap(), "SELECT /*!50000 2 */ 1");
        assert_eq!(mysql_script(&[st("SELECT /*M!100000 ? */ 1", vec![Int(2)])]).unwrap(), "SELECT /*M!100000 2 */ 1");
        // A backslash in a backquoted identifier is an ordinary character.
        assert_eq!(mysql_script(&[st("SELECT ? AS `a\\`", vec![Int(2)])]).unwrap(), "SELECT 2 AS `a\\`");
    }

    #[test]
    fn mismatches_and_ambiguities_are_refused() {
        let refused = |statements: &[Statement], needle: &str| {
            let e = mysql_script(statements).expect_err(needle);
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.message().contains(needle), "{e}");
        };
        refused(&[st("SELECT 1", vec![]), st("SELECT ?, ?", vec![Int(1)])], "more placeholders");
        refused(&[st("SELECT ?", vec![Int(1), Int(2)])], "2 parameters for 1 placeholders");
        refused(&[st("SELECT '?'", vec![Int(1)])], "1 parameters for 0 placeholders");
        refused(&[st("SELECT 1; SELECT 2", vec![])], "one statement each");
        refused(&[st("SELECT 'a\\' , ?", vec![Int(1)])], "backslash");
        refused(&[st("SELECT 'a, ?", vec![Int(1)])], "unterminated '");
        refused(&[st("SELECT `a, ?", vec![Int(1)])], "unterminated `");
        refused(&[st("SELECT 1 /* ?", vec![Int(1)])], "unterminated /*");
        // The message names the statement, never a parameter's value.
        let e = mysql_script(&[st("SELECT ?, ?", vec![Text("secret-value".into())])]).unwrap_err();
        assert!(e.message().contains("statement 1") && !e.message().contains("secret-value"), "{e}");
    }

    /// Every batch the backend renders for MySQL turns into a script with no `?` left over.
    #[test]
    fn the_backends_batches_render() {
        use crate::backend::sql::{AcquireOp, EntryKind, Schema, SqlOp};
        use crate::backend::sql::Dialect;
        let schema = Schema::default_for(Dialect::MySql);
        let a = AcquireOp {
            lock_key: "mutex/o'k?\\é".into(),
            owner: "ab12".into(),
            kind: EntryKind::Read,
            permits: 2,
            value: Some("v".into()),
            lease_ms: 30_000,
            entry_ttl_ms: 10_000,
        };
        for op in [
            SqlOp::Acquire(a.clone()),
            SqlOp::Check(a.clone()),
            SqlOp::Release { lock_key: a.lock_key.clone(), owner: a.owner.clone() },
            SqlOp::Renew { id: 4, owner: a.owner.clone(), ttl_ms: 100 },
            SqlOp::Observe { lock_key: a.lock_key.clone() },
            SqlOp::Inspect { lock_key: a.lock_key.clone() },
            SqlOp::WaitDoorbell { owner: a.owner.clone(), timeout_secs: 3 },
            SqlOp::TakeDoorbells { owners: vec!["a".into(), "b".into()] },
            SqlOp::DeleteOwners { owners: vec!["a".into()] },
            SqlOp::CreateSchema,
        ] {
            let batch = op.render(&schema);
            let script = mysql_script(&batch.statements).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            assert_eq!(script.matches(";\n").count() + 1, batch.statements.len(), "{script}");
            assert!(!script.contains('?'), "{script}");
        }
    }
}
