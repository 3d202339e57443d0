//! A real `redis-server` for tests: started on a free loopback port with nothing persisted,
//! stopped and started again on the same port when a test needs an outage, killed on drop.
//! Optionally with a password, an ACL user, or TLS only (a throw-away CA made with `openssl`).
//! `.ci/test` installs the server (`apt-get install -y redis-server`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    /// Extra `redis-server` arguments (password, users, TLS files).
    extra: Vec<String>,
    /// Whether the server speaks TLS only.
    tls: bool,
}

/// A throw-away CA and a server certificate it signed for 127.0.0.1, in a folder of their own.
pub struct TlsFiles {
    pub folder: PathBuf,
    /// The CA's certificate: what a client must trust.
    pub ca: PathBuf,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Makes a fresh CA and a server certificate for `127.0.0.1` and `localhost` with `openssl`.
    pub fn generate() -> TlsFiles {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let folder = std::env::temp_dir().join(format!(
            "toolgate-redis-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&folder).expect("a temp folder");
        let openssl = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(&folder)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs");
            assert!(status.success(), "openssl {args:?}");
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=toolgate test CA",
            "-keyout",
            "ca-key.pem",
            "-out",
            "ca.pem",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "key.pem",
            "-out",
            "server.csr",
        ]);
        std::fs::write(
            folder.join("server.ext"),
            "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("writes the extensions");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "server.ext",
            "-out",
            "cert.pem",
        ]);
        TlsFiles {
            ca: folder.join("ca.pem"),
            certificate: folder.join("cert.pem"),
            key: folder.join("key.pem"),
            folder,
        }
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers PING.
    pub fn start() -> RedisServer {
        let port = free_port();
        RedisServer::start_with(port, Vec::new(), false)
    }

    /// A server that asks for `password` (the default user's), and knows the ACL user `user`
    /// with password `user_password`.
    pub fn start_with_password(password: &str, user: &str, user_password: &str) -> RedisServer {
        let extra = ["--requirepass", password, "--user", user, "on"]
            .into_iter()
            .map(str::to_owned)
            .chain([
                format!(">{user_password}"),
                "~*".into(),
                "&*".into(),
                "+@all".into(),
            ])
            .collect();
        RedisServer::start_with(free_port(), extra, false)
    }

    /// A server that speaks TLS only, with `tls`'s certificate.
    pub fn start_tls(tls: &TlsFiles) -> RedisServer {
        let extra = vec![
            "--tls-cert-file".into(),
            tls.certificate.display().to_string(),
            "--tls-key-file".into(),
            tls.key.display().to_string(),
            "--tls-ca-cert-file".into(),
            tls.ca.display().to_string(),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        RedisServer::start_with(free_port(), extra, true)
    }

    fn start_with(port: u16, extra: Vec<String>, tls: bool) -> RedisServer {
        let mut server = RedisServer {
            port,
            child: None,
            extra,
            tls,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The URL with credentials: `redis://USER:PASSWORD@127.0.0.1:PORT` (no user: `:PASSWORD@`).
    pub fn url_with(&self, user: &str, password: &str) -> String {
        format!("redis://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// Runs one command with `redis-cli` (as the default user with `password`, if given) and
    /// returns what it printed.
    pub fn cli(&self, password: Option<&str>, args: &[&str]) -> String {
        let mut command = Command::new("redis-cli");
        command.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(password) = password {
            command.args(["-a", password, "--no-auth-warning"]);
        }
        let output = command.args(args).output().expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (an outage as the gateway sees it).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.stop();
        let (plain_port, tls_port) = match self.tls {
            true => ("0".to_owned(), self.port.to_string()),
            false => (self.port.to_string(), "0".to_owned()),
        };
        let child = Command::new("redis-server")
            .args([
                "--port",
                &plain_port,
                "--tls-port",
                &tls_port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start redis-server ({error}); install it: apt-get install -y redis-server")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers_ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    /// Whether the server answers: PING gets PONG (or, with a password, a NOAUTH error); a
    /// TLS server is up once it accepts connections.
    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls {
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).is_ok() && (&reply == b"+PONG\r\n" || &reply == b"-NOAUTH")
    }
}

/// A loopback port free when asked. Another process taking it before the server binds it
/// makes the start fail loudly, not silently share a server.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
