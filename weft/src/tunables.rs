//! Every threshold weft uses, with its default, its `WEFT_*` environment variable and a
//! description. `weft info` prints this table; the runtime reads it once at start-up.

use crate::error::{Error, ErrorClass, Result};

/// One tunable: its environment variable, default and meaning.
#[derive(Clone, Copy, Debug)]
pub struct Tunable {
    /// Environment variable that overrides the default, e.g. `WEFT_EAGER_LIMIT`.
    pub env: &'static str,
    /// The default, as text (sizes accept `k`/`m` suffixes).
    pub default: &'static str,
    /// What it controls.
    pub help: &'static str,
}

macro_rules! tunables {
    ($($field:ident: $ty:ty = $env:literal, $default:literal, $help:literal;)*) => {
        /// Every tunable, in the order `weft info` prints them.
        pub const ALL: &[Tunable] = &[$(Tunable { env: $env, default: $default, help: $help }),*];

        /// The values in force for this process.
        #[derive(Clone, Debug)]
        pub struct Tunables {
            $(#[doc = $help] pub $field: $ty,)*
        }

        impl Tunables {
            /// The defaults, ignoring the environment.
            pub fn defaults() -> Self {
                Tunables { $($field: <$ty as Parse>::parse($env, $default).expect("default parses"),)* }
            }

            /// Defaults overridden by the `WEFT_*` variables of `lookup` (the environment).
            /// A value that parses but is out of range is an error too, naming the variable
            /// and its text, so the launcher can refuse it once before any rank starts.
            pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
                let t = Tunables { $($field: match lookup($env) {
                    Some(v) => <$ty as Parse>::parse($env, &v)?,
                    None => <$ty as Parse>::parse($env, $default).expect("default parses"),
                },)* };
                match t.out_of_range() {
                    Some((env, want)) => Err(bad(env, &lookup(env).unwrap_or_default(), want)),
                    None => Ok(t),
                }
            }

            /// Defaults overridden by the process environment.
            pub fn from_env() -> Result<Self> {
                Self::from_lookup(|k| std::env::var(k).ok())
            }

            /// `(env, current value)` for every tunable, for `weft info`.
            pub fn current(&self) -> Vec<(&'static str, String)> {
                vec![$(($env, self.$field.to_string())),*]
            }
        }
    };
}

tunables! {
    pmi: PmiChoice = "WEFT_PMI", "auto",
        "PMI wire protocol to speak to the launcher: 2, 1, or auto (offer PMI-2, fall back to PMI-1 when refused)";
    eager_limit: usize = "WEFT_EAGER_LIMIT", "32k",
        "Largest message sent eagerly (streamed through the transport); larger ones use rendezvous";
    shm_ring_size: usize = "WEFT_SHM_RING_SIZE", "256k",
        "Bytes in each directed shared-memory ring (sender to receiver); a power of two";
    shm_max_packet: usize = "WEFT_SHM_MAX_PACKET", "32k",
        "Largest payload one shared-memory packet carries; bigger eager messages are fragmented";
    shm_membarrier: bool = "WEFT_SHM_MEMBARRIER", "1",
        "Wake-ups without a fence on the sender's side: a rank about to sleep runs membarrier(2) instead, when every rank of the node registered for it and the node has no more ranks than CPUs (2 ranks: barrier 0.26 -> 0.20 us; oversubscribed, ranks sleep often and each barrier interrupts the other CPUs: beside a busy process an 8-rank ring step went 19 -> 57 us); 0: a fence on both sides";
    shm_single_copy: bool = "WEFT_SHM_SINGLE_COPY", "1",
        "Use process_vm_readv (single copy) for rendezvous on one node; 0 forces the pipelined copy";
    huge_pages: bool = "WEFT_HUGE_PAGES", "1",
        "Buffers holding a whole 2 MiB page (from 2-4 MiB on) that a rank lends to the other ranks of its node for single copies (large all-to-alls, allgathers, gathers, scatters, 2-rank reductions) move onto 2 MiB pages (MADV_COLLAPSE, Linux 6.1) the second time they are lent: the kernel then pins them a huge page at a time for the others' copies (4 ranks, 4 MiB blocks, kernel copies 5.0-6.0 ms -> 2.9-3.2). Contents and addresses stay; 0 leaves the program's pages alone";
    split_copy_min: usize = "WEFT_SPLIT_COPY_MIN", "64k",
        "Rendezvous messages at least this large are copied by both sides at once (receiver pulls the first half, sender pushes the second); 0 disables";
    spin_count: Auto = "WEFT_SPIN_COUNT", "auto",
        "Idle polls a waiting rank spins before it yields (auto: 4000 with a core per local rank, 10 when the node is oversubscribed)";
    yield_count: Auto = "WEFT_YIELD_COUNT", "auto",
        "sched_yield calls a waiting rank makes before it sleeps on its futex (auto: 20, or 2000 when oversubscribed)";
    yield_slice_us: u64 = "WEFT_YIELD_SLICE_US", "3000",
        "A sched_yield that keeps the CPU away this many µs handed it to a process that runs whole time slices (a busy neighbour); WEFT_YIELD_STREAK of them among its last 8 make a waiting rank sleep on its futex instead of yielding on; 0 never stops yielding. Above the scheduler's slice (EEVDF's 0.75 ms x (1 + log2 CPUs)): shorter yields are mostly the job's own ranks copying or reducing large data";
    yield_streak: u32 = "WEFT_YIELD_STREAK", "3",
        "Long yields (WEFT_YIELD_SLICE_US) among a rank's last 8 that make it stop yielding (one alone may be a passing process), 1 to 8";
    yield_pause_ms: u64 = "WEFT_YIELD_PAUSE_MS", "100",
        "After such a run of long yields, how many ms a waiting rank sleeps without yielding before it tries one yield again";
    sleep_timeout_ms: u64 = "WEFT_SLEEP_TIMEOUT_MS", "100",
        "Longest futex sleep before a waiting rank re-checks everything (a safety net, not a poll rate)";
    bsend_overhead: usize = "WEFT_BSEND_OVERHEAD", "64",
        "Bytes of attached buffer that each buffered send uses beyond its data (MPI_BSEND_OVERHEAD)";
    coll_bcast: Algorithm = "WEFT_COLL_BCAST", "auto",
        "Broadcast algorithm: auto, binomial, chain (pipelined in WEFT_COLL_SEGMENT pieces), scatter_allgather, linear (the root sends to every member at once) or hierarchical (through one leader per node: the default on several nodes)";
    coll_reduce: Algorithm = "WEFT_COLL_REDUCE", "auto",
        "Reduce algorithm: auto (node-aware on several nodes for a commutative operation, else binomial) or binomial (the flat tree)";
    coll_allreduce: Algorithm = "WEFT_COLL_ALLREDUCE", "auto",
        "Allreduce algorithm: auto, recursive_doubling, rabenseifner, ring (the last two need a commutative operation and fall back to recursive_doubling) or hierarchical (through one leader per node: the default on several nodes for a commutative operation)";
    coll_allgather: Algorithm = "WEFT_COLL_ALLGATHER", "auto",
        "Allgather algorithm: auto, ring, recursive_doubling (a power-of-two member count, else ring), bruck, scattered (every block to every member at once) or hierarchical (through one leader per node: the default on several nodes)";
    coll_gather: Algorithm = "WEFT_COLL_GATHER", "auto",
        "Gather algorithm: auto, binomial, linear or hierarchical (through one leader per node: the default on several nodes)";
    coll_scatter: Algorithm = "WEFT_COLL_SCATTER", "auto",
        "Scatter algorithm: auto, binomial, linear or hierarchical (through one leader per node: the default on several nodes)";
    coll_alltoall: Algorithm = "WEFT_COLL_ALLTOALL", "auto",
        "All-to-all algorithm: auto, pairwise or scattered";
    coll_reduce_scatter: Algorithm = "WEFT_COLL_REDUCE_SCATTER", "auto",
        "Reduce-scatter algorithm: auto, pairwise (a commutative operation, else by_reduce), by_reduce or hierarchical (through one leader per node: the default on several nodes for a commutative operation)";
    coll_segment: usize = "WEFT_COLL_SEGMENT", "64k",
        "Piece size of pipelined collectives (the chain broadcast)";
    // The cost model's link defaults were measured on this machine (2 shared cores) on
    // 2026-11-25 by
    //   weft run -n 2 --release -p weft-cli --example coll_calibrate
    //   weft run -n 2 -x WEFT_TRANSPORTS=tcp --release -p weft-cli --example coll_calibrate
    // (medians of 9 runs). The shm ones come from an idle run (contention is the rounds' own
    // term now); the TCP ones from a loaded run (docs/collectives.md).
    coll_model_shm: LinkCost = "WEFT_COLL_MODEL_SHM", "500,170,8000,50",
        "Collectives' cost model, shared-memory messages: alpha_ns,beta_ps_per_byte for eager messages (up to WEFT_EAGER_LIMIT), then the same two for rendezvous ones (two numbers: the same for both); measure with the coll_calibrate example (docs/collectives.md)";
    coll_model_tcp: LinkCost = "WEFT_COLL_MODEL_TCP", "28500,2300,28500,1050",
        "Collectives' cost model, TCP messages (communicators on several nodes, or every message when WEFT_TRANSPORTS has no shm): as WEFT_COLL_MODEL_SHM, the eager ones up to WEFT_TCP_EAGER_LIMIT";
    coll_model_local: LocalCost = "WEFT_COLL_MODEL_LOCAL", "30,22",
        "Collectives' cost model, local work: gamma_ps_per_byte (reducing; measured on an f64 sum),copy_ps_per_byte";
    coll_model_cpus: usize = "WEFT_COLL_MODEL_CPUS", "0",
        "CPUs the collectives' cost model takes a node to have (0: the CPUs online here): when a node's members outnumber them, concurrent copies share them and every rendezvous round waits for CPUs (WEFT_COLL_MODEL_OVERSUB)";
    coll_model_oversub: usize = "WEFT_COLL_MODEL_OVERSUB", "12000",
        "Collectives' cost model: ns a rendezvous round costs, per member sharing a CPU, on a node whose members outnumber its CPUs (sender and receiver must both get a CPU before the copy)";
    coll_model_fresh: usize = "WEFT_COLL_MODEL_FRESH", "200",
        "Collectives' cost model: extra ps per byte a shared-memory member takes to read data another CPU has just written in the same collective (lines in another core's cache: a forwarded block, a partial result), against the caller's own input; 0 where the cores share their caches (measured here: 0 when the two vCPUs share a core, about 430 when they do not)";
    coll_model_shared: Auto = "WEFT_COLL_MODEL_SHARED", "auto",
        "Whether the collectives' cost model takes a node's CPUs to share cores (and caches) in pairs: 1 yes (data another CPU has just written costs nothing extra to read, and local work is spread over half the CPUs), 0 no, auto: measured at start-up by two local ranks (a cache-line round trip under 120 ns: shared; a job on one node with no more ranks than CPUs; otherwise no)";
    coll_shm: bool = "WEFT_COLL_SHM", "1",
        "Run the blocking collectives of communicators whose members share one node through a node-shared area (data written once, read in place); 0 sends messages instead";
    coll_shm_slot: Auto<usize> = "WEFT_COLL_SHM_SLOT", "auto",
        "Bytes each member may write into the node-shared area per collective (a communicator's area takes members x (68 KiB + 2 x this) of /dev/shm, made at its first collective that fits); larger collectives send messages, or go in pieces (WEFT_COLL_SHM_PIECES). auto: from 3 members what keeps the area's large buffers within 16 MiB (2m at 4 members, 1m at 8, 512k at 16, 128k at 64), 128k at 2 members (with large buffers of 1m), at least 64k";
    coll_shm_pieces: bool = "WEFT_COLL_SHM_PIECES", "1",
        "Blocking broadcasts, reductions and allgathers of communicators on one node whose members write more than a slot (WEFT_COLL_SHM_SLOT) also go through the node-shared area, a large buffer at a time (the slot; 1 MiB at 2 members under auto; at 2 members not reduces to one root, and broadcasts from 1 MiB); 0 sends messages for them";
    coll_shm_stream: Auto = "WEFT_COLL_SHM_STREAM", "auto",
        "How members write data of 16 KiB or more into the node-shared area: 1 by non-temporal stores (straight to memory; at 2 members from 256 KiB by ordinary ones while a probe finds both CPUs on one core), 0 by ordinary stores (and at 2 members broadcasts and allgathers larger than a slot by messages, single copies), auto: the members time both kinds when the area is made and take 0 when the non-temporal stores cost over 1.1 times as much in sum, else 1 (docs/collectives.md)";
    coll_alltoall_pulls: Auto<usize> = "WEFT_COLL_ALLTOALL_PULLS", "auto",
        "All-to-alls by single copies on one node whose members outnumber its CPUs (WEFT_COLL_MODEL_CPUS): while the members' send and receive buffers together (2 x members^2 x block) take at most this many bytes, every member copies the blocks meant for it itself, so that the lines it writes stay in its CPU's cache; larger ones, and every one on a node with a CPU per member, are copied by whichever member of each pair gets to it first. auto: the CPUs' second-level caches together (4 ranks on the 2 CPUs here, 64 KiB blocks: 38 us against 52); 0: never";
    coll_check: bool = "WEFT_COLL_CHECK", "0",
        "Before every collective, the members compare what they called (the collective, root, size per member, operation) and a mismatch ends the job with a message naming the members and the values, instead of wrong data or a hang (one more exchange per collective)";
    rma_messages: bool = "WEFT_RMA_MESSAGES", "0",
        "One-sided operations, locks, post and complete on other members of a window go as active messages that the target serves when it calls into the library (the path for members on other nodes), rather than straight into node-shared memory or by cross-memory copy; 1 forces it for members on this node too (set it alike on every rank)";
    rma_ops: usize = "WEFT_RMA_OPS", "256",
        "One-sided operations by message (puts and accumulates of up to 64 KiB that fetch nothing return once started, their data copied) a member keeps in flight on one window from the window's own pool; beyond it they take slots of the process's (WEFT_RMA_OPS_GLOBAL), and with both used up one waits for one of the window's first; a flush, fence, complete or free waits for them all, an unlock for its target's (at least 1)";
    rma_ops_global: usize = "WEFT_RMA_OPS_GLOBAL", "1024",
        "One-sided operations by message a member keeps in flight beyond its windows' own WEFT_RMA_OPS, over all its windows together (0: none beyond each window's own)";
    rma_targets: usize = "WEFT_RMA_TARGETS", "256",
        "Targets reached by messages a lock_all epoch keeps state for (each locked on first contact); on reaching one more it falls back to window-wide state: every member reached by messages is sent its lock then, and unlock_all releases them all (at least 1)";
    transports: Transports = "WEFT_TRANSPORTS", "shm,tcp",
        "Transports ranks may use besides self, from shm and tcp: same-node peers use shm when listed, every other pair tcp (tcp alone forces TCP between every pair)";
    connect: ConnectMode = "WEFT_CONNECT", "lazy",
        "When TCP connections are made: lazy (on first contact with a peer) or full (to every TCP peer during initialize)";
    tcp_addr: String = "WEFT_TCP_ADDR", "",
        "Address the TCP listener binds: an IPv4/IPv6 address, a subnet such as 10.1.0.0/16 (the local address inside it), or 0.0.0.0 for every interface; empty: see WEFT_TCP_IF";
    tcp_if: String = "WEFT_TCP_IF", "",
        "Network interface whose address the TCP listener binds when WEFT_TCP_ADDR is empty; empty: loopback when the job is on one node, else the first non-loopback interface that is up";
    tcp_eager_limit: usize = "WEFT_TCP_EAGER_LIMIT", "64k",
        "Largest message sent eagerly over TCP (LAM's TCPSHORTMSGLEN); larger ones wait for the receiver (rendezvous)";
    tcp_max_packet: usize = "WEFT_TCP_MAX_PACKET", "1m",
        "Largest payload of one TCP frame; longer messages are cut into frames of this size (1m: between network namespaces, pinned, 1 MiB one way in 135-148 us against 221-236 with 256k frames, 4 MiB 699-862 against 1,008-1,121, 1-4 MiB streams at 4,800-6,000 MB/s against 3,850-4,130)";
    tcp_congestion: String = "WEFT_TCP_CONGESTION", "reno",
        "TCP congestion-control algorithm of every connection (TCP_CONGESTION), or system to keep the kernel's default; a name the kernel refuses is a warning and the default stays (reno: the default here is BBR, whose pacing falls to ~1.4 GB/s after spurious retransmits on a LAN)";
    tcp_buffer: usize = "WEFT_TCP_BUFFER", "0",
        "SO_SNDBUF/SO_RCVBUF of TCP connections; 0 leaves the kernel's autotuning on (it grows buffers up to net.ipv4.tcp_wmem/tcp_rmem)";
    tcp_notsent_lowat: usize = "WEFT_TCP_NOTSENT_LOWAT", "256k",
        "Most data a TCP connection queues in the kernel beyond what is on the wire (TCP_NOTSENT_LOWAT); 0: the system's (net.ipv4.tcp_notsent_lowat). Bounded, the sender's own CPU transmits nearly all of a stream, rather than the CPU that takes the peer's acknowledgements (between network namespaces, pinned, 1-4 MiB streams at 2.5-6.8 GB/s in every run, against 0.8-1.5 GB/s in half the runs with the queue unbounded)";
    tcp_timeout_s: u64 = "WEFT_TCP_TIMEOUT", "20",
        "Seconds before an unreachable TCP peer (unacknowledged data or failed keepalives, or a connection not made) fails the job";
    tcp_handshake_timeout_ms: u64 = "WEFT_TCP_HANDSHAKE_TIMEOUT_MS", "2000",
        "Milliseconds a connection to a rank's TCP listener has to prove it belongs to the job before it is dropped and logged (a real peer that was too slow dials again)";
    spawn_timeout_s: u64 = "WEFT_SPAWN_TIMEOUT", "300",
        "Seconds the processes of a spawn have to reach MPI_Init and join their parents before the spawn fails with MPI_ERR_SPAWN (a program that never initializes MPI would otherwise keep its parents waiting forever)";
}

impl Tunables {
    /// The first value outside what weft can work with, and what it must be. (The defaults are
    /// all in range.)
    fn out_of_range(&self) -> Option<(&'static str, &'static str)> {
        let r = self.shm_ring_size;
        if !r.is_power_of_two() || !(4096..=1 << 30).contains(&r) {
            return Some((
                "WEFT_SHM_RING_SIZE",
                "a power of two from 4096 to 1g (bytes of one ring)",
            ));
        }
        // Every packet must carry some payload, or a message could never be cut into them.
        if self.shm_max_packet < 64 {
            return Some(("WEFT_SHM_MAX_PACKET", "a size of at least 64 bytes"));
        }
        if self.coll_shm_slot.0.is_some_and(|s| s > 1 << 30) {
            return Some(("WEFT_COLL_SHM_SLOT", "a size of at most 1g"));
        }
        if self.coll_segment == 0 {
            return Some(("WEFT_COLL_SEGMENT", "a size of at least 1 byte"));
        }
        if !(1024..=16 << 20).contains(&self.tcp_max_packet) {
            return Some(("WEFT_TCP_MAX_PACKET", "a size from 1k to 16m"));
        }
        None
    }
}

/// Which transports may carry traffic between two different ranks (self is always used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transports {
    /// Shared memory between ranks of one node.
    pub shm: bool,
    /// TCP between any two ranks.
    pub tcp: bool,
}

impl Transports {
    /// Every transport Weft has: `self` (always used), then those `WEFT_TRANSPORTS` picks from.
    pub const ALL: [&'static str; 3] = ["self", "shm", "tcp"];

    /// Whether the transport named `name` (one of [`Transports::ALL`]) may be used.
    pub fn allows(&self, name: &str) -> bool {
        match name {
            "shm" => self.shm,
            "tcp" => self.tcp,
            _ => name == "self",
        }
    }
}

impl std::fmt::Display for Transports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = [(self.shm, "shm"), (self.tcp, "tcp")]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
        f.write_str(&names.join(","))
    }
}

impl Parse for Transports {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        let mut t = Transports {
            shm: false,
            tcp: false,
        };
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_ascii_lowercase().as_str() {
                "shm" => t.shm = true,
                "tcp" => t.tcp = true,
                "self" => {}
                _ => return Err(bad(env, text, "a list of transports from shm, tcp")),
            }
        }
        if !t.shm && !t.tcp {
            return Err(bad(env, text, "a list naming at least one of shm, tcp"));
        }
        Ok(t)
    }
}

/// When TCP connections are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectMode {
    /// On first contact with a peer.
    Lazy,
    /// With every TCP peer during initialize.
    Full,
}

impl std::fmt::Display for ConnectMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnectMode::Lazy => "lazy",
            ConnectMode::Full => "full",
        })
    }
}

impl Parse for ConnectMode {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "lazy" => Ok(ConnectMode::Lazy),
            "full" => Ok(ConnectMode::Full),
            _ => Err(bad(env, text, "lazy or full")),
        }
    }
}

/// The `WEFT_PMI` setting: which PMI wire protocol `boot` speaks to the launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmiChoice {
    /// PMI-2 when the server accepts it, else PMI-1.
    Auto,
    /// PMI-1 only.
    V1,
    /// PMI-2 only.
    V2,
}

impl std::fmt::Display for PmiChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PmiChoice::Auto => "auto",
            PmiChoice::V1 => "1",
            PmiChoice::V2 => "2",
        })
    }
}

impl Parse for PmiChoice {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(PmiChoice::Auto),
            "1" | "pmi1" | "pmi-1" => Ok(PmiChoice::V1),
            "2" | "pmi2" | "pmi-2" => Ok(PmiChoice::V2),
            _ => Err(bad(env, text, "1, 2 or auto")),
        }
    }
}

impl PmiChoice {
    /// `WEFT_PMI` from the environment (`auto` when unset).
    pub fn from_env() -> Result<PmiChoice> {
        match std::env::var("WEFT_PMI") {
            Ok(v) => PmiChoice::parse("WEFT_PMI", &v),
            Err(_) => Ok(PmiChoice::Auto),
        }
    }
}

impl Parse for String {
    fn parse(_env: &'static str, text: &str) -> Result<Self> {
        Ok(text.trim().to_string())
    }
}

/// The algorithms each `WEFT_COLL_*` tunable may name (besides `auto`).
pub const COLL_ALGORITHMS: &[(&str, &[&str])] = &[
    (
        "WEFT_COLL_BCAST",
        &[
            "binomial",
            "chain",
            "scatter_allgather",
            "linear",
            "hierarchical",
        ],
    ),
    ("WEFT_COLL_REDUCE", &["binomial"]),
    (
        "WEFT_COLL_ALLREDUCE",
        &["recursive_doubling", "rabenseifner", "ring", "hierarchical"],
    ),
    (
        "WEFT_COLL_ALLGATHER",
        &[
            "ring",
            "recursive_doubling",
            "bruck",
            "scattered",
            "hierarchical",
        ],
    ),
    ("WEFT_COLL_GATHER", &["binomial", "linear", "hierarchical"]),
    ("WEFT_COLL_SCATTER", &["binomial", "linear", "hierarchical"]),
    (
        "WEFT_COLL_ALLTOALL",
        &["pairwise", "scattered", "hierarchical"],
    ),
    (
        "WEFT_COLL_REDUCE_SCATTER",
        &["pairwise", "by_reduce", "hierarchical"],
    ),
];

/// A collective algorithm forced by name, or `auto` (`None`): the cost model chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Algorithm(pub Option<&'static str>);

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.unwrap_or("auto"))
    }
}

impl Parse for Algorithm {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("auto") || text.is_empty() {
            return Ok(Algorithm(None));
        }
        let names = COLL_ALGORITHMS
            .iter()
            .find(|(e, _)| *e == env)
            .map_or(&[][..], |(_, n)| *n);
        match names.iter().find(|n| n.eq_ignore_ascii_case(text)) {
            Some(n) => Ok(Algorithm(Some(n))),
            None => Err(bad(
                env,
                text,
                &format!("auto or one of {}", names.join(", ")),
            )),
        }
    }
}

/// The cost of one message on a path of the collectives' cost model (`coll::model`):
/// `alpha + beta × bytes`, with one pair for messages sent eagerly (up to the path's eager
/// limit) and one for rendezvous messages (larger), since the protocols copy differently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCost {
    /// Eager messages: per-message latency, ns.
    pub alpha_ns: f64,
    /// Eager messages: per-byte transfer time, ps (1000 ps/byte is 1 GB/s).
    pub beta_ps_per_byte: f64,
    /// Rendezvous messages: per-message latency, ns.
    pub rdv_alpha_ns: f64,
    /// Rendezvous messages: per-byte transfer time, ps.
    pub rdv_beta_ps_per_byte: f64,
}

/// Local per-byte work in the collectives' cost model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalCost {
    /// Reducing one byte into another (the model's gamma), ps.
    pub gamma_ps_per_byte: f64,
    /// Copying one byte, ps.
    pub copy_ps_per_byte: f64,
}

/// `count` comma-separated non-negative finite numbers, for each count in `counts`.
fn numbers(env: &'static str, text: &str, counts: &[usize], want: &str) -> Result<Vec<f64>> {
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    let v: Option<Vec<f64>> = text.split(',').map(num).collect();
    match v {
        Some(v) if counts.contains(&v.len()) => Ok(v),
        _ => Err(bad(env, text, want)),
    }
}

impl std::fmt::Display for LinkCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{},{},{},{}",
            self.alpha_ns, self.beta_ps_per_byte, self.rdv_alpha_ns, self.rdv_beta_ps_per_byte
        )
    }
}

impl Parse for LinkCost {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        let want = "alpha_ns,beta_ps_per_byte[,rendezvous_alpha_ns,rendezvous_beta_ps_per_byte] \
                    (two or four non-negative numbers, e.g. 2500,1500,9000,170)";
        let v = numbers(env, text, &[2, 4], want)?;
        let (ra, rb) = if v.len() == 4 {
            (v[2], v[3])
        } else {
            (v[0], v[1])
        };
        Ok(LinkCost {
            alpha_ns: v[0],
            beta_ps_per_byte: v[1],
            rdv_alpha_ns: ra,
            rdv_beta_ps_per_byte: rb,
        })
    }
}

impl std::fmt::Display for LocalCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.gamma_ps_per_byte, self.copy_ps_per_byte)
    }
}

impl Parse for LocalCost {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        let want = "gamma_ps_per_byte,copy_ps_per_byte (two non-negative numbers, e.g. 60,25)";
        let v = numbers(env, text, &[2], want)?;
        Ok(LocalCost {
            gamma_ps_per_byte: v[0],
            copy_ps_per_byte: v[1],
        })
    }
}

/// A count (or a size) that can be left to weft (`auto`) or set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Auto<T = u32>(pub Option<T>);

impl<T: Copy> Auto<T> {
    /// The set value, or `auto` resolved to `default`.
    pub fn or(self, default: T) -> T {
        self.0.unwrap_or(default)
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Auto<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("auto"),
        }
    }
}

impl Parse for Auto<u32> {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        Auto::parse_with(env, text, "a whole number or auto", |t| t.parse().ok())
    }
}

impl Parse for Auto<usize> {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        Auto::parse_with(env, text, "a size (e.g. 4096, 64k, 4m) or auto", |t| {
            parse_size(t).and_then(|v| usize::try_from(v).ok())
        })
    }
}

impl<T> Auto<T> {
    /// `auto`, or what `value` makes of the text (`want` says what it takes in the error).
    fn parse_with(
        env: &'static str,
        text: &str,
        want: &str,
        value: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Self> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Auto(None));
        }
        value(text.trim())
            .map(|v| Auto(Some(v)))
            .ok_or_else(|| bad(env, text, want))
    }
}

impl Tunables {
    /// Bytes each member of a communicator of `members` may write into its node-shared area
    /// per collective: `WEFT_COLL_SHM_SLOT`, or [`auto_coll_slot`]. Every member of a
    /// communicator must decide alike whether a collective goes through the area, so this
    /// depends on the communicator's size only (not on how many of its members share a node).
    #[inline]
    pub fn coll_slot(&self, members: u32) -> usize {
        match self.coll_shm_slot.0 {
            Some(s) => s,
            None => auto_coll_slot(members as usize),
        }
    }

    /// Bytes of each of a member's two large buffers in the node-shared area of a
    /// communicator of `members`: the most a member writes in one collective of the area,
    /// and so the size of the pieces a larger call goes in. The slot ([`Tunables::coll_slot`]),
    /// but [`PAIR_PIECE`] at 2 members under `auto`.
    pub fn coll_piece(&self, members: u32) -> usize {
        match self.coll_shm_slot.0 {
            Some(s) => s,
            None if members == 2 => auto_coll_slot(2).max(PAIR_PIECE),
            None => auto_coll_slot(members as usize),
        }
    }
}

/// Bytes of each large buffer of a member in the node-shared area of a 2-member communicator
/// under `WEFT_COLL_SHM_SLOT=auto` (its slot stays 128 KiB): allreduces and allgathers above
/// the slot, and broadcasts of this much or more, go through the area a piece of up to this at
/// a time. At 2 ranks a 1 MiB allreduce took 81 µs so against 119 by messages with the vCPUs
/// on one core and 91 against 183 on two, an allgather 78 against 106 and 88 against 136
/// (`docs/performance.md`, 2026-11-26, second session).
pub const PAIR_PIECE: usize = 1 << 20;

/// `WEFT_COLL_SHM_SLOT=auto`. At 3 members or more, what keeps a communicator's large
/// buffers (two per member) within 16 MiB: 2 MiB at 4 members, 1 MiB at 8, 512 KiB at 16, 128
/// KiB at 64. Through the area a 1 MiB broadcast at 8 ranks on 2 CPUs took 141 µs against 405
/// by messages, an allreduce 698 against 952, at 4 ranks with the CPUs apart 99 against 312
/// and 428 against 971 (gathers and reduces 5-12% slower; `docs/performance.md`,
/// 2026-11-26). At 2 members, where messages were faster from 1 MiB (a broadcast 44 µs against
/// 52 through a 4 MiB slot, a gather 66 against 98), room for a 64 KiB block per member: the
/// all-to-all of 64 KiB blocks goes through the area. Never less than 64 KiB.
pub fn auto_coll_slot(members: usize) -> usize {
    const BLOCK: usize = 64 << 10;
    const LARGE_BUFFERS: usize = 16 << 20;
    let n = members.max(1);
    let slot = if n <= 2 {
        n * BLOCK
    } else {
        LARGE_BUFFERS / (2 * n) / 4096 * 4096
    };
    slot.max(BLOCK)
}

/// Parsing of a tunable's text.
pub trait Parse: Sized + std::fmt::Display {
    /// Parses `text` given for `env`.
    fn parse(env: &'static str, text: &str) -> Result<Self>;
}

fn bad(env: &'static str, text: &str, want: &str) -> Error {
    Error::new(
        ErrorClass::Arg,
        "tunables",
        format!("{env}={text:?} is not {want}"),
    )
}

/// Parses `123`, `16k`, `4m`, `1g` (binary multiples).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()?.to_ascii_lowercase() {
        'k' => (&t[..t.len() - 1], 1u64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

impl Parse for usize {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        parse_size(text)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| bad(env, text, "a size (e.g. 4096, 64k, 4m)"))
    }
}

impl Parse for u32 {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        text.trim()
            .parse()
            .map_err(|_| bad(env, text, "a whole number"))
    }
}

impl Parse for u64 {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        text.trim()
            .parse()
            .map_err(|_| bad(env, text, "a whole number"))
    }
}

impl Parse for bool {
    fn parse(env: &'static str, text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err(bad(
                env,
                text,
                "a boolean (1/0, true/false, yes/no, on/off)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn the_collectives_slot_follows_the_members_within_its_bounds_unless_set() {
        let d = Tunables::defaults();
        let auto: Vec<usize> = [1, 2, 4, 8, 16, 32, 64, 128, 4096]
            .map(|n| d.coll_slot(n) >> 10)
            .to_vec();
        assert_eq!(auto, [64, 128, 2048, 1024, 512, 256, 128, 64, 64]);
        assert_eq!(d.coll_slot(3), 2728 << 10);
        let set = |text: &str| {
            Tunables::from_lookup(|k| (k == "WEFT_COLL_SHM_SLOT").then(|| text.into()))
        };
        assert_eq!(set("16m").unwrap().coll_slot(8), 16 << 20);
        // The large buffers: the slot's size, but 1 MiB at 2 members under auto.
        assert_eq!((d.coll_piece(2), d.coll_piece(3)), (1 << 20, 2728 << 10));
        assert_eq!(set("64k").unwrap().coll_piece(2), 64 << 10);
        assert_eq!(set("AUTO").unwrap().coll_slot(8), 1 << 20);
        let e = set("2g").unwrap_err().to_string();
        assert!(e.contains("WEFT_COLL_SHM_SLOT") && e.contains("1g"), "{e}");
        assert!(set("many").unwrap_err().to_string().contains("or auto"));
    }

    #[test]
    fn values_out_of_range_are_errors_naming_the_tunable() {
        for (env, text) in [
            ("WEFT_SHM_MAX_PACKET", "0"),
            ("WEFT_SHM_RING_SIZE", "1000"),
            ("WEFT_SHM_RING_SIZE", "0"),
            ("WEFT_TCP_MAX_PACKET", "0"),
        ] {
            let e = Tunables::from_lookup(|k| (k == env).then(|| text.into()));
            let msg = e.expect_err(&format!("{env}={text}")).to_string();
            assert!(msg.contains(&format!("{env}={text:?}")), "{msg}");
        }
    }

    #[test]
    fn defaults_parse_and_env_overrides() {
        let d = Tunables::defaults();
        assert_eq!(d.eager_limit, 32 << 10);
        let t = Tunables::from_lookup(|k| (k == "WEFT_EAGER_LIMIT").then(|| "1m".into())).unwrap();
        assert_eq!(t.eager_limit, 1 << 20);
        assert_eq!(d.spin_count, Auto(None));
        let t = Tunables::from_lookup(|k| (k == "WEFT_SPIN_COUNT").then(|| "7".into())).unwrap();
        assert_eq!(t.spin_count.or(1), 7);
        assert_eq!(
            d.transports,
            Transports {
                shm: true,
                tcp: true
            }
        );
        let t = Tunables::from_lookup(|k| (k == "WEFT_TRANSPORTS").then(|| "tcp".into())).unwrap();
        assert!(t.transports.tcp && !t.transports.shm);
        assert_eq!(t.transports.to_string(), "tcp");
        assert!(Tunables::from_lookup(|k| (k == "WEFT_TRANSPORTS").then(|| "ib".into())).is_err());
        // Every transport but self is chosen by its name alone.
        for name in Transports::ALL.into_iter().filter(|&n| n != "self") {
            let t = Transports::parse("WEFT_TRANSPORTS", name).unwrap();
            for other in Transports::ALL {
                assert_eq!(t.allows(other), other == name || other == "self");
            }
        }
        assert!(Tunables::from_lookup(|k| (k == "WEFT_CONNECT").then(|| "eager".into())).is_err());
        let e = Tunables::from_lookup(|k| (k == "WEFT_SPIN_COUNT").then(|| "lots".into()));
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("WEFT_SPIN_COUNT") && msg.contains("lots"),
            "{msg}"
        );
    }
}
