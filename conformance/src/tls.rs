//! A throwaway certificate authority and a server certificate for 127.0.0.1, made with the
//! openssl CLI, for TLS-only test servers (`test-servers single --tls`, `zookeeper --tls`);
//! for ZooKeeper also a client certificate and the server's key store as one PEM file.

use std::path::PathBuf;
use std::process::Command;

/// The files, in their own temp dir (removed on drop).
pub struct TlsFiles {
    pub dir: PathBuf,
}

impl TlsFiles {
    /// Makes `ca.crt`/`ca.key` and a `server.crt`/`server.key` the CA signed for 127.0.0.1 and
    /// localhost.
    pub fn create() -> Result<TlsFiles, String> {
        let dir = crate::spawn::fresh_dir("tls")?;
        let files = TlsFiles { dir };
        let run = |args: &[&str]| files.openssl(args);
        run(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lockgate test CA", "-keyout", "ca.key", "-out", "ca.crt"])?;
        std::fs::write(files.dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").map_err(|e| e.to_string())?;
        run(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"])?;
        run(&["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.crt"])?;
        Ok(files)
    }

    /// Runs the openssl CLI in the files' directory.
    fn openssl(&self, args: &[&str]) -> Result<(), String> {
        let out = Command::new("openssl").args(args).current_dir(&self.dir).output().map_err(|e| format!("openssl (apt-get install openssl): {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("openssl {}: {}", args[0], String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// Adds what a ZooKeeper server and its clients need besides: `server.pem` (a server
    /// certificate for IP 127.0.0.1 only, so a client naming the server `localhost` must refuse
    /// it, with its PKCS#8 key, in one file: ZooKeeper's PEM key store) and a client certificate
    /// `client.crt`/`client.key` the CA signed.
    pub fn add_zookeeper_files(&self) -> Result<(), String> {
        std::fs::write(self.dir.join("ip-only.cnf"), "subjectAltName=IP:127.0.0.1\n").map_err(|e| e.to_string())?;
        self.openssl(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "zk-server.key", "-out", "zk-server.csr"])?;
        self.openssl(&["x509", "-req", "-in", "zk-server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ip-only.cnf", "-out", "zk-server.crt"])?;
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).map_err(|e| format!("{f}: {e}"));
        let pem = read("zk-server.key")? + &read("zk-server.crt")?;
        std::fs::write(self.dir.join("server.pem"), pem).map_err(|e| e.to_string())?;
        self.openssl(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=lockgate test client", "-keyout", "client.key", "-out", "client.csr"])?;
        self.openssl(&["x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "client.crt"])
    }

    /// A file of these, by name (`server.pem`, `client.crt`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA certificate clients trust.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// redis-server arguments serving TLS with these files (clients need no certificate).
    pub fn server_args(&self) -> Vec<String> {
        let p = |f: &str| self.dir.join(f).to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            p("server.crt"),
            "--tls-key-file".into(),
            p("server.key"),
            "--tls-ca-cert-file".into(),
            p("ca.crt"),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
