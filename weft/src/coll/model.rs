//! The collectives' cost model: which algorithm `coll::algorithm` runs when no
//! `WEFT_COLL_*` tunable forces one. Each algorithm's time is predicted from a few constants
//! measured on this machine, and the cheapest algorithm that may run is chosen.
//!
//! **The model.** Hockney's, taken round by round with one node's contention: one message of
//! `m` bytes between two ranks on CPUs of their own costs `alpha + beta·m`, with one pair of
//! constants for messages sent eagerly (up to the path's eager limit, `WEFT_EAGER_LIMIT` on
//! shared memory, `WEFT_TCP_EAGER_LIMIT` over TCP) and one for rendezvous messages, since the
//! two protocols copy differently; reducing costs `gamma` per byte and a local copy `copy`
//! per byte. An algorithm is a sequence of rounds; a round of k messages at once costs its
//! busiest member's start-ups plus the longer of that member's own copying and all the
//! round's copying spread over the node's CPUs, plus, for rendezvous rounds on a node whose
//! members outnumber its CPUs, a wait for CPUs (`Terms::round`; formulas with each algorithm
//! below, and in docs/collectives.md). On shared memory a rendezvous message whose data
//! another CPU has just written in the same collective (a forwarded block, a partial result)
//! costs `fresh` more per byte than one read from a caller's input: its lines sit dirty in
//! another core's cache (`Terms::fresh`; measured here: nothing while the two vCPUs share a
//! core, about 430 ps/byte, a third of the copy rate, while they do not). The constants are
//! tunables (`WEFT_COLL_MODEL_SHM`, `WEFT_COLL_MODEL_TCP`, `WEFT_COLL_MODEL_LOCAL`,
//! `WEFT_COLL_MODEL_CPUS`, `WEFT_COLL_MODEL_OVERSUB`, `WEFT_COLL_MODEL_FRESH`), the link ones
//! measured by the `coll_calibrate` example.
//!
//! **Paths** (a simple approximation): a communicator on one node uses the shared-memory
//! constants for every message, one spanning nodes the TCP ones for every message — a round
//! lasts as long as its slowest message, and in most rounds of these algorithms some pair
//! crosses nodes. A job whose `WEFT_TRANSPORTS` leaves out shm uses the TCP constants always.
//!
//! **Eligibility** is not a cost: Rabenseifner and the ring allreduce, and the pairwise
//! reduce-scatter, need a commutative operation (and the allreduces at least as many elements
//! as members, to cut the vector in a block per member); recursive-doubling allgather needs a
//! power-of-two member count (it would run the ring otherwise); the scattered all-to-all floods
//! every member with n−1 messages at once, which the model allows only when the block size is
//! agreed (below) and, over TCP, only while all of them together fit the eager limit (a flood
//! of rendezvous transfers across the network is what the pairwise exchange avoids; on shared
//! memory it costs only their announcements).
//!
//! **Every member must pick the same algorithm**, or the collective hangs (members wait for
//! messages another algorithm never sends). So the model's inputs ([`Shape`]) are values every
//! member of a correct call agrees on: the member count, the node count, the tunables (one
//! environment for the job), the CPUs online (one machine for a one-node communicator; the
//! count does not enter over TCP), the operation's commutativity (the same operation everywhere),
//! the root, and the sizes that must match: a broadcast's or reduction's vector, a gather's,
//! scatter's or allgather's block per member (equal at every member: the non-`v` forms), a
//! reduce-scatter-block's block, an all-to-all's block. A `v` form's counts differ from member
//! to member, so nothing size-dependent is agreed: its size is `None`, and the model picks by
//! the member count alone (the all-to-all-v runs pairwise). Never feed the model a size only
//! this member knows (such as the largest of its own blocks). The test
//! `every_member_of_a_communicator_picks_the_same_algorithm` (`coll/model_tests.rs`) asks
//! every member of simulated communicators through `coll::algorithm`, each with its own
//! buffers, and requires one answer.

use super::pof2_floor;
use crate::engine::schedule::SHARE_MIN;
use crate::tunables::{LinkCost, LocalCost, Tunables};

/// A collective with a choice of algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// Broadcast.
    Bcast,
    /// Reduce to a root.
    Reduce,
    /// Allreduce.
    Allreduce,
    /// Reduce-scatter with a block per member.
    ReduceScatter,
    /// Gather of a block per member.
    Gather,
    /// Scatter of a block per member.
    Scatter,
    /// Allgather of a block per member.
    Allgather,
    /// All-to-all with a block per pair.
    Alltoall,
}

impl Collective {
    /// Every collective the model chooses for.
    pub const ALL: [Collective; 8] = [
        Collective::Bcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::ReduceScatter,
        Collective::Gather,
        Collective::Scatter,
        Collective::Allgather,
        Collective::Alltoall,
    ];

    /// Its name, as `weft info --coll` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::Allgather => "allgather",
            Collective::Alltoall => "alltoall",
        }
    }

    /// The collective named `name` (case, `-` and `_` ignored; `broadcast` for `bcast`).
    pub fn from_name(name: &str) -> Option<Collective> {
        let key: String = name
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .collect::<String>()
            .to_ascii_lowercase();
        let key = if key == "broadcast" { "bcast" } else { &key };
        Collective::ALL
            .into_iter()
            .find(|c| c.name().replace('_', "") == key)
    }

    /// The tunable that forces its algorithm.
    pub fn tunable(self) -> &'static str {
        match self {
            Collective::Bcast => "WEFT_COLL_BCAST",
            Collective::Reduce => "WEFT_COLL_REDUCE",
            Collective::Allreduce => "WEFT_COLL_ALLREDUCE",
            Collective::ReduceScatter => "WEFT_COLL_REDUCE_SCATTER",
            Collective::Gather => "WEFT_COLL_GATHER",
            Collective::Scatter => "WEFT_COLL_SCATTER",
            Collective::Allgather => "WEFT_COLL_ALLGATHER",
            Collective::Alltoall => "WEFT_COLL_ALLTOALL",
        }
    }

    /// Its algorithms, in the order the model prefers them when their costs are equal.
    pub fn algorithms(self) -> &'static [&'static str] {
        match self {
            Collective::Bcast => &["binomial", "scatter_allgather", "chain", "linear"],
            Collective::Reduce => &["binomial"],
            Collective::Allreduce => &["recursive_doubling", "rabenseifner", "ring"],
            Collective::ReduceScatter => &["pairwise", "by_reduce"],
            Collective::Gather | Collective::Scatter => &["binomial", "linear"],
            Collective::Allgather => &["recursive_doubling", "bruck", "ring", "scattered"],
            Collective::Alltoall => &["scattered", "pairwise"],
        }
    }
}

/// What the model chooses by: values every member of the call agrees on (see the module
/// doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Members of the communicator.
    pub members: usize,
    /// Nodes they are on (1: one node).
    pub nodes: usize,
    /// Bytes: the vector of a broadcast, reduce or allreduce; one member's block of a gather,
    /// scatter, allgather or reduce-scatter; one block of an all-to-all. `None`: sizes differ
    /// between members (the `v` forms), so none may be used.
    pub bytes: Option<usize>,
    /// Bytes of one element of a reduction (1 elsewhere).
    pub elem: usize,
    /// Whether the reduction's operation commutes (true where there is none).
    pub commutative: bool,
    /// The root of a rooted collective (0 elsewhere).
    pub root: usize,
}

impl Shape {
    /// `members` on `nodes`, `bytes` as [`Shape::bytes`] says; a commutative operation on
    /// bytes, root 0.
    pub fn new(members: usize, nodes: usize, bytes: Option<usize>) -> Shape {
        Shape {
            members,
            nodes: nodes.max(1),
            bytes,
            elem: 1,
            commutative: true,
            root: 0,
        }
    }
}

/// Which constants a communicator's messages use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Shared memory (one node).
    Shm,
    /// TCP (several nodes, or no shm transport).
    Tcp,
}

/// One algorithm's predicted cost, or why it may not run.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// The algorithm (as its `WEFT_COLL_*` tunable names it).
    pub algorithm: &'static str,
    /// Predicted time, ns.
    pub cost_ns: f64,
    /// `Some(reason)`: not eligible for this call.
    pub ineligible: Option<Ineligible>,
}

/// Why an algorithm may not run a call (formatted only when someone shows it: the pick made
/// at every collective's start allocates nothing). The fields are the values the message
/// names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Ineligible {
    /// It reorders operands; the operation does not commute.
    NotCommutative,
    /// It needs two members at least.
    TooFewMembers,
    /// It cuts the vector in a block per member: `count` elements for `n` members.
    TooFewElements { n: usize, count: usize },
    /// It needs a power-of-two member count.
    NotPowerOfTwo { n: usize },
    /// The members' block sizes differ (a v form), so they cannot agree on a flood.
    UnequalBlocks,
    /// A member's incoming bytes at once exceed the eager limit.
    OverEager { incoming: usize, eager: usize },
    /// All members' blocks together exceed the eager limit, and an operation that commutes
    /// lets the pairwise exchange run instead.
    BlocksOverEager { bytes: usize, eager: usize },
    /// Not an algorithm of this collective.
    Unknown { collective: &'static str, name: String },
}

impl std::fmt::Display for Ineligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ineligible::NotCommutative => write!(f, "needs a commutative operation"),
            Ineligible::TooFewMembers => write!(f, "needs at least 2 members"),
            Ineligible::TooFewElements { n, count } => {
                write!(f, "needs at least {n} elements (one per member), not {count}")
            }
            Ineligible::NotPowerOfTwo { n } => {
                write!(f, "needs a power-of-two member count, not {n} (it runs the ring then)")
            }
            Ineligible::UnequalBlocks => {
                write!(f, "block sizes differ between members (a v form)")
            }
            Ineligible::OverEager { incoming, eager } => write!(
                f,
                "a member's {incoming} incoming bytes at once exceed the eager limit {eager}"
            ),
            Ineligible::BlocksOverEager { bytes, eager } => write!(
                f,
                "all blocks together ({bytes} bytes) exceed the eager limit {eager}; the \
                 operation commutes, so pairwise runs"
            ),
            Ineligible::Unknown { collective, name } => {
                write!(f, "not an algorithm of {collective}: {name}")
            }
        }
    }
}

/// The model's constants and the tunables it reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// Shared-memory messages.
    pub shm: LinkCost,
    /// TCP messages.
    pub tcp: LinkCost,
    /// Local reduction and copy.
    pub local: LocalCost,
    /// Whether same-node members talk over shared memory (`WEFT_TRANSPORTS` has shm).
    pub shm_transport: bool,
    /// Largest eager message on shared memory (`WEFT_EAGER_LIMIT`).
    pub shm_eager: usize,
    /// Largest eager message over TCP (`WEFT_TCP_EAGER_LIMIT`).
    pub tcp_eager: usize,
    /// Piece size of the chain broadcast (`WEFT_COLL_SEGMENT`).
    pub segment: usize,
    /// Smallest rendezvous message both sides copy (`WEFT_SPLIT_COPY_MIN`; 0: none).
    pub split_copy_min: usize,
    /// CPUs of a node (`WEFT_COLL_MODEL_CPUS`, or the CPUs online here).
    pub cpus: usize,
    /// ns a rendezvous round costs per member sharing a CPU (`WEFT_COLL_MODEL_OVERSUB`).
    pub oversub_ns: f64,
    /// Extra ps per byte of reading data another CPU has just written, on shared memory
    /// (`WEFT_COLL_MODEL_FRESH`).
    pub fresh_ps_per_byte: f64,
    /// Whether a node's CPUs share cores in pairs (`WEFT_COLL_MODEL_SHARED`, measured at
    /// start-up when `auto`): then fresh data costs nothing extra (the lines are in the
    /// shared caches) and local work spreads over half the CPUs.
    pub shared_cores: bool,
}

/// CPUs a node has for the collectives: `WEFT_COLL_MODEL_CPUS`, or the CPUs online here.
pub fn node_cpus(t: &Tunables) -> usize {
    match t.coll_model_cpus {
        0 => crate::sys::online_cpus(),
        n => n,
    }
}

/// The most bytes of send and receive buffers an all-to-all of a node's members may take for
/// every member to copy its own blocks in, when they outnumber the CPUs
/// (`WEFT_COLL_ALLTOALL_PULLS`; `auto`: the CPUs' second-level caches together).
pub fn alltoall_pulls(t: &Tunables) -> usize {
    t.coll_alltoall_pulls
        .or(crate::sys::l2_cache_bytes().saturating_mul(node_cpus(t)))
}

impl Model {
    /// The model the tunables `t` describe.
    pub fn from_tunables(t: &Tunables) -> Model {
        Model {
            shm: t.coll_model_shm,
            tcp: t.coll_model_tcp,
            local: t.coll_model_local,
            shm_transport: t.transports.shm,
            shm_eager: t.eager_limit,
            tcp_eager: t.tcp_eager_limit,
            segment: t.coll_segment.max(1),
            split_copy_min: t.split_copy_min,
            cpus: node_cpus(t),
            oversub_ns: t.coll_model_oversub as f64,
            fresh_ps_per_byte: t.coll_model_fresh as f64,
            shared_cores: t.coll_model_shared.0 == Some(1),
        }
    }

    /// The path of a communicator on `nodes` nodes.
    pub fn path(&self, nodes: usize) -> Path {
        if nodes <= 1 && self.shm_transport {
            Path::Shm
        } else {
            Path::Tcp
        }
    }

    /// The constants and eager limit of `path`.
    fn link(&self, path: Path) -> (LinkCost, usize) {
        match path {
            Path::Shm => (self.shm, self.shm_eager),
            Path::Tcp => (self.tcp, self.tcp_eager),
        }
    }

    /// Every algorithm of `c` with its predicted cost for `s`, in preference order.
    pub fn estimates(&self, c: Collective, s: &Shape) -> Vec<Estimate> {
        let k = self.terms(s);
        c.algorithms()
            .iter()
            .map(|&name| {
                let (cost_ns, ineligible) = k.cost(c, name, s, self.segment);
                Estimate {
                    algorithm: name,
                    cost_ns,
                    ineligible,
                }
            })
            .collect()
    }

    /// Whether a gather or scatter of `len`-byte blocks on `members` members over `nodes`
    /// nodes goes node-aware (when no tunable forces an algorithm): each block still crosses
    /// between nodes once, as in the linear forms, so it pays only while the start-ups it
    /// saves, (members − nodes) TCP α, outweigh copying every block twice more on shared
    /// memory (docs/collectives.md: 1 MiB blocks on 2 hosts of 2 ranks went 1.1-1.5 times
    /// slower node-aware).
    pub fn rooted_node_aware_pays(&self, members: usize, nodes: usize, len: usize) -> bool {
        let saved = members.saturating_sub(nodes) as f64 * self.tcp.alpha_ns;
        let per_byte = (self.shm.rdv_beta_ps_per_byte + 2.0 * self.local.copy_ps_per_byte) / 1000.0;
        ((members * len) as f64 * per_byte) < saved
    }

    /// Whether an all-to-all of `len`-byte blocks on `members` members over `nodes` nodes, the
    /// largest holding `largest` members, goes node-aware (when no tunable forces an
    /// algorithm): it saves the (members − nodes) TCP start-ups of a member's flat exchange,
    /// and costs the largest node's leader a shared-memory transfer and two copies of its
    /// node's `largest` · `members` blocks (gathered, reordered, scattered).
    pub fn alltoall_node_aware_pays(&self, members: usize, nodes: usize, largest: usize, len: usize) -> bool {
        self.rooted_node_aware_pays(members, nodes, largest * len)
    }

    /// The cheapest eligible algorithm of `c` for `s` (the first listed among equals).
    pub fn pick(&self, c: Collective, s: &Shape) -> &'static str {
        let k = self.terms(s);
        let mut best: Option<(&'static str, f64)> = None;
        for &name in c.algorithms() {
            let (cost, ineligible) = k.cost(c, name, s, self.segment);
            if ineligible.is_none() && best.is_none_or(|(_, b)| cost < b) {
                best = Some((name, cost));
            }
        }
        best.map_or(c.algorithms()[0], |(name, _)| name)
    }

    /// The numbers the estimates of `s` work with.
    fn terms(&self, s: &Shape) -> Terms {
        let path = self.path(s.nodes);
        let (link, eager) = self.link(path);
        let n = s.members.max(1);
        // Contention is a one-node matter: over TCP a round lasts as long as its slowest
        // link, and the members of one node in it are few.
        let (cpus, wait_ns, split_min) = match path {
            Path::Shm => {
                // Two CPUs of one core do not copy or reduce twice as fast as one.
                let cores = if self.shared_cores {
                    (self.cpus / 2).max(1)
                } else {
                    self.cpus
                };
                let cpus = cores.clamp(1, n);
                let wait = if n > self.cpus.max(1) {
                    self.oversub_ns * n as f64 / self.cpus.max(1) as f64
                } else {
                    0.0
                };
                let split = if self.split_copy_min == 0 {
                    usize::MAX
                } else {
                    self.split_copy_min.max(SHARE_MIN)
                };
                (cpus as f64, wait, split)
            }
            // Over TCP the fitted line is the whole story: as if both sides shared the copy.
            Path::Tcp => (f64::INFINITY, 0.0, 0),
        };
        let fresh = match path {
            Path::Shm if !self.shared_cores => self.fresh_ps_per_byte / 1000.0,
            Path::Shm | Path::Tcp => 0.0,
        };
        Terms {
            n,
            m: s.bytes.unwrap_or(0),
            link,
            eager,
            gamma: self.local.gamma_ps_per_byte / 1000.0,
            copy: self.local.copy_ps_per_byte / 1000.0,
            cpus,
            wait_ns,
            split_min,
            fresh,
        }
    }
}

/// Which side of a round's messages the busiest member is on.
#[derive(Clone, Copy)]
enum Fan {
    /// It receives them (the root of a gather).
    In,
    /// It sends them (the root of a broadcast or scatter).
    Out,
}

/// The numbers one estimate works with: `n` members, `m` bytes, ns per message and per byte.
struct Terms {
    n: usize,
    m: usize,
    link: LinkCost,
    eager: usize,
    /// ns per byte reduced.
    gamma: f64,
    /// ns per byte copied.
    copy: f64,
    /// CPUs the members share (∞ over TCP).
    cpus: f64,
    /// ns every rendezvous round waits for CPUs (0 unless the node is oversubscribed).
    wait_ns: f64,
    /// Smallest rendezvous message both sides copy (`usize::MAX`: none; 0 over TCP, where
    /// the fitted line is taken as it is).
    split_min: usize,
    /// Extra ns per byte of fresh data (0 over TCP).
    fresh: f64,
}

/// ⌈log2 n⌉ (0 for n ≤ 1).
fn ceil_log2(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

impl Terms {
    /// A round of `k` messages of `bytes` at once, the busiest member taking part in `j` of
    /// them (receiving or sending, as `fan` says): its `j` start-ups, then the longer of its
    /// own copying and everyone's copying spread over the CPUs; plus, for rendezvous
    /// messages on an oversubscribed node, the wait for both sides to have a CPU.
    ///
    /// Who copies: an eager message is copied by both sides (into the ring and out, at
    /// once); a rendezvous one by the receiver alone, or, for a receive that lets an idle
    /// sender help ([`Terms::round_shared`]), half by each side from
    /// `max(WEFT_SPLIT_COPY_MIN, SHARE_MIN)` on. The one-message line `beta` was measured
    /// between two ranks on CPUs of their own, so one side's copy of one message takes
    /// `beta·bytes` when both copy, twice that when one does.
    fn round(&self, j: usize, k: usize, bytes: usize, fan: Fan) -> f64 {
        self.round_with(j, k, bytes, fan, false)
    }

    /// [`Terms::round`] for receives whose senders are otherwise idle
    /// (`Schedule::recv_shared`).
    fn round_shared(&self, j: usize, k: usize, bytes: usize, fan: Fan) -> f64 {
        self.round_with(j, k, bytes, fan, true)
    }

    fn round_with(&self, j: usize, k: usize, bytes: usize, fan: Fan, share: bool) -> f64 {
        if k == 0 || j == 0 {
            return 0.0;
        }
        let l = &self.link;
        let rendezvous = bytes > self.eager;
        let (alpha, beta) = if rendezvous {
            (l.rdv_alpha_ns, l.rdv_beta_ps_per_byte / 1000.0)
        } else {
            (l.alpha_ns, l.beta_ps_per_byte / 1000.0)
        };
        let t = beta * bytes as f64;
        // Over TCP the fitted line is the whole story (`split_min` 0 there).
        let alone = rendezvous && self.split_min > 0 && (!share || bytes < self.split_min);
        let (send, recv) = if alone {
            (0.0, 2.0 * t)
        } else {
            (t, t)
        };
        let mine = match fan {
            Fan::In => j as f64 * recv,
            Fan::Out => j as f64 * send,
        };
        let busiest = mine.max(send.max(recv));
        let everyone = k as f64 * (send + recv) / self.cpus;
        let wait = if rendezvous { self.wait_ns } else { 0.0 };
        // A rendezvous message never costs less than the largest eager one.
        let floor = if rendezvous {
            l.alpha_ns + l.beta_ps_per_byte / 1000.0 * self.eager as f64
        } else {
            0.0
        };
        alpha * j as f64 + busiest.max(everyone).max(floor) + wait
    }

    /// `k` members each reducing `bytes` at once.
    fn reduce_round(&self, k: usize, bytes: usize) -> f64 {
        let one = self.reduce(bytes);
        one.max(k as f64 * one / self.cpus)
    }

    fn reduce(&self, bytes: usize) -> f64 {
        self.gamma * bytes as f64
    }

    fn copy(&self, bytes: usize) -> f64 {
        self.copy * bytes as f64
    }

    /// A member reading `bytes` that another CPU has just written in this collective (a
    /// forwarded block, a partial result) rather than a caller's input. Only a rendezvous
    /// message reads its sender's buffer: an eager one always goes through the ring's
    /// freshly written lines, whatever the algorithm (its `beta` has that in it).
    fn fresh(&self, bytes: usize) -> f64 {
        if bytes > self.eager {
            self.fresh * bytes as f64
        } else {
            0.0
        }
    }

    /// (cost, why not eligible) of algorithm `name` of `c`.
    fn cost(
        &self,
        c: Collective,
        name: &str,
        s: &Shape,
        segment: usize,
    ) -> (f64, Option<Ineligible>) {
        use Fan::{In, Out};
        let (n, m) = (self.n, self.m);
        let lg = ceil_log2(n);
        let p2 = pof2_floor(n);
        let l2 = p2.trailing_zeros() as usize;
        let extra = n != p2;
        let commutes = || (!s.commutative).then_some(Ineligible::NotCommutative);
        let split = || {
            let count = m / s.elem.max(1);
            commutes()
                .or_else(|| (n < 2).then_some(Ineligible::TooFewMembers))
                .or_else(|| (count < n).then_some(Ineligible::TooFewElements { n, count }))
        };
        // Round j of a binomial tree (j = 0 the leaves' round of a gather or reduce): about
        // n/2^(j+1) pairs at once, each moving a subtree of min(2^j, n − 2^j) blocks.
        let pairs = |j: usize| (n >> (j + 1)).max(1);
        let subtree = |j: usize| (1usize << j).min(n - (1 << j));
        match (c, name) {
            // ⌈log2 n⌉ rounds of the whole vector; the root sends one per round, and from
            // the second round on others forward what they received (fresh).
            // At 2 members the only child shares the copy with its idle parent (either
            // algorithm).
            (Collective::Bcast, "binomial") => {
                let t: f64 = (0..lg)
                    .map(|j| self.round_with(1, subtree(j), m, Out, n == 2))
                    .sum();
                (t + lg.saturating_sub(1) as f64 * self.fresh(m), None)
            }
            // The root sends the whole vector to all n−1 members at once.
            (Collective::Bcast, "linear") => (self.round_with(n - 1, n - 1, m, Out, n == 2), None),
            // A binomial scatter of n pieces (round j: 2^j members pass on the pieces of
            // subtrees half the size of the last round's), then n−1 ring steps of one piece.
            (Collective::Bcast, "scatter_allgather") => {
                if n == 1 || m == 0 {
                    return (0.0, None);
                }
                let piece = m.div_ceil(n);
                // Every round but the root's first passes on pieces received (fresh).
                let scatter: f64 = (0..lg)
                    .map(|j| {
                        let bytes = (piece * (n >> (j + 1)).max(1)).min(m);
                        let fresh = if j > 0 { self.fresh(bytes) } else { 0.0 };
                        self.round(1, 1 << j, bytes, Out) + fresh
                    })
                    .sum();
                let ring = (n - 1) as f64 * (self.round(1, n, piece, In) + self.fresh(piece));
                (scatter + ring, None)
            }
            // Segments of s bytes down a chain: the last member gets the first after n−1
            // hops, then one more every step: (n − 2 + ⌈m/s⌉) steps, each link busy.
            (Collective::Bcast, "chain") => {
                if n == 1 || m == 0 {
                    return (0.0, None);
                }
                let seg = segment.min(m);
                let segs = m.div_ceil(seg);
                let steps = n - 2 + segs;
                // Past the root's link every member forwards what it received (fresh).
                let fresh = if n > 2 { self.fresh(seg) } else { 0.0 };
                let step = self.round(1, (n - 1).min(segs), seg, In) + fresh;
                (steps as f64 * step, None)
            }
            // ⌈log2 n⌉ rounds of receive-and-reduce (and one more message to a root that is
            // not member 0, for an operation that does not commute).
            (Collective::Reduce, "binomial") => (self.reduce_binomial(s, m), None),
            (Collective::Allreduce, _) => {
                // Members beyond the largest power of two fold in first and get the result
                // at the end (both fresh: a partial result, the result).
                let fold = if extra {
                    2.0 * (self.round(1, n - p2, m, In) + self.fresh(m)) + self.reduce(m)
                } else {
                    0.0
                };
                // On a power of two the first exchange goes straight from the inputs (no
                // copy, nothing fresh); otherwise the input is copied first and every
                // exchange sends what this member wrote.
                let direct = !extra && n > 1;
                let first = if direct { 0.0 } else { self.copy(m) };
                let exchange = |bytes: usize, reduce: bool, fresh: bool| {
                    self.round(1, p2, bytes, In)
                        + if reduce { self.reduce_round(p2, bytes) } else { 0.0 }
                        + if fresh { self.fresh(bytes) } else { 0.0 }
                };
                match name {
                    // log2 p2 exchanges of the whole vector, each reduced.
                    "recursive_doubling" => {
                        let rounds: f64 = (0..l2)
                            .map(|k| exchange(m, true, k > 0 || !direct))
                            .sum();
                        (first + fold + rounds, None)
                    }
                    // Recursive halving then doubling: messages of m/2, m/4, …, the first
                    // half of them reduced.
                    "rabenseifner" => {
                        let halves: f64 = (1..=l2)
                            .map(|k| {
                                exchange(m >> k, true, k > 1 || !direct)
                                    + exchange(m >> k, false, true)
                            })
                            .sum();
                        (first + fold + halves, split())
                    }
                    // 2(n−1) steps of one block of m/n to the neighbour, the first n−1
                    // reduced, every one sending what this member wrote.
                    _ => {
                        let block = m / n;
                        let step = |reduce| {
                            self.round(1, n, block, In)
                                + if reduce { self.reduce_round(n, block) } else { 0.0 }
                                + self.fresh(block)
                        };
                        let t = self.copy(m) + (n - 1) as f64 * (step(true) + step(false));
                        (t, split())
                    }
                }
            }
            // n−1 steps, each sending one block and reducing the one received.
            (Collective::ReduceScatter, "pairwise") => {
                let step = self.round(1, n, m, In) + self.reduce_round(n, m);
                (self.copy(m) + (n - 1) as f64 * step, commutes())
            }
            // A binomial reduce of all n blocks to member 0, then a linear scatter. For an
            // operation that commutes (pairwise may run) only while the n blocks go eagerly:
            // beyond, every round moves all of them where a pairwise step moves one, and the
            // model underprices that (8 ranks on 2 CPUs, 64 KiB blocks: 549 µs pairwise
            // against 857-1104, priced the other way round).
            (Collective::ReduceScatter, _) => {
                let scatter = self.round(n - 1, n - 1, m, Out) + self.fresh(m);
                let t = self.reduce_binomial(s, n * m) + scatter;
                let why = (s.commutative && n * m > self.eager).then_some(
                    Ineligible::BlocksOverEager {
                        bytes: n * m,
                        eager: self.eager,
                    },
                );
                (t, why)
            }
            // Round j moves subtrees of 2^j blocks between n/2^(j+1) pairs; each member
            // copies its own block first, and a root that is not member 0 reorders all n.
            // Every round but the leaves' (a gather) or the root's alone (a scatter) moves
            // blocks forwarded (fresh).
            (Collective::Gather | Collective::Scatter, "binomial") => {
                // A gather's parent receives from a child that has sent its all; a
                // scatter's child from a parent with more to send.
                let tree: f64 = (0..lg)
                    .map(|j| {
                        let bytes = subtree(j) * m;
                        match c {
                            Collective::Gather => {
                                let fresh = if j > 0 { self.fresh(bytes) } else { 0.0 };
                                self.round_shared(1, pairs(j), bytes, In) + fresh
                            }
                            _ => {
                                let fresh = if j + 1 < lg { self.fresh(bytes) } else { 0.0 };
                                self.round(1, pairs(j), bytes, Out) + fresh
                            }
                        }
                    })
                    .sum();
                let reorder = if s.root != 0 { self.copy(n * m) } else { 0.0 };
                (self.copy(m) + tree + reorder, None)
            }
            // The root receives (or sends) n−1 blocks at once.
            (Collective::Gather | Collective::Scatter, _) => {
                let t = match c {
                    Collective::Gather => self.round_shared(n - 1, n - 1, m, In),
                    _ => self.round(n - 1, n - 1, m, Out),
                };
                (self.copy(m) + t, None)
            }
            // log2 n exchanges of 1, 2, 4, … blocks; from the second on, blocks received
            // (fresh).
            (Collective::Allgather, "recursive_doubling") => {
                let t = self.copy(m)
                    + (0..l2)
                        .map(|j| {
                            let fresh = if j > 0 { self.fresh(m << j) } else { 0.0 };
                            self.round(1, p2, m << j, In) + fresh
                        })
                        .sum::<f64>();
                let why = extra.then_some(Ineligible::NotPowerOfTwo { n });
                (t, why)
            }
            // ⌈log2 n⌉ steps of min(k, n−k) blocks (all from a buffer this member wrote),
            // then a rotation of all n blocks.
            (Collective::Allgather, "bruck") => {
                let steps: f64 = (0..lg)
                    .map(|j| self.round(1, n, subtree(j) * m, In) + self.fresh(subtree(j) * m))
                    .sum();
                (self.copy(m) + steps + self.copy(n * m), None)
            }
            // Every member sends its block to all and receives n−1 blocks at once, as the
            // scattered all-to-all (the same rule over TCP).
            (Collective::Allgather, "scattered") => {
                let t = self.copy(m) + self.round(n - 1, n * (n - 1), m, In);
                let why = (self.cpus.is_infinite() && (n - 1) * m > self.eager).then_some(
                    Ineligible::OverEager {
                        incoming: (n - 1) * m,
                        eager: self.eager,
                    },
                );
                (t, why)
            }
            // n−1 steps of one block, from the second on a block received (fresh).
            (Collective::Allgather, _) => {
                let forwarded = n.saturating_sub(2) as f64 * self.fresh(m);
                let t = self.copy(m) + (n - 1) as f64 * self.round(1, n, m, In) + forwarded;
                (t, None)
            }
            // Every member receives n−1 blocks at once. On shared memory a flood of
            // rendezvous messages costs only their announcements; over TCP it is allowed
            // only while a member's incoming blocks fit the eager limit together.
            (Collective::Alltoall, "scattered") => {
                let t = self.copy(m) + self.round(n - 1, n * (n - 1), m, In);
                let why = match s.bytes {
                    None => Some(Ineligible::UnequalBlocks),
                    Some(_) if self.cpus.is_infinite() && (n - 1) * m > self.eager => {
                        Some(Ineligible::OverEager {
                            incoming: (n - 1) * m,
                            eager: self.eager,
                        })
                    }
                    Some(_) => None,
                };
                (t, why)
            }
            // n−1 steps, each member sending one block and receiving one.
            (Collective::Alltoall, _) => {
                let t = self.copy(m) + (n - 1) as f64 * self.round(1, n, m, In);
                (t, None)
            }
            (_, other) => (
                0.0,
                Some(Ineligible::Unknown {
                    collective: c.name(),
                    name: other.to_string(),
                }),
            ),
        }
    }

    /// A binomial reduce of `bytes` to the root: the copy into the accumulator, then
    /// ⌈log2 n⌉ rounds of receive-and-reduce (and one more message to a root that is not
    /// member 0, for an operation that does not commute).
    fn reduce_binomial(&self, s: &Shape, bytes: usize) -> f64 {
        let n = self.n;
        // From the second round on the senders send partial results (fresh).
        let rounds: f64 = (0..ceil_log2(n))
            .map(|j| {
                let pairs = (n >> (j + 1)).max(1);
                let fresh = if j > 0 { self.fresh(bytes) } else { 0.0 };
                self.round_shared(1, pairs, bytes, Fan::In) + self.reduce_round(pairs, bytes) + fresh
            })
            .sum();
        let moved = if !s.commutative && s.root != 0 {
            self.round_shared(1, 1, bytes, Fan::In) + self.fresh(bytes)
        } else {
            0.0
        };
        // Only a member alone copies its data into the accumulator: otherwise the first
        // child's data lands there and its own folds in.
        let first = if n == 1 { self.copy(bytes) } else { 0.0 };
        first + rounds + moved
    }
}
