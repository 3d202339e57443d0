//! A real `redis-server` for the soak: started on a free loopback port with nothing persisted,
//! killed (SIGKILL, as a crash) and started again on the same port while the gateway serves.
//! Optionally with an ACL user for the gateway and a password on the default user (the soak's
//! own), so the soak can flip the user's password and demote the node to a replica and back
//! with plain commands ([`RedisServer::command`]).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::procs::{Process, free_port};

/// An ACL user the gateway logs in as, and the default user's password (the soak's).
#[derive(Clone, Debug)]
pub struct Acl {
    pub user: String,
    pub password: String,
    pub admin_password: String,
}

pub struct RedisServer {
    name: String,
    port: u16,
    dir: PathBuf,
    acl: Option<Acl>,
    process: Option<Process>,
}

impl RedisServer {
    /// Starts a server on a free port, its log in `dir/redis.log`, anyone may use it. Call
    /// from the driver's main thread (see [`Process::start`]).
    pub fn start(dir: PathBuf) -> Result<RedisServer, String> {
        RedisServer::start_named("redis", dir, None)
    }

    /// Starts a server on a free port, its log in `dir/NAME.log`; with `acl`, only its user
    /// (and the default user with the admin password) may use it.
    pub fn start_named(name: &str, dir: PathBuf, acl: Option<Acl>) -> Result<RedisServer, String> {
        let port = free_port().map_err(|error| error.to_string())?.port();
        let mut server = RedisServer {
            name: name.to_owned(),
            port,
            dir,
            acl,
            process: None,
        };
        server.restart()?;
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL the gateway uses: the ACL user's, when there is one.
    pub fn url(&self) -> String {
        match &self.acl {
            Some(acl) => format!(
                "redis://{}:{}@127.0.0.1:{}",
                acl.user, acl.password, self.port
            ),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// Kills the server outright: no shutdown, its clients' connections break.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts the server again on the same port, empty (a primary, its ACL user as at the
    /// start), and waits until it answers PING.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let mut command = Command::new("redis-server");
        command.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        if let Some(acl) = &self.acl {
            command
                .args(["--requirepass", &acl.admin_password])
                .args(["--user", &acl.user, "on"])
                .arg(format!(">{}", acl.password))
                .args(["~*", "&*", "+@all"]);
        }
        let process = Process::start(&self.name, command, &self.dir)
            .map_err(|error| format!("{error} (install it: apt-get install -y redis-server)"))?;
        self.process = Some(process);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.command(&["PING"]), Ok(reply) if reply == "+PONG") {
                return Ok(());
            }
            if let Some(process) = self.process.as_mut() {
                process.check_alive()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!(
            "redis-server on port {} did not answer PING",
            self.port
        ))
    }

    /// Sends one command as the default user (after `AUTH` with the admin password when there
    /// is an ACL) on a connection of its own, and gives back its reply's first line (`+OK`,
    /// `:3`, `-ERR …`). Blocking, bounded by a 2 s timeout per read and write.
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .map_err(|error| format!("connect: {error}"))?;
        let timeout = Some(Duration::from_secs(2));
        let _ = stream.set_read_timeout(timeout);
        let _ = stream.set_write_timeout(timeout);
        if let Some(acl) = &self.acl {
            let reply = exchange(&mut stream, &["AUTH", &acl.admin_password])?;
            if reply != "+OK" {
                return Err(format!("AUTH: {reply}"));
            }
        }
        exchange(&mut stream, args)
    }
}

/// Writes `args` as a RESP array and reads the reply's first line (without its `\r\n`).
fn exchange(stream: &mut TcpStream, args: &[&str]) -> Result<String, String> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream
        .write_all(request.as_bytes())
        .map_err(|error| format!("write: {error}"))?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(0) => return Err("closed before a reply".to_owned()),
            Ok(_) => line.push(byte[0]),
            Err(error) => return Err(format!("read: {error}")),
        }
        if line.len() > 4096 {
            return Err("a reply line of over 4 KiB".to_owned());
        }
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}
