//! Dynamic processes (MPI 4.1 chapter 11): joining this job's communicator with a group of
//! another job into an intercommunicator, after a spawn (the parents and their children), or
//! at a port (`MPI_Comm_accept`/`MPI_Comm_connect`).
//!
//! Both groups do the same ([`join`]), collectively over their own communicator:
//!
//! 1. every member makes sure it has a TCP listener (processes of other jobs are reached by
//!    TCP, even on this node) and the group gathers a table of `(universe rank, world rank,
//!    address)` per member;
//! 2. the two leaders meet ([`super::port`]), prove they hold the universe's secret and trade
//!    tables; each broadcasts the other's table (or the leader's failure) to its group;
//! 3. every member adds the other group's processes as peers (new peer numbers past the
//!    world; each its own node, since no memory is shared with it);
//! 4. the groups agree on a context pair free at all members of both, as
//!    `MPI_Intercomm_create` does, the leaders talking through the engine now.
//!
//! No member of either group sends the other group anything before step 4, which needs every
//! member of both groups to have finished step 3; so no connection ever arrives from a
//! process its acceptor does not know yet.

use super::context::{coll_context, ContextMask, WORLD_PAIR};
use super::group::GroupData;
use super::inter::{agree_across, bcast_among, Side};
use super::port::{self, Port};
use super::{allgather_among, CommData};
use crate::boot::{spawn_universe_base, Boot, SpawnCommand, UNIVERSE_BASE_KEY};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::node::NodeFabric;
use crate::fabric::tcp::auth::{self, SECRET_LEN};
use crate::tunables::Tunables;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

/// Internal tags: the gather of a group's table (on the group's collective context), the
/// broadcast of the other group's, and the leaders' agreement (on the world's collective
/// context, which both leaders have: each job's world has pair 0).
const TAG_TABLE: i32 = -50;
const TAG_THEIR_TABLE: i32 = -51;
const TAG_LEADERS: i32 = -52;

/// The key under which a spawned job finds its parents' port (MPICH's name for it).
pub const PARENT_PORT_KEY: &str = "PARENT_ROOT_PORT_NAME";

/// Bytes of one member's table entry: universe rank, world rank, node in its job, address
/// (family, 16 bytes of IP, port), job key.
const ENTRY_LEN: usize = 4 + 4 + 4 + 1 + 16 + 2 + 8;

/// One process as the other group learns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    uni: u32,
    wire: u32,
    /// Its node in its own job's node map.
    node: u32,
    addr: SocketAddr,
    /// Its job's key ([`job_key`]).
    job: u64,
}

/// A job's key: a hash of the name its process manager gave it (unique among the jobs that
/// can meet), so that two jobs whose universe ranks overlap are told apart.
fn job_key(boot: &Boot) -> u64 {
    // FNV-1a, 64 bits.
    boot.job_id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[..4].copy_from_slice(&self.uni.to_le_bytes());
        b[4..8].copy_from_slice(&self.wire.to_le_bytes());
        b[8..12].copy_from_slice(&self.node.to_le_bytes());
        let ip = match self.addr.ip() {
            IpAddr::V4(v4) => {
                b[12] = 4;
                v4.to_ipv6_mapped().octets()
            }
            IpAddr::V6(v6) => {
                b[12] = 6;
                v6.octets()
            }
        };
        b[13..29].copy_from_slice(&ip);
        b[29..31].copy_from_slice(&self.addr.port().to_le_bytes());
        b[31..].copy_from_slice(&self.job.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Entry> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&b[13..29]).ok()?);
        let ip = match b[12] {
            4 => IpAddr::V4(v6.to_ipv4_mapped()?),
            6 => IpAddr::V6(v6),
            _ => return None,
        };
        let port = u16::from_le_bytes([b[29], b[30]]);
        Some(Entry {
            uni: u32_at(0),
            wire: u32_at(4),
            node: u32_at(8),
            addr: SocketAddr::new(ip, port),
            job: u64::from_le_bytes(b[31..39].try_into().ok()?),
        })
    }
}

/// A group's table as the leaders trade it: the leader's position, then each member's entry
/// in communicator-rank order.
fn table(leader: u32, entries: &[u8]) -> Vec<u8> {
    let mut t = leader.to_le_bytes().to_vec();
    t.extend_from_slice(entries);
    t
}

/// The other group's table: its leader's position and its members.
fn read_table(call: &'static str, t: &[u8]) -> Result<(usize, Vec<Entry>)> {
    let bad = |why: &str| Error::new(ErrorClass::Port, call, format!("the other group's table {why}"));
    if t.len() <= 4 || !(t.len() - 4).is_multiple_of(ENTRY_LEN) {
        return Err(bad(&format!("has a bad length ({} bytes)", t.len())));
    }
    let leader = u32::from_le_bytes(t[..4].try_into().unwrap()) as usize;
    let entries: Option<Vec<Entry>> = t[4..].chunks_exact(ENTRY_LEN).map(Entry::decode).collect();
    let entries = entries.ok_or_else(|| bad("has a bad address"))?;
    if leader >= entries.len() {
        return Err(bad(&format!("names leader {leader} of {} members", entries.len())));
    }
    Ok((leader, entries))
}

/// How this group's leader meets the other's.
pub enum Meet<'a> {
    /// Waits at this open port (`MPI_Comm_accept`).
    Accept(&'a Port),
    /// Dials the port with this name (`MPI_Comm_connect`).
    Connect(&'a str),
    /// Has the process manager start these commands, then waits for their leader at a port
    /// of its own, whose name their key-value space holds (`MPI_Comm_spawn`).
    Spawn(&'a [SpawnCommand]),
    /// Fails the join with this error at every member (the root found its arguments bad).
    Fail(crate::Error),
}

/// What [`join`] works with: the pieces of the runtime.
pub struct Joining<'a> {
    /// The engine (its fabric gains the other group's processes).
    pub eng: &'a mut Engine<NodeFabric>,
    /// The process-manager client (the secret, spawning) and the node map.
    pub boot: &'a mut Boot,
    /// Where to listen, and the timeouts.
    pub tunables: &'a Tunables,
    /// Free context pairs.
    pub mask: &'a mut ContextMask,
    /// The node (in `boot.node_of`) given to each node of another job met so far, by that
    /// job's first universe rank and its node there.
    pub other_nodes: &'a mut std::collections::HashMap<(u32, u32), u32>,
}

/// The universe's secret: the job's (every job `weft run` starts has the same one; under
/// another process manager, rank 0 put one at start-up and spawned jobs get their parents').
fn universe_secret(call: &'static str, boot: &mut Boot) -> Result<[u8; SECRET_LEN]> {
    crate::fabric::tcp::job_secret(boot).map_err(|e| {
        Error::unsupported(
            call,
            format!(
                "joining another job needs the job's secret, and the process manager ({}) \
                 has none ({}): start the job with weft run or a PMI process manager",
                boot.pmi.protocol(),
                e.detail
            ),
        )
    })
}

/// Joins `local`'s group with another job's group into an intercommunicator; `meet` is
/// significant at member `root` only (the leader). Collective over `local`, and over the
/// other group at the same time.
pub fn join(
    call: &'static str,
    j: Joining<'_>,
    local: &CommData,
    root: u32,
    meet: Option<Meet<'_>>,
) -> Result<CommData> {
    local.intra_only(call)?;
    let (members, me) = (local.group.members(), local.rank as usize);
    let secret = universe_secret(call, j.boot)?;
    // 1. This group's table.
    if j.eng.fabric().tcp().is_none() {
        j.eng.fabric_mut().start_tcp_for_other_jobs(j.boot, j.tunables, secret)?;
    }
    let tcp = j.eng.fabric().tcp().expect("started above");
    let mine = Entry {
        uni: tcp.universe_rank(),
        wire: j.boot.rank,
        node: j.boot.node_of[j.boot.rank as usize],
        addr: tcp.local_addr(),
        job: job_key(j.boot),
    };
    let ctx = local.coll_context();
    let entries = allgather_among(j.eng, ctx, TAG_TABLE, members, me, &mine.encode())?;
    // 2. The leaders trade tables; each group learns the other's, or its leader's failure.
    let mut theirs = Vec::new();
    let mut failure = None;
    if me == root as usize {
        let timeout = Duration::from_secs(j.tunables.tcp_timeout_s.max(1));
        let mine = table(root, &entries);
        let met = meet_other(call, &mut *j.eng, j.boot, j.tunables, meet, &secret, &mine, timeout);
        match met {
            Ok(t) => theirs = t,
            Err(e) => failure = Some(e),
        }
    }
    // What the leader tells its group: a failure's class and text, or the other table.
    let told = match &failure {
        Some(e) => [&[1, e.class as u8][..], e.detail.as_bytes()].concat(),
        None => [&[0, 0][..], &theirs].concat(),
    };
    let mut len = (told.len() as u32).to_le_bytes();
    let at = (ctx, TAG_THEIR_TABLE);
    bcast_among(j.eng, at, members, me, root as usize, &mut len)?;
    let mut told = if me == root as usize { told } else { vec![0; u32::from_le_bytes(len) as usize] };
    bcast_among(j.eng, at, members, me, root as usize, &mut told)?;
    if told[0] != 0 {
        return Err(failure.unwrap_or_else(|| {
            let detail = String::from_utf8_lossy(&told[2..]);
            let class = crate::error::ErrorClass::from_index(told[1]);
            Error::new(class, call, format!("at the group's leader (rank {root}): {detail}"))
        }));
    }
    let theirs = &told[2..];
    let (their_leader, others) = read_table(call, theirs)?;
    // 3. Their processes become peers.
    let own_job = job_key(j.boot);
    let ids = others
        .iter()
        .map(|e| add_peer(j.eng, j.boot, j.other_nodes, (e, own_job)))
        .collect::<Result<Vec<u32>>>()
        .map_err(|e| Error::new(e.class, call, e.detail))?;
    if let Some(w) = ids.iter().find(|w| members.contains(w)) {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            format!("world rank {w} is in both groups (a process cannot join its own group)"),
        ));
    }
    // 4. A context pair free everywhere.
    let side = Side {
        ctx,
        members,
        me,
        leader: root as usize,
        other_leader: (coll_context(WORLD_PAIR), TAG_LEADERS, ids[their_leader]),
    };
    let (pair, _) = agree_across(j.eng, j.mask, &side, &[], 0, |_| Ok(()))?;
    Ok(CommData::new(pair, local.group.clone(), local.rank).with_remote(Rc::new(GroupData::new(ids))))
}

/// The peer number of `e`, adding it when it is new, on a node of this job's node map: the
/// one given to its node in its job (processes of its job that share a node share one here
/// too; no memory is shared with this job, so never one of this job's nodes). Every process
/// of both jobs thus sees the same partition of any communicator into nodes, which the
/// node-aware collectives need. `own_job` is this job's key: another job claiming one of
/// this job's universe ranks is an error.
fn add_peer(
    eng: &mut Engine<NodeFabric>,
    boot: &mut Boot,
    other_nodes: &mut std::collections::HashMap<(u32, u32), u32>,
    (e, own_job): (&Entry, u64),
) -> Result<u32> {
    let (id, new) = eng.fabric_mut().add_remote(e.uni, e.wire, (e.job, own_job), e.addr)?;
    if new {
        eng.add_peer(id);
        let fresh = boot.node_of.iter().max().map_or(0, |&n| n + 1);
        let node = *other_nodes.entry((e.uni - e.wire, e.node)).or_insert(fresh);
        debug_assert_eq!(boot.node_of.len(), id as usize);
        boot.node_of.push(node);
    }
    Ok(id)
}

/// The leader's part: meets the other group's leader as `meet` says and returns its table.
#[allow(clippy::too_many_arguments)]
fn meet_other(
    call: &'static str,
    eng: &mut Engine<NodeFabric>,
    boot: &mut Boot,
    tunables: &Tunables,
    meet: Option<Meet<'_>>,
    secret: &[u8; SECRET_LEN],
    mine: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>> {
    let meet = meet.ok_or_else(|| {
        Error::new(ErrorClass::Internal, call, "the leader was given no way to meet")
    })?;
    match meet {
        Meet::Fail(e) => Err(e),
        Meet::Accept(p) => p.accept(call, secret, mine, (timeout, None), || {
            eng.progress();
        }),
        Meet::Connect(name) => port::connect(secret, port::parse_name(call, name)?, mine, timeout),
        Meet::Spawn(cmds) => {
            let one_node = boot.node_of.iter().all(|&n| n == boot.node_of[0]);
            let p = Port::open(tunables, one_node)?;
            // The new job's key-value space starts with the port, the universe's secret and
            // (for process managers other than weft run, which sets WEFT_UNIVERSE_BASE) its
            // first universe rank.
            let preput = [
                (PARENT_PORT_KEY.to_owned(), p.name().to_owned()),
                (crate::fabric::tcp::SECRET_KEY.to_owned(), auth::secret_to_hex(secret)),
                (UNIVERSE_BASE_KEY.to_owned(), spawn_universe_base()?.to_string()),
            ];
            boot.pmi.spawn(cmds, &preput)?;
            let wait = Duration::from_secs(tunables.spawn_timeout_s.max(1));
            p.accept(call, secret, mine, (timeout, Some(wait)), || {
                eng.progress();
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_tables_round_trip() {
        let a = Entry {
            uni: 7,
            wire: 3,
            node: 1,
            addr: "127.0.0.1:4567".parse().unwrap(),
            job: 0x0123_4567_89ab_cdef,
        };
        let b = Entry {
            uni: 9,
            wire: 0,
            node: 0,
            addr: "[::1]:80".parse().unwrap(),
            job: u64::MAX,
        };
        assert_eq!(Entry::decode(&a.encode()), Some(a));
        assert_eq!(Entry::decode(&b.encode()), Some(b));
        let t = table(1, &[a.encode(), b.encode()].concat());
        assert_eq!(read_table("t", &t).unwrap(), (1, vec![a, b]));
    }

    #[test]
    fn bad_tables_are_refused() {
        let a = Entry {
            uni: 1,
            wire: 1,
            node: 0,
            addr: "10.0.0.1:1".parse().unwrap(),
            job: 1,
        }
        .encode();
        let e = read_table("connect", &table(1, &a)).unwrap_err().to_string();
        assert!(e.contains("names leader 1 of 1 members"), "{e}");
        assert!(read_table("connect", &[0, 0, 0, 0]).is_err());
        assert!(read_table("connect", &[0, 0, 0, 0, 1]).is_err());
        let mut bad = a;
        bad[12] = 5;
        let e = read_table("connect", &table(0, &bad)).unwrap_err().to_string();
        assert!(e.contains("bad address"), "{e}");
    }
}
