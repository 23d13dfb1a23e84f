//! `weft info`'s section on the collectives' cost model: its constants in force, and with
//! `--coll`, each algorithm's predicted cost for a communicator shape and size, and the pick.

use std::fmt::Write as _;
use weft::coll_model::{Collective, Model, Path, Shape};
use weft::tunables::{parse_size, LinkCost, Tunables};

/// Whether the operation of a reduction commutes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OpKind {
    /// Commutative (the predefined operations).
    #[default]
    Commutative,
    /// Not commutative (a user operation made with `associative`).
    Noncommutative,
}

/// The question `weft info --coll` asks the model.
#[derive(clap::Args, Debug, Default)]
pub struct Query {
    /// List the C ABI's functions (libmpi_abi.so.1) that are not supported yet: they exist,
    /// and raise MPI_ERR_UNSUPPORTED_OPERATION through the error handler.
    #[arg(long, conflicts_with = "coll")]
    pub abi: bool,
    /// Show each algorithm's predicted cost and the cost model's pick for this collective:
    /// bcast, reduce, allreduce, reduce_scatter, gather, scatter, allgather or alltoall.
    #[arg(long, value_name = "COLLECTIVE")]
    pub coll: Option<String>,
    /// Members of the communicator (with --coll).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub members: usize,
    /// Nodes the members are on (with --coll): 1 uses the shm constants, more the tcp ones.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub nodes: usize,
    /// Bytes (k/m suffixes): the vector of bcast, reduce and allreduce; one member's block of
    /// gather, scatter, allgather and reduce_scatter; one block of alltoall.
    #[arg(long, value_name = "SIZE", default_value = "8")]
    pub size: String,
    /// Bytes of one element of a reduction.
    #[arg(long, value_name = "BYTES", default_value_t = 8)]
    pub elem: usize,
    /// The reduction's operation.
    #[arg(long, value_enum, default_value = "commutative")]
    pub op: OpKind,
    /// The root of a rooted collective.
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    pub root: usize,
}

fn link_line(name: &str, l: &LinkCost, eager: usize) -> String {
    format!(
        "  {name:5}  eager (up to {eager} bytes): alpha {} ns, beta {} ps/byte; \
         rendezvous: alpha {} ns, beta {} ps/byte",
        l.alpha_ns, l.beta_ps_per_byte, l.rdv_alpha_ns, l.rdv_beta_ps_per_byte
    )
}

/// The constants in force.
pub fn constants(out: &mut String, t: &Tunables) {
    let m = Model::from_tunables(t);
    let _ = writeln!(
        out,
        "Collective cost model (docs/collectives.md; measure the constants with the \
         coll_calibrate example; ask it with --coll):"
    );
    let _ = writeln!(out, "{}", link_line("shm", &m.shm, m.shm_eager));
    let _ = writeln!(out, "{}", link_line("tcp", &m.tcp, m.tcp_eager));
    let _ = writeln!(
        out,
        "  local  gamma (reduce) {} ps/byte, copy {} ps/byte; on shm, reading data another CPU \
         just wrote {} ps/byte more",
        m.local.gamma_ps_per_byte, m.local.copy_ps_per_byte, m.fresh_ps_per_byte
    );
    let _ = writeln!(
        out,
        "  node   {} CPUs; when members outnumber them, copies share them and a rendezvous \
         round waits {} ns per member sharing a CPU; split copies from {} bytes; all-to-alls \
         by single copies whose buffers take up to {} bytes are copied by their receivers \
         (WEFT_COLL_ALLTOALL_PULLS)",
        m.cpus,
        m.oversub_ns,
        m.split_copy_min,
        weft::coll_model::alltoall_pulls(t)
    );
    let one_node = match m.path(1) {
        Path::Shm => "shm",
        Path::Tcp => "tcp (WEFT_TRANSPORTS has no shm)",
    };
    let _ = writeln!(
        out,
        "  a communicator on one node uses {one_node}; one on several nodes uses tcp"
    );
}

fn time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.2} µs", ns / 1e3)
    }
}

/// What the model predicts for `q`: a table and a `pick:` line, or an error naming the bad
/// value.
pub fn answer(out: &mut String, t: &Tunables, q: &Query) -> Result<(), String> {
    let Some(name) = &q.coll else {
        return Ok(());
    };
    let c = Collective::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Collective::ALL.iter().map(|c| c.name()).collect();
        format!("--coll {name:?} is not one of {}", names.join(", "))
    })?;
    let bytes = parse_size(&q.size)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format!("--size {:?} is not a size (e.g. 4096, 64k, 4m)", q.size))?;
    if q.members == 0 {
        return Err("--members 0: a communicator has at least 1 member".into());
    }
    if q.nodes == 0 || q.nodes > q.members {
        return Err(format!(
            "--nodes {} is not between 1 and the {} members",
            q.nodes, q.members
        ));
    }
    if q.root >= q.members {
        return Err(format!(
            "--root {} is not a member (0 to {})",
            q.root,
            q.members - 1
        ));
    }
    if q.elem == 0 {
        return Err("--elem 0: an element has at least 1 byte".into());
    }
    let shape = Shape {
        elem: q.elem,
        commutative: q.op == OpKind::Commutative,
        root: q.root,
        ..Shape::new(q.members, q.nodes, Some(bytes))
    };
    let model = Model::from_tunables(t);
    let path = match model.path(q.nodes) {
        Path::Shm => "shm",
        Path::Tcp => "tcp",
    };
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} of {bytes} bytes on {} members, {} node{} ({path} constants; {}-byte elements, a \
         {} operation, root {}):",
        c.name(),
        q.members,
        q.nodes,
        if q.nodes == 1 { "" } else { "s" },
        q.elem,
        match q.op {
            OpKind::Commutative => "commutative",
            OpKind::Noncommutative => "non-commutative",
        },
        q.root
    );
    let pick = model.pick(c, &shape);
    for e in model.estimates(c, &shape) {
        let note = match &e.ineligible {
            Some(why) => format!("not eligible: {why}"),
            None if e.algorithm == pick => "<- cheapest".into(),
            None => String::new(),
        };
        let line = format!("  {:20} {:>12}  {note}", e.algorithm, time(e.cost_ns));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let forced = t
        .current()
        .into_iter()
        .find(|(env, _)| *env == c.tunable())
        .map(|(_, v)| v)
        .filter(|v| v != "auto");
    match forced {
        Some(v) => {
            let _ = writeln!(
                out,
                "pick: {v} (forced by {}={v}; the model's pick: {pick})",
                c.tunable()
            );
        }
        None => {
            let _ = writeln!(out, "pick: {pick}");
        }
    }
    if node_aware(c, q, &model, bytes) {
        let _ = writeln!(
            out,
            "  (on several nodes with members sharing a node this collective runs node-aware: \
             through one leader per node, each part by the model's pick for it; \
             {}=<one of the above> forces the flat algorithm)",
            c.tunable()
        );
    }
    Ok(())
}

/// Whether the library runs `c` node-aware for the shape `q` describes with blocks or vectors
/// of `bytes` (see `coll/node_aware.rs`): members on several nodes, some node with two or
/// more; for a reduction a commutative operation; for a gather, scatter or all-to-all while
/// that pays.
fn node_aware(c: Collective, q: &Query, model: &Model, bytes: usize) -> bool {
    let shared = q.nodes > 1 && q.members > q.nodes;
    match c {
        Collective::Bcast | Collective::Allgather => shared,
        Collective::Gather | Collective::Scatter => {
            shared && model.rooted_node_aware_pays(q.members, q.nodes, bytes)
        }
        Collective::Reduce | Collective::Allreduce | Collective::ReduceScatter => {
            shared && q.op == OpKind::Commutative
        }
        // Taking the members as evenly spread as they can be.
        Collective::Alltoall => {
            let largest = q.members.div_ceil(q.nodes.max(1));
            shared
                && bytes > 0
                && model.alltoall_node_aware_pays(q.members, q.nodes, largest, bytes)
        }
    }
}
