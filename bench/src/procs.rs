//! The processes the driver starts (upstream, nginx, toolgate, oha) and what it reads about
//! them from /proc. Every child dies with the driver: it is killed when its handle is dropped
//! (normal exit, error, Ctrl-C), and the kernel sends it SIGTERM if the driver dies outright.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A started process, stopped (SIGTERM, then SIGKILL after 3 s) when dropped.
pub struct Process {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Process {
    /// Starts `command` with its output in `dir/NAME.log`.
    ///
    /// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, so the driver
    /// spawns children only from its main thread (the `block_on` future), never from a task.
    pub fn start(name: &str, mut command: Command, dir: &Path) -> std::io::Result<Process> {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|error| {
            std::io::Error::new(error.kind(), format!("cannot start {name}: {error}"))
        })?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `grace` for the process to exit on its own (so it can write
    /// what it writes on the way out); true when it did, false when it had to be killed.
    pub fn stop(&mut self, grace: Duration) -> bool {
        if let Ok(Some(_)) = self.child.try_wait() {
            return true;
        }
        // SIGTERM first so nginx's master takes its workers down with it.
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid; it is not reaped yet, so not reused.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// Kills the process at once (SIGKILL: a crash, nothing written on the way out).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Fails when the process already exited (it could not bind, bad config, …).
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); its log {} ends with:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 15)
            )),
            Err(error) => Err(format!("{}: {error}", self.name)),
        }
    }

    /// Waits until `address` accepts connections, or the process dies, or `timeout` passes.
    pub fn wait_for_port(&mut self, address: SocketAddr, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not listen on {address} within {timeout:?}; log:\n{}",
                    self.name,
                    tail(&self.log, 15)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads the first line of the log that starts with `prefix` (for a child that prints its
    /// address), waiting up to `timeout`.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if let Ok(file) = File::open(&self.log) {
                let found = BufReader::new(file)
                    .lines()
                    .map_while(Result::ok)
                    .find_map(|line| line.strip_prefix(prefix).map(str::to_owned));
                if let Some(rest) = found {
                    return Ok(rest.trim().to_owned());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("{} never printed '{prefix}'", self.name));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A loopback port free right now (bound and released; a child binds it next).
pub fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// CPU time the process has used, all threads, in nanoseconds (from each thread's schedstat,
/// which is exact where /proc/PID/stat counts 10 ms ticks).
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A `Vm*` line of /proc/PID/status, in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Raises the open-file limit to its hard maximum (children inherit it): 1,000 streams through
/// a proxy hold 2,000 sockets in it and as many in the client and the upstream.
pub fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    limit.rlim_cur
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> std::io::Result<TempDir> {
        let path = std::env::temp_dir().join(format!("{prefix}.{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// CPU time of a process and its direct children (nginx's master and workers), in ns.
pub fn family_cpu_ns(pid: u32) -> u64 {
    family_sum(pid, cpu_ns)
}

/// `read` of a process plus `read` of each of its direct children.
fn family_sum(pid: u32, read: fn(u32) -> u64) -> u64 {
    read(pid) + children(pid).into_iter().map(read).sum::<u64>()
}

/// The part of a process's CPU time spent in the kernel (`stime` of /proc/PID/stat, all its
/// threads), in ns. Counted in clock ticks (10 ms), so read it over runs of seconds.
pub fn kernel_cpu_ns(pid: u32) -> u64 {
    let Some(ticks) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat_field(&stat, STIME))
    else {
        return 0;
    };
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks * 1_000_000_000 / u64::try_from(per_second).unwrap_or(100).max(1)
}

/// Fields of /proc/PID/stat, numbered from 1 as in proc(5).
const PPID: usize = 4;
const UTIME: usize = 14;
const STIME: usize = 15;

/// Field `number` of a /proc/PID/stat line, from the 3rd on. The command name (2nd) may hold
/// spaces and parentheses, so fields are counted after its last ')'.
fn stat_field(stat: &str, number: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace()
        .nth(number.checked_sub(3)?)?
        .parse()
        .ok()
}

/// The process's CPU time as /proc/PID/stat counts it (`utime + stime`, all its threads), in
/// ns. Counted in clock ticks (10 ms), so read it over runs of seconds; [`cpu_ns`] is exact.
pub fn stat_cpu_ns(pid: u32) -> u64 {
    let Some(ticks) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat_field(&stat, UTIME)? + stat_field(&stat, STIME)?))
    else {
        return 0;
    };
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks * 1_000_000_000 / u64::try_from(per_second).unwrap_or(100).max(1)
}

/// [`kernel_cpu_ns`] of a process and its direct children.
pub fn family_kernel_cpu_ns(pid: u32) -> u64 {
    family_sum(pid, kernel_cpu_ns)
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            std::fs::read_to_string(format!("/proc/{candidate}/stat"))
                .ok()
                .and_then(|stat| stat_field(&stat, PPID))
                == Some(u64::from(pid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_the_command_name_whatever_it_holds() {
        let stat = "4242 (nginx: worker (1) ) S 4241 4241 4241 0 -1 4194624 2735 0 0 0 \
                    1187 2203 0 0 20 0 1 0 88120 17068032 1360 18446744073709551615";
        assert_eq!(stat_field(stat, PPID), Some(4241));
        assert_eq!(stat_field(stat, UTIME), Some(1187));
        assert_eq!(stat_field(stat, STIME), Some(2203));
        assert_eq!(stat_field("4242 (cut short) S 1 2", STIME), None);
    }
}
