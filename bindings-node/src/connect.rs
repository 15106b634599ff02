//! `connect(target, options)`'s rules, all from the core (core/src/connect): the URL's scheme
//! picks the backend, every option is handed to the core's one setter under its JS name
//! ([`ClientOptions::set`] with [`Spelling::JS`]) and checked there (the transport's plan of
//! what to open is the core's too: `lockgate_core::data`). Only a transport's own options
//! (`<transport>Options`, e.g. `redisOptions`: ioredis's) and the nesting of `replicaAcks: {
//! replicas, timeoutMs }` are this binding's.

use js_sys::{Array, Reflect};
use lockgate_core::connect::{redlock_url, ClientOptions, OptionValue, Spelling};
use lockgate_core::options::MAX_DURATION;
use lockgate_core::time::Duration;
use lockgate_core::data::Data;
use lockgate_core::{Error, Result};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

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

/// A JS value as the core's [`OptionValue`] (`undefined` and `null` mean the default).
fn value(key: &str, v: &JsValue) -> Result<OptionValue> {
    Ok(if v.is_undefined() || v.is_null() {
        OptionValue::None
    } else if let Some(b) = v.as_bool() {
        OptionValue::Bool(b)
    } else if let Some(n) = v.as_f64() {
        OptionValue::Number(n)
    } else if let Some(s) = v.as_string() {
        OptionValue::Str(s)
    } else if let Some(b) = v.dyn_ref::<js_sys::Uint8Array>() {
        OptionValue::Bytes(b.to_vec())
    } else {
        return Err(Error::invalid(format!("{key} must be a number, string or boolean, got {}", crate::js::describe(v))));
    })
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
                    o.set(&k, value(&k, &v)?, spelling)?;
                }
            }
            _ => o.set(&key, value(&key, &v)?, spelling)?,
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
                let key = format!("{}.{theirs}", transport_options.as_deref().unwrap_or_default());
                o.set(ours, value(&key, &v)?, spelling)?;
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

impl Connected {
    /// The core's capabilities of this client: `{ backend, scheme, fencing, fifo, semaphore,
    /// readWrite, election, observe, reentrant, replicaAcks, readersFirst, agreedParameters,
    /// entryTtl, listLocks }` (names in JavaScript's case).
    pub fn capabilities(&self) -> Result<Data> {
        let c = self.options.capabilities()?;
        let mut out = vec![("backend".to_string(), c.backend.into()), ("scheme".to_string(), c.scheme.into())];
        for (name, on) in c.pairs() {
            let mut words = name.split('_');
            let first = words.next().unwrap_or_default().to_string();
            out.push((words.fold(first, |camel, w| camel + &w[..1].to_uppercase() + &w[1..]), on.into()));
        }
        Ok(Data::Map(out))
    }
}
