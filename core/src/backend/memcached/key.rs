//! Where a lock lives: its item's key and the server that holds it. Both are computed here, in
//! the core, so every binding (the native transport and the Node transport alike) puts one
//! lock on the same server under the same key.
//!
//! - Key: `<key_prefix>m:<name>` when that is a valid memcached key (at most 250 bytes, no
//!   spaces or control characters), else `<key_prefix>h:<sha1 of the name, hex>`.
//! - Server: rendezvous (highest-random-weight) hashing over the URL's servers: the server whose
//!   `sha1("<host:port>\n<key>")` is largest. Adding or removing a server moves only the locks
//!   whose winner changes; nothing fails over, so a lock's item never lives on two servers.

/// memcached's longest key.
pub const MAX_KEY_LEN: usize = 250;

/// The item key of lock `name` under `prefix`.
pub fn item_key(prefix: &str, name: &str) -> String {
    let plain = format!("{prefix}m:{name}");
    if valid_key(&plain) {
        return plain;
    }
    format!("{prefix}h:{}", sha1_smol::Sha1::from(name.as_bytes()).digest())
}

/// Whether memcached's text protocol takes `key` as it is.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && key.bytes().all(|b| b > b' ' && b != 0x7f)
}

/// The index (in `servers`' order) of the server that holds `key`; `servers` is not empty.
pub fn server_for(servers: &[String], key: &str) -> usize {
    let weight = |server: &String| {
        let mut h = sha1_smol::Sha1::new();
        h.update(server.as_bytes());
        h.update(b"\n");
        h.update(key.as_bytes());
        h.digest().bytes()
    };
    let mut best = 0;
    let mut best_weight = None;
    for (i, s) in servers.iter().enumerate() {
        let w = weight(s);
        if best_weight.as_ref().is_none_or(|b| w > *b) {
            best = i;
            best_weight = Some(w);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_readable_and_the_rest_is_hashed() {
        assert_eq!(item_key("lockgate:", "orders:42"), "lockgate:m:orders:42");
        let spaced = item_key("lockgate:", "a b");
        assert!(spaced.starts_with("lockgate:h:") && valid_key(&spaced), "{spaced}");
        let long = item_key("p:", &"x".repeat(300));
        assert_eq!(long.len(), "p:h:".len() + 40);
        assert_ne!(item_key("p:", "é\n"), item_key("p:", "é\r"));
    }

    #[test]
    fn servers_are_chosen_stably_and_spread() {
        let servers: Vec<String> = (0..4).map(|i| format!("h{i}:11211")).collect();
        let mut counts = [0; 4];
        for n in 0..400 {
            let key = item_key("lockgate:", &format!("lock{n}"));
            let s = server_for(&servers, &key);
            counts[s] += 1;
            // Removing another server never moves this key.
            let other = (s + 1) % 4;
            let fewer: Vec<String> = servers.iter().enumerate().filter(|(i, _)| *i != other).map(|(_, s)| s.clone()).collect();
            assert_eq!(fewer[server_for(&fewer, &key)], servers[s]);
        }
        assert!(counts.iter().all(|c| *c > 50), "{counts:?}");
        assert_eq!(server_for(&servers[..1], "k"), 0);
    }
}
