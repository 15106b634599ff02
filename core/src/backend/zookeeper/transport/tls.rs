//! TLS for `zookeeper+tls://`: what the client trusts and which certificate it shows, as the
//! `zookeeper-client` crate's [`zk::TlsOptions`], and a probe that names a refused certificate.
//!
//! Trust: the CA of the URL's `ca=` file or of the client's TLS CA option (not both), else the
//! system's roots (what `rediss://` does too). Identity: the URL's `cert=` and `key=` files,
//! for servers that ask for a client certificate (ZooKeeper's `ssl.clientAuth`). The server's
//! certificate must be valid for the host the URL names (an IP address or a DNS name).
//!
//! Why the probe: the crate treats a failed handshake like an unreachable member (it tries the
//! next one, forever), so a wrong CA would surface only as "no member answered within the
//! connect timeout". The probe runs one handshake of its own beside the crate's connect with
//! the same trust and identity, and ends the connect at once with what was refused; when the
//! handshake is accepted it has nothing to say and waits to be dropped.

use std::future::Future;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use zookeeper_client as zk;

use crate::error::{Error, ErrorKind, Result};
use crate::backend::zookeeper::address::ZkTlsFiles;
use crate::backend::zookeeper::ZkFailure;

/// The TLS settings of one client: the crate's options and the same trust and identity as a
/// rustls configuration for the probe. Never shown: it holds the client's private key.
#[derive(Clone)]
pub(crate) struct Tls {
    options: zk::TlsOptions,
    probe: Arc<rustls::ClientConfig>,
}

impl Tls {
    /// Reads the PEM files `files` names (and `ca_option`, the client's TLS CA option). Bad
    /// input is `INVALID_ARGUMENT` naming the file or option, never quoting what it holds.
    pub(crate) fn new(files: &ZkTlsFiles, ca_option: Option<&[u8]>) -> Result<Tls> {
        let (roots, ca_pem) = match (&files.ca, ca_option) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "a zookeeper+tls:// URL's ca= and the client's TLS CA option were both given: give one",
                ))
            }
            (Some(path), None) => {
                let what = format!("the CA file ca={path}");
                ca_roots(&read(path, &what)?, &what)?
            }
            (None, Some(pem)) => ca_roots(pem, "the client's TLS CA option")?,
            (None, None) => system_roots()?,
        };
        let mut options = zk::TlsOptions::new()
            .with_pem_ca(&ca_pem)
            .map_err(|e| Error::invalid(format!("the TLS CA was refused: {e}")))?;
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let probe = match &files.identity {
            None => builder.with_no_client_auth(),
            Some((cert_path, key_path)) => {
                let cert_what = format!("the client certificate file cert={cert_path}");
                let key_what = format!("the client key file key={key_path}");
                let cert_pem = pem_text(read(cert_path, &cert_what)?, &cert_what)?;
                let key_pem = pem_text(read(key_path, &key_what)?, &key_what)?;
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| Error::invalid(format!("{cert_what} is not valid PEM")))?;
                if chain.is_empty() {
                    return Err(Error::invalid(format!("{cert_what} holds no PEM certificate")));
                }
                let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
                    .map_err(|_| Error::invalid(format!("{key_what} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")))?;
                options = options
                    .with_pem_identity(&cert_pem, &key_pem)
                    .map_err(|_| Error::invalid(format!("{cert_what} and {key_what} were refused")))?;
                // rustls checks that the key is usable and belongs to the certificate; its error
                // names the problem, never the key.
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::invalid(format!("{cert_what} and {key_what} do not make a client identity: {e}"))
                })?
            }
        };
        Ok(Tls { options, probe: Arc::new(probe) })
    }

    /// The crate's options (trust and identity as read by [`new`](Self::new)).
    pub(crate) fn options(&self) -> zk::TlsOptions {
        self.options.clone()
    }

    /// Handshakes with the members `hosts` in order until one answers. A refused certificate
    /// (either side's) ends with the error that says so; an accepted handshake, or no member
    /// reachable, has nothing to add: the returned future then never completes (it is raced
    /// against the crate's connect, whose outcome stands).
    pub(crate) fn probe(&self, hosts: &[(String, u16)], shown: &str) -> impl Future<Output = ZkFailure> + Send + 'static {
        let connector = tokio_rustls::TlsConnector::from(self.probe.clone());
        let (hosts, shown) = (hosts.to_vec(), shown.to_string());
        async move {
            for (host, port) in &hosts {
                let Ok(name) = ServerName::try_from(host.clone()) else { continue };
                let Ok(tcp) = TcpStream::connect((host.as_str(), *port)).await else { continue };
                let at = format!("{host}:{port}");
                match connector.connect(name, tcp).await {
                    Err(e) => match refusal(&e, &at, &shown) {
                        Some(failure) => return failure,
                        None => continue,
                    },
                    Ok(mut stream) => {
                        // TLS 1.3: a server that refuses the client's certificate (or its
                        // absence) says so in an alert after the handshake, which the first read
                        // brings. A server that accepted it sends nothing until the client's
                        // ZooKeeper handshake: the read then waits until this future is dropped.
                        let mut byte = [0u8; 1];
                        if let Err(e) = stream.read(&mut byte).await {
                            if let Some(failure) = refusal(&e, &at, &shown) {
                                return failure;
                            }
                        }
                        break;
                    }
                }
            }
            std::future::pending().await
        }
    }
}

/// The refusal an I/O error of the handshake carries (`None` for a plain network failure).
fn refusal(e: &std::io::Error, at: &str, shown: &str) -> Option<ZkFailure> {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())?;
    let error = match tls {
        rustls::Error::InvalidCertificate(why) => Error::new(
            ErrorKind::Connection,
            format!(
                "the TLS certificate of {at} ({shown}) is not trusted: {why:?}; trust the CA that signed it \
                 (the URL's ca= or the client's TLS CA option) and name the server as its certificate does"
            ),
        ),
        rustls::Error::AlertReceived(alert) => Error::new(
            ErrorKind::Authentication,
            format!(
                "{at} ({shown}) refused the TLS handshake ({alert:?}): it wants a client certificate its CA \
                 signed (the URL's cert= and key=), or has no TLS version or cipher in common with this client"
            ),
        ),
        other => Error::new(ErrorKind::Connection, format!("the TLS handshake with {at} ({shown}) failed: {other}")),
    };
    Some(ZkFailure::Other(error))
}

/// The bytes of the file at `path`; `what` names it in errors.
fn read(path: &str, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::invalid(format!("cannot read {what}: {}", e.kind())))
}

/// `bytes` as PEM text (PEM is ASCII; anything else is not PEM).
fn pem_text(bytes: Vec<u8>, what: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| Error::invalid(format!("{what} is not PEM text")))
}

/// The certificates of a PEM CA as rustls roots and as the PEM text the crate takes.
fn ca_roots(pem: &[u8], what: &str) -> Result<(rustls::RootCertStore, String)> {
    let text = pem_text(pem.to_vec(), what)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::invalid(format!("{what} is not valid PEM")))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::invalid(format!("{what} holds no usable PEM CA certificate")));
    }
    Ok((roots, text))
}

/// The system's trusted roots (as `rediss://` uses without a CA option).
fn system_roots() -> Result<(rustls::RootCertStore, String)> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let mut pem = String::new();
    for cert in found.certs {
        if roots.add(cert.clone()).is_ok() {
            pem.push_str(&to_pem(&cert));
        }
    }
    if roots.is_empty() {
        return Err(Error::invalid(
            "zookeeper+tls:// without a CA needs the system's trusted roots, and none were found: \
             give the CA (the URL's ca= or the client's TLS CA option)",
        ));
    }
    Ok((roots, pem))
}

/// One DER certificate as PEM (the crate takes its CA only as PEM).
fn to_pem(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len() * 4 / 3 + 4);
    for chunk in der.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            b64.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_encoding_round_trips() {
        for der in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0xff; 100]] {
            let pem = to_pem(der);
            let back = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            assert_eq!(back.as_ref(), der);
        }
        assert!(to_pem(b"abcd").contains("YWJjZA==\n"));
    }

    #[test]
    fn bad_files_are_named_never_quoted() {
        let dir = std::env::temp_dir().join(format!("lockgate-zktls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "secret-material-not-pem").unwrap();
        let junk = junk.to_string_lossy().into_owned();
        let missing = dir.join("missing.pem").to_string_lossy().into_owned();
        let files = |ca: Option<&str>, id: Option<(&str, &str)>| ZkTlsFiles {
            ca: ca.map(str::to_string),
            identity: id.map(|(c, k)| (c.to_string(), k.to_string())),
        };
        let cases = [
            (files(Some(&missing), None), None, "cannot read the CA file"),
            (files(Some(&junk), None), None, "holds no usable PEM CA certificate"),
            (files(None, None), Some(&b"secret-material-not-pem"[..]), "the client's TLS CA option holds no usable"),
            (files(Some(&junk), None), Some(&b"x"[..]), "both given"),
        ];
        for (f, option, says) in cases {
            let e = Tls::new(&f, option).err().expect(says);
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.message().contains(says), "{says}: {e}");
            assert!(!e.message().contains("secret-material"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
