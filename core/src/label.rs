//! Holder identity: the `label` a client stores with every entry it creates (holders and
//! waiters of every primitive), so an operator can tell who holds a lock (PROTOCOL.md §12).
//!
//! The rule is written once here: at most [`MAX_LABEL_BYTES`] bytes of UTF-8, no control
//! characters; the default is `<hostname>:<pid>`, what an operator searches logs for. The core
//! never reads the environment on wasm: the Node binding hands the host name and pid over once
//! ([`set_process_identity`]); a native build asks the OS.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The longest label, in bytes of UTF-8 (the SQL column and every backend's entry hold it).
pub const MAX_LABEL_BYTES: usize = 256;

/// Checks a label given as the client option `option` (the binding's name for it): at most
/// [`MAX_LABEL_BYTES`] bytes, no control characters. The message names the option and never
/// echoes the value (it may have been a secret given to the wrong option).
pub fn check_label(label: &str, option: &str) -> Result<()> {
    if label.len() > MAX_LABEL_BYTES {
        return Err(Error::invalid(format!(
            "{option} must be at most {MAX_LABEL_BYTES} bytes of UTF-8, got {} bytes",
            label.len()
        )));
    }
    if let Some(at) = label.chars().position(char::is_control) {
        return Err(Error::invalid(format!("{option} must not contain control characters (one at character {at})")));
    }
    Ok(())
}

/// The label of a process on `hostname` with `pid`: `<hostname>:<pid>`, with control characters
/// dropped and cut to [`MAX_LABEL_BYTES`] at a character boundary, so it always passes
/// [`check_label`].
pub fn process_label(hostname: &str, pid: u32) -> String {
    let pid = format!(":{pid}");
    let mut host: String = hostname.chars().filter(|c| !c.is_control()).collect();
    let room = MAX_LABEL_BYTES - pid.len();
    if host.len() > room {
        let mut cut = room;
        while !host.is_char_boundary(cut) {
            cut -= 1;
        }
        host.truncate(cut);
    }
    host + &pid
}

static PROCESS: OnceLock<String> = OnceLock::new();

/// Tells the core this process's host name and pid (the Node binding, whose wasm core cannot
/// ask the OS). The first call wins: the identity of a process does not change.
pub fn set_process_identity(hostname: &str, pid: u32) {
    let _ = PROCESS.set(process_label(hostname, pid));
}

/// The default label: `<hostname>:<pid>` of this process (on wasm, as the binding said; before
/// it said, `unknown:0`).
pub fn default_label() -> String {
    PROCESS.get_or_init(|| process_label(&os::hostname(), os::pid())).clone()
}

#[cfg(all(unix, not(target_arch = "wasm32")))]
mod os {
    /// The host name as `gethostname(2)` has it (`localhost` if the call fails).
    pub fn hostname() -> String {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at most that many
        // bytes and the result is read up to the first NUL (or the buffer's end).
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return "localhost".into();
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }

    pub fn pid() -> u32 {
        std::process::id()
    }
}

#[cfg(all(not(unix), not(target_arch = "wasm32")))]
mod os {
    pub fn hostname() -> String {
        std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".into())
    }

    pub fn pid() -> u32 {
        std::process::id()
    }
}

#[cfg(target_arch = "wasm32")]
mod os {
    // Reached only when the binding never called set_process_identity.
    pub fn hostname() -> String {
        "unknown".into()
    }

    pub fn pid() -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded_and_printable() {
        check_label("", "label").unwrap();
        check_label("worker-7 (orders) ü", "label").unwrap();
        check_label(&"é".repeat(128), "label").unwrap();
        let e = check_label(&"x".repeat(257), "label").unwrap_err();
        assert_eq!((e.code(), e.message()), ("INVALID_ARGUMENT", "label must be at most 256 bytes of UTF-8, got 257 bytes"));
        let e = check_label("a\nb", "label").unwrap_err();
        assert_eq!(e.message(), "label must not contain control characters (one at character 1)");
        assert!(check_label("a\u{7f}", "label").is_err());
    }

    #[test]
    fn the_process_label_is_host_and_pid_and_always_valid() {
        assert_eq!(process_label("web-1", 4242), "web-1:4242");
        assert_eq!(process_label("we\tb", 1), "web:1");
        let long = process_label(&"é".repeat(300), u32::MAX);
        assert!(long.len() <= MAX_LABEL_BYTES && long.ends_with(":4294967295"), "{long}");
        check_label(&long, "label").unwrap();
        let d = default_label();
        check_label(&d, "label").unwrap();
        assert!(d.ends_with(&format!(":{}", std::process::id())), "{d}");
    }
}
