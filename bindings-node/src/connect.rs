//! `connect(target, options)`'s rules, all from the core (core/src/connect): the URL's scheme
//! picks the backend, every option is handed to the core's one setter under its JS name
//! ([`ClientOptions::set`] with [`Spelling::JS`]) and checked there (the transport's plan of
//! what to open is the core's too: `lockgate_core::data`). Only a transport's own options
//! (`<transport>Options`, e.g. `redisOptions`: ioredis's) and the nesting of `replicaAcks: {
//! replicas, timeoutMs }` are this binding's.

use js_sys::{Array, Reflect};
use lockgate_core::connect::{redlock_url, ClientOptions, Spelling};
use lockgate_core::options::MAX_DURATION;
use lockgate_core::time::Duration;
use lockgate_core::{Error, Result};
use wasm_bindgen::prelude::*;

use crate::convert;

/// What the core made of a target and its options.
pub struct Connected {
    pub options: ClientOptions,
    /// The key of the transport's own options (`<transport>Options`), if given.
    pub transport_options: Option<String>,
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// Parses `url` (a string) — or, for a caller's own connection(s), `given`: `{ url,
/// commandTimeoutMs }` as its transport described it (`url` a list for several servers, made
/// one URL by the core's grammar) — with connect()'s `options`, by the core's rules.
pub fn connect(url: &JsValue, options: &JsValue, given: &JsValue) -> Result<Connected> {
    let spelling = &Spelling::JS;
    let url = match url.as_string() {
        Some(u) => u,
        None if given.is_object() => match get(given, "url") {
            url if url.is_string() => url.as_string().unwrap_or_default(),
            urls => redlock_url(&Array::from(&urls).iter().filter_map(|s| s.as_string()).collect::<Vec<_>>())?,
        },
        None => return Err(Error::invalid("connect() takes a URL string")),
    };
    let mut o = ClientOptions::new(url);
    let (mut transport_options, mut own) = (None, JsValue::UNDEFINED);
    let mut given_keys = Vec::new();
    for (key, v) in convert::option_entries("client option", options, None)? {
        given_keys.push(key.clone());
        match key.as_str() {
            k if k.ends_with("Options") => {
                if !v.is_object() || Array::is_array(&v) || v.is_function() {
                    return Err(Error::invalid(format!("{k} must be an object of its transport's options")));
                }
                (transport_options, own) = (Some(key.clone()), v);
            }
            "replicaAcks" if !v.is_null() => {
                let entries = convert::option_entries("replicaAcks", &v, Some(&["replicas", "timeoutMs"]))?;
                if entries.is_empty() {
                    return Err(Error::invalid("replicaAcks needs replicas (the number of replicas WAIT must reach)"));
                }
                for (k, v) in entries {
                    let k = format!("replicaAcks.{k}");
                    o.set(&k, convert::value(&v), spelling)?;
                }
            }
            _ => o.set(&key, convert::value(&v), spelling)?,
        }
    }
    if given.is_object() {
        // The caller's own connection: its command timeout bounds replica-ack WAITs, and none
        // means no limit.
        let own = get(given, "commandTimeoutMs").as_f64().filter(|ms| *ms > 0.0);
        o.response_timeout = own.map_or(MAX_DURATION, |ms| Duration::from_millis(ms.ceil() as u64));
    } else {
        // A connection this package opens takes its client library's own timeouts (in its
        // options, e.g. ioredis's) where ours are not given.
        for (ours, theirs) in [("connectTimeoutMs", "connectTimeout"), ("commandTimeoutMs", "commandTimeout")] {
            let v = get(&own, theirs);
            if !given_keys.iter().any(|k| k == ours) && !v.is_undefined() {
                o.set(ours, convert::value(&v), spelling)?;
            }
        }
    }
    o.validate_as(spelling)?;
    Ok(Connected { options: o, transport_options })
}

impl Connected {
    /// `Err` if connect() was given another transport's options than `transport`'s (the plan's).
    pub fn check_transport(&self, transport: &str) -> Result<()> {
        match &self.transport_options {
            Some(k) if *k != format!("{transport}Options") => {
                Err(Error::invalid(format!("{k} are another transport's options; not for {}", self.options.backend()?.name())))
            }
            _ => Ok(()),
        }
    }
}
