//! What the launcher's threads report to the one thread that decides how a job ends: the
//! reaper, the signal taker and the PMI servers of `weft run` ([`crate::launch`]), and in
//! multi-host jobs the head's and proxies' connections. A module of its own, below both the
//! event loop and the PMI server, so that dependencies point one way (the PMI server reports
//! events; it does not know the loop that takes them).

use crate::pmi_spawn::SpawnRequest;
use crate::sys::Status;

/// Reports to the main thread. A `rank` is the launcher's index of a rank (its world rank
/// in the first job, or a multi-host job; base + rank in a spawned job, see
/// [`crate::pmi_server::Place`]).
#[derive(Debug)]
pub enum Event {
    /// A child was reaped.
    Exited { pid: libc::pid_t, status: Status },
    /// The reaper failed.
    ReaperError(String),
    /// `cmd=init` from a rank.
    PmiInit { rank: u32 },
    /// `cmd=finalize` from a rank.
    PmiFinalize { rank: u32 },
    /// `cmd=abort exitcode=N` from a rank.
    PmiAbort { rank: u32, code: i32 },
    /// A rank's PMI socket reached end of file.
    PmiClosed { rank: u32 },
    /// The launcher received SIGINT, SIGTERM or SIGHUP.
    Signal(i32),
    /// A rank was started (a remote one: reported by its host's proxy).
    RankStarted { rank: u32, pid: libc::pid_t },
    /// A rank could not be started.
    RankStartFailed { rank: u32, why: String },
    /// The local ranks' starter put the ranks from now on in a new process group.
    GroupStarted { pgid: libc::pid_t },
    /// A starter of local ranks stopped; `unstarted` are the ranks it was to start and did
    /// not (none, or the last ones when told to stop or when one could not be started).
    StartEnded { unstarted: Vec<u32> },
    /// A rank's whole PMI spawn request was read; its PMI thread waits for the verdict on
    /// `reply` (Ok: the new job's start is under way) before answering the rank.
    Spawn {
        rank: u32,
        request: SpawnRequest,
        reply: std::sync::mpsc::Sender<Result<(), String>>,
    },
    /// A remote rank ended.
    RankExited { rank: u32, status: Status },
    /// A host's ranks all entered a PMI barrier, with their puts since the last one.
    Fence {
        host: usize,
        puts: Vec<(String, String)>,
    },
    /// A host's proxy is gone: its connection closed, failed or went silent.
    HostLost { host: usize, why: String },
    /// A message from the head (in a proxy).
    FromHead(crate::wire::ToProxy),
    /// The head is gone (in a proxy).
    HeadLost(String),
    /// A proxy connected and proved it knows the job's proxy secret (start-up only).
    ProxyConnected {
        host: usize,
        stream: std::net::TcpStream,
    },
}
