//! A real `redis-server` for the soak: started on a free loopback port with nothing persisted,
//! killed (SIGKILL, as a crash) and started again on the same port while the gateway serves.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::procs::{Process, free_port};

pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    process: Option<Process>,
}

impl RedisServer {
    /// Starts a server on a free port, its log in `dir/redis.log`. Call from the driver's main
    /// thread (see [`Process::start`]).
    pub fn start(dir: PathBuf) -> Result<RedisServer, String> {
        let port = free_port().map_err(|error| error.to_string())?.port();
        let mut server = RedisServer {
            port,
            dir,
            process: None,
        };
        server.restart()?;
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server outright: no shutdown, its clients' connections break.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts the server again on the same port, empty, and waits until it answers PING.
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
        let process = Process::start("redis", command, &self.dir)
            .map_err(|error| format!("{error} (install it: apt-get install -y redis-server)"))?;
        self.process = Some(process);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers_ping() {
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

    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
    }
}
