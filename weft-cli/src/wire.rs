//! The head ↔ proxy protocol of multi-host `weft run`: one JSON object per line over TCP.
//!
//! Both sides prove they hold the per-job proxy secret (which the proxy read from its stdin)
//! without sending it, with weft's TCP challenge-response ([`weft::launcher::auth`]):
//!
//! ```text
//! proxy                                   head
//!   hello      host, nonce_p        -->
//!                                   <--   challenge  nonce_h, mac(head)
//!   proof      mac(proxy)           -->
//!                                   <--   job (what to start), or the connection closes
//! ```
//!
//! The head proves itself first, so a proxy never starts a job an impostor sent it, and the
//! head trusts nothing from a proxy before its proof. Afterwards either side sends `ping` at
//! least every third of the heartbeat timeout, and a side that hears nothing for a whole
//! timeout counts the other as lost.

use crate::sys::Status;
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft::launcher::auth::{self, Role, MAC_LEN, NONCE_LEN, SECRET_LEN};

/// The head's place in the proof (the proxies stand in as their host index).
const HEAD: u32 = u32::MAX;

/// 32 bytes (a secret, a nonce or a MAC) from their hex text.
pub fn bytes_from_hex(what: &str, text: &str) -> io::Result<[u8; SECRET_LEN]> {
    auth::secret_from_hex(text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what} is not {SECRET_LEN} bytes in hex"),
        )
    })
}

/// A fresh nonce, as hex text.
pub fn fresh_nonce() -> io::Result<String> {
    let mut n = [0u8; NONCE_LEN];
    weft::launcher::host::random_bytes(&mut n)?;
    Ok(auth::secret_to_hex(&n))
}

/// One proof exchange between a proxy (host `host`) and the head: the secret and both nonces.
pub struct Exchange {
    pub secret: [u8; SECRET_LEN],
    pub host: usize,
    pub nonce_proxy: [u8; NONCE_LEN],
    pub nonce_head: [u8; NONCE_LEN],
}

impl Exchange {
    /// The proxy's place in the proof: its host index (never the head's).
    fn proxy_id(&self) -> u32 {
        u32::try_from(self.host).unwrap_or(HEAD - 1)
    }

    fn role_mac(&self, role: Role) -> [u8; MAC_LEN] {
        auth::mac(
            &self.secret,
            role,
            self.proxy_id(),
            HEAD,
            &self.nonce_proxy,
            &self.nonce_head,
        )
    }

    /// The head's MAC, as hex text.
    pub fn head_mac(&self) -> String {
        auth::secret_to_hex(&self.role_mac(Role::Acceptor))
    }

    /// The proxy's MAC, as hex text.
    pub fn proxy_mac(&self) -> String {
        auth::secret_to_hex(&self.role_mac(Role::Connector))
    }

    /// Whether `shown` (hex) is the MAC of `role` (the head: the acceptor), in constant time.
    pub fn verify(&self, role: Role, shown: &str) -> bool {
        let Some(mac) = auth::secret_from_hex(shown) else {
            return false;
        };
        auth::verify(
            &self.secret,
            role,
            self.proxy_id(),
            HEAD,
            (&self.nonce_proxy, &self.nonce_head),
            &mac,
        )
    }
}

/// What a host's proxy starts.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub job_id: String,
    pub kvsname: String,
    pub size: u32,
    /// World ranks on this host, in increasing order.
    pub ranks: Vec<u32>,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub mapping: String,
    /// The key-value space the job starts with (never the job secret, which reaches the
    /// proxy on its stdin).
    pub kvs: Vec<(String, String)>,
    pub tag_output: bool,
    pub pmi_debug: bool,
    /// The head's working directory (the ranks start there when it exists on the host).
    pub cwd: String,
    /// Bind each rank to one of the host's CPUs (`--bind-to core`).
    pub bind_core: bool,
    pub heartbeat: Duration,
}

/// Head → proxy.
#[derive(Clone, Debug, PartialEq)]
pub enum ToProxy {
    /// The head's nonce and its proof of the secret (hex).
    Challenge {
        nonce: String,
        mac: String,
    },
    Job(Box<JobSpec>),
    /// Send this signal to every rank still running.
    Signal(i32),
    /// Every put of the job since the last barrier: the barrier is complete.
    FenceDone(Vec<(String, String)>),
    /// The job is over: exit once the ranks are gone.
    Exit,
    Ping,
}

/// Proxy → head.
#[derive(Clone, Debug, PartialEq)]
pub enum ToHead {
    /// The proxy's host index and nonce (hex).
    Hello {
        host: usize,
        nonce: String,
    },
    /// The proxy's proof of the secret (hex).
    Proof {
        mac: String,
    },
    Started {
        rank: u32,
        pid: i32,
    },
    StartFailed {
        rank: u32,
        why: String,
    },
    Init {
        rank: u32,
    },
    Finalize {
        rank: u32,
    },
    Abort {
        rank: u32,
        code: i32,
    },
    Closed {
        rank: u32,
    },
    Exited {
        rank: u32,
        status: Status,
    },
    /// This host's ranks all entered the barrier; their puts since the last one.
    Fence(Vec<(String, String)>),
    Ping,
}

fn pairs(v: &[(String, String)]) -> Value {
    Value::Array(v.iter().map(|(k, x)| json!([k, x])).collect())
}

fn bad(what: &str, v: &Value) -> io::Error {
    let mut text = v.to_string();
    text.truncate(200);
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("bad {what} message {text}"),
    )
}

fn get_pairs(v: &Value) -> Option<Vec<(String, String)>> {
    v.as_array()?
        .iter()
        .map(|p| {
            Some((
                p.get(0)?.as_str()?.to_owned(),
                p.get(1)?.as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn get_strs(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| Some(s.as_str()?.to_owned()))
        .collect()
}

fn u32_of(v: &Value, k: &str) -> Option<u32> {
    v.get(k)?.as_u64()?.try_into().ok()
}

fn i32_of(v: &Value, k: &str) -> Option<i32> {
    v.get(k)?.as_i64()?.try_into().ok()
}

fn str_of(v: &Value, k: &str) -> Option<String> {
    Some(v.get(k)?.as_str()?.to_owned())
}

impl ToProxy {
    pub fn to_value(&self) -> Value {
        match self {
            ToProxy::Job(j) => json!({
                "t": "job", "job_id": j.job_id, "kvsname": j.kvsname, "size": j.size,
                "ranks": j.ranks, "program": j.program, "args": j.args, "env": pairs(&j.env),
                "mapping": j.mapping, "kvs": pairs(&j.kvs), "tag_output": j.tag_output,
                "pmi_debug": j.pmi_debug, "cwd": j.cwd, "bind_core": j.bind_core,
                "heartbeat_ms": j.heartbeat.as_millis() as u64,
            }),
            ToProxy::Challenge { nonce, mac } => {
                json!({"t": "challenge", "nonce": nonce, "mac": mac})
            }
            ToProxy::Signal(s) => json!({"t": "signal", "sig": s}),
            ToProxy::FenceDone(p) => json!({"t": "fence_done", "puts": pairs(p)}),
            ToProxy::Exit => json!({"t": "exit"}),
            ToProxy::Ping => json!({"t": "ping"}),
        }
    }

    pub fn from_value(v: &Value) -> io::Result<ToProxy> {
        let t = v.get("t").and_then(Value::as_str).unwrap_or("");
        let m = match t {
            "job" => (|| {
                Some(ToProxy::Job(Box::new(JobSpec {
                    job_id: str_of(v, "job_id")?,
                    kvsname: str_of(v, "kvsname")?,
                    size: u32_of(v, "size")?,
                    ranks: v
                        .get("ranks")?
                        .as_array()?
                        .iter()
                        .map(|r| r.as_u64().and_then(|r| r.try_into().ok()))
                        .collect::<Option<_>>()?,
                    program: str_of(v, "program")?,
                    args: get_strs(v.get("args")?)?,
                    env: get_pairs(v.get("env")?)?,
                    mapping: str_of(v, "mapping")?,
                    kvs: get_pairs(v.get("kvs")?)?,
                    tag_output: v.get("tag_output")?.as_bool()?,
                    pmi_debug: v.get("pmi_debug")?.as_bool()?,
                    cwd: str_of(v, "cwd")?,
                    bind_core: v.get("bind_core")?.as_bool()?,
                    heartbeat: Duration::from_millis(v.get("heartbeat_ms")?.as_u64()?),
                })))
            })(),
            "challenge" => (|| {
                Some(ToProxy::Challenge {
                    nonce: str_of(v, "nonce")?,
                    mac: str_of(v, "mac")?,
                })
            })(),
            "signal" => i32_of(v, "sig").map(ToProxy::Signal),
            "fence_done" => v.get("puts").and_then(get_pairs).map(ToProxy::FenceDone),
            "exit" => Some(ToProxy::Exit),
            "ping" => Some(ToProxy::Ping),
            _ => None,
        };
        m.ok_or_else(|| bad("head", v))
    }
}

impl ToHead {
    /// The rank a message is about, if any.
    pub fn rank(&self) -> Option<u32> {
        match self {
            ToHead::Started { rank, .. }
            | ToHead::StartFailed { rank, .. }
            | ToHead::Init { rank }
            | ToHead::Finalize { rank }
            | ToHead::Abort { rank, .. }
            | ToHead::Closed { rank }
            | ToHead::Exited { rank, .. } => Some(*rank),
            ToHead::Hello { .. } | ToHead::Proof { .. } | ToHead::Fence(_) | ToHead::Ping => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            ToHead::Hello { host, nonce } => json!({"t": "hello", "host": host, "nonce": nonce}),
            ToHead::Proof { mac } => json!({"t": "proof", "mac": mac}),
            ToHead::Started { rank, pid } => json!({"t": "started", "rank": rank, "pid": pid}),
            ToHead::StartFailed { rank, why } => {
                json!({"t": "start_failed", "rank": rank, "why": why})
            }
            ToHead::Init { rank } => json!({"t": "init", "rank": rank}),
            ToHead::Finalize { rank } => json!({"t": "finalize", "rank": rank}),
            ToHead::Abort { rank, code } => json!({"t": "abort", "rank": rank, "code": code}),
            ToHead::Closed { rank } => json!({"t": "closed", "rank": rank}),
            ToHead::Exited { rank, status } => match status {
                Status::Exited(c) => json!({"t": "exited", "rank": rank, "code": c}),
                Status::Signaled(s) => json!({"t": "exited", "rank": rank, "signal": s}),
            },
            ToHead::Fence(p) => json!({"t": "fence", "puts": pairs(p)}),
            ToHead::Ping => json!({"t": "ping"}),
        }
    }

    pub fn from_value(v: &Value) -> io::Result<ToHead> {
        let t = v.get("t").and_then(Value::as_str).unwrap_or("");
        let rank = u32_of(v, "rank");
        let m = match t {
            "hello" => (|| {
                Some(ToHead::Hello {
                    host: v.get("host")?.as_u64()?.try_into().ok()?,
                    nonce: str_of(v, "nonce")?,
                })
            })(),
            "proof" => str_of(v, "mac").map(|mac| ToHead::Proof { mac }),
            "started" => (|| {
                Some(ToHead::Started {
                    rank: rank?,
                    pid: i32_of(v, "pid")?,
                })
            })(),
            "start_failed" => (|| {
                Some(ToHead::StartFailed {
                    rank: rank?,
                    why: str_of(v, "why")?,
                })
            })(),
            "init" => rank.map(|rank| ToHead::Init { rank }),
            "finalize" => rank.map(|rank| ToHead::Finalize { rank }),
            "abort" => (|| {
                Some(ToHead::Abort {
                    rank: rank?,
                    code: i32_of(v, "code")?,
                })
            })(),
            "closed" => rank.map(|rank| ToHead::Closed { rank }),
            "exited" => (|| {
                let status = match (i32_of(v, "code"), i32_of(v, "signal")) {
                    (Some(c), None) => Status::Exited(c),
                    (None, Some(s)) => Status::Signaled(s),
                    _ => return None,
                };
                Some(ToHead::Exited {
                    rank: rank?,
                    status,
                })
            })(),
            "fence" => v.get("puts").and_then(get_pairs).map(ToHead::Fence),
            "ping" => Some(ToHead::Ping),
            _ => None,
        };
        m.ok_or_else(|| bad("proxy", v))
    }
}

/// The sending half of a connection, shared by the threads that send.
#[derive(Clone, Debug)]
pub struct Sender(Arc<Mutex<TcpStream>>);

impl Sender {
    /// Wraps `stream`; a write that cannot finish within `timeout` fails.
    pub fn new(stream: TcpStream, timeout: Duration) -> io::Result<Sender> {
        stream.set_write_timeout(Some(timeout))?;
        Ok(Sender(Arc::new(Mutex::new(stream))))
    }

    /// Sends one message (one write of one line).
    pub fn send(&self, v: &Value) -> io::Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.write_all(line.as_bytes())
    }

    /// Shuts the connection down both ways (the reader sees end of file).
    pub fn shutdown(&self) {
        let s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// Longest message line (a job description or the puts of a whole job's barrier are far
/// smaller): a longer one is an error, not a buffer that grows with whatever the peer sends.
pub const MAX_LINE: usize = 64 << 20;

/// The receiving half: `recv` fails when nothing arrives within the read timeout.
pub struct Receiver(BufReader<TcpStream>);

impl Receiver {
    pub fn new(stream: TcpStream, timeout: Duration) -> io::Result<Receiver> {
        stream.set_read_timeout(Some(timeout))?;
        Ok(Receiver(BufReader::new(stream)))
    }

    /// The next message; `Ok(None)` at end of file.
    pub fn recv(&mut self) -> io::Result<Option<Value>> {
        read_message(&mut self.0, MAX_LINE)
    }
}

/// Reads one line of at most `max` bytes and parses it.
fn read_message(r: &mut impl BufRead, max: usize) -> io::Result<Option<Value>> {
    let mut line = Vec::new();
    if r.by_ref()
        .take(max as u64 + 1)
        .read_until(b'\n', &mut line)?
        == 0
    {
        return Ok(None);
    }
    if line.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message line longer than {max} bytes (the limit; no newline in the first {} bytes)", line.len()),
        ));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| {
        let text = String::from_utf8_lossy(&line[..line.len().min(200)]);
        io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {text:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_limit_is_an_error_and_is_not_read_whole() {
        let mut r = io::Cursor::new(b"{\"t\":\"ping\"}\n".to_vec());
        assert!(read_message(&mut r, 64).unwrap().is_some());
        let mut long = vec![b'x'; 10_000];
        long.push(b'\n');
        let mut r = io::Cursor::new(long);
        let e = read_message(&mut r, 100).unwrap_err();
        assert!(e.to_string().contains("longer than 100 bytes"), "{e}");
        assert_eq!(r.position(), 101, "read past the limit");
    }

    #[test]
    fn messages_round_trip() {
        let job = JobSpec {
            job_id: "1_ab".into(),
            kvsname: "weft_1_ab".into(),
            size: 4,
            ranks: vec![1, 3],
            program: "/bin/prog with space".into(),
            args: vec!["a b".into(), "\"q\"\n".into()],
            env: vec![("K".into(), "v=1".into())],
            mapping: "(vector,(0,2,1))".into(),
            kvs: vec![("weft-job-secret".into(), "00ff".into())],
            tag_output: true,
            pmi_debug: false,
            cwd: "/tmp".into(),
            bind_core: true,
            heartbeat: Duration::from_millis(1500),
        };
        for m in [
            ToProxy::Challenge {
                nonce: "ab".into(),
                mac: "cd".into(),
            },
            ToProxy::Job(Box::new(job)),
            ToProxy::Signal(15),
            ToProxy::FenceDone(vec![("a".into(), "b".into())]),
            ToProxy::Exit,
            ToProxy::Ping,
        ] {
            assert_eq!(ToProxy::from_value(&m.to_value()).unwrap(), m);
        }
        for m in [
            ToHead::Hello {
                host: 2,
                nonce: "ef".into(),
            },
            ToHead::Proof { mac: "01".into() },
            ToHead::Started { rank: 1, pid: 77 },
            ToHead::StartFailed {
                rank: 1,
                why: "no such file".into(),
            },
            ToHead::Init { rank: 0 },
            ToHead::Finalize { rank: 0 },
            ToHead::Abort { rank: 3, code: -2 },
            ToHead::Closed { rank: 3 },
            ToHead::Exited {
                rank: 3,
                status: Status::Exited(3),
            },
            ToHead::Exited {
                rank: 3,
                status: Status::Signaled(9),
            },
            ToHead::Fence(vec![]),
            ToHead::Ping,
        ] {
            assert_eq!(ToHead::from_value(&m.to_value()).unwrap(), m);
        }
        let e = ToHead::from_value(&json!({"t": "exited", "rank": 1})).unwrap_err();
        assert!(e.to_string().contains("bad proxy message"), "{e}");
        let e = ToHead::from_value(&json!({"t": "hello", "secret": "s", "host": 0})).unwrap_err();
        assert!(e.to_string().contains("bad proxy message"), "{e}");
    }

    #[test]
    fn each_side_proves_the_secret_and_nothing_else_passes() {
        let ex = |secret: u8, host: usize, np: u8, nh: u8| Exchange {
            secret: [secret; SECRET_LEN],
            host,
            nonce_proxy: [np; NONCE_LEN],
            nonce_head: [nh; NONCE_LEN],
        };
        let good = ex(1, 2, 3, 4);
        assert!(good.verify(Role::Acceptor, &good.head_mac()));
        assert!(good.verify(Role::Connector, &good.proxy_mac()));
        // The head's MAC is no proxy proof (a reflected challenge does not pass).
        assert!(!good.verify(Role::Connector, &good.head_mac()));
        for other in [
            ex(9, 2, 3, 4),
            ex(1, 5, 3, 4),
            ex(1, 2, 6, 4),
            ex(1, 2, 3, 7),
        ] {
            assert!(!good.verify(Role::Acceptor, &other.head_mac()));
            assert!(!good.verify(Role::Connector, &other.proxy_mac()));
        }
        assert!(!good.verify(Role::Connector, "not hex"));
        assert!(bytes_from_hex("the secret", "abc").is_err());
        assert_ne!(fresh_nonce().unwrap(), fresh_nonce().unwrap());
    }
}
