//! Dynamic processes (MPI 4.1 chapter 11) in rsmpi's shape: a root spawns a new job with
//! [`Process::spawn`] or [`Process::spawn_multiple`] and gets an [`InterCommunicator`] with
//! it; the new job finds the same through [`SimpleCommunicator::parent`]. Two jobs (or two
//! groups of one) also meet at a [`Port`]: one group accepts ([`SimpleCommunicator::accept`]),
//! the other connects ([`SimpleCommunicator::connect`]).
//!
//! Spawning needs `weft run`: it starts the new job on its own host, with the secret that
//! lets the jobs' processes prove to each other that they belong together. Processes of
//! different jobs talk over TCP (loopback on one host), not shared memory.

use super::{AsCommunicator, InterCommunicator, Process, Rank, SimpleCommunicator};
use crate::boot::NameCall;
pub use crate::boot::SpawnCommand;
use crate::comm::dynamic::{self, Meet};
use crate::comm::port;
use crate::error::{Error, ErrorClass, MpiError, Result};
use crate::runtime;
use std::process::Command;

/// An open port (MPI_Open_port): its [`name`](Port::name) lets another group
/// [`connect`](SimpleCommunicator::connect) to a group that
/// [`accept`](SimpleCommunicator::accept)s at it. Dropping it closes it (MPI_Close_port).
#[derive(Debug)]
pub struct Port(port::Port);

impl Port {
    /// Opens a port on this process.
    pub fn open() -> Result<Port> {
        runtime::with_call("open_port", |rt| {
            let one_node = rt.boot.node_of.iter().all(|&n| n == rt.boot.node_of[0]);
            port::Port::open(&rt.tunables, one_node)
        })
        .map(Port)
    }

    /// Its name, to hand to the connecting group.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}

/// Publishes `port_name` under `service` for the whole universe (MPI_Publish_name), so
/// that [`lookup_name`] finds it. A service is published once until unpublished.
pub fn publish_name(service: &str, port_name: &str) -> Result<()> {
    let call = NameCall::Publish {
        service,
        port: port_name,
    };
    runtime::with_call("publish_name", |rt| rt.boot.pmi.name_service(call)).map(drop)
}

/// Withdraws `service` (MPI_Unpublish_name).
pub fn unpublish_name(service: &str) -> Result<()> {
    let call = NameCall::Unpublish { service };
    runtime::with_call("unpublish_name", |rt| rt.boot.pmi.name_service(call)).map(drop)
}

/// The port published under `service` (MPI_Lookup_name).
pub fn lookup_name(service: &str) -> Result<String> {
    let call = NameCall::Lookup { service };
    let port = runtime::with_call("lookup_name", |rt| rt.boot.pmi.name_service(call))?;
    port.ok_or_else(|| {
        Error::new(
            ErrorClass::Name,
            "lookup_name",
            format!("the process manager found {service:?} but gave no port"),
        )
    })
}

/// A spawn command as the process manager takes it.
fn spawn_command(call: &'static str, c: &Command, maxprocs: Rank) -> Result<SpawnCommand> {
    // A count of 0 is refused with the others' checks, in `spawn_commands`.
    let maxprocs = u32::try_from(maxprocs).map_err(|_| {
        Error::new(
            ErrorClass::Arg,
            call,
            format!("maxprocs is {maxprocs}; at least 1 process must be spawned"),
        )
    })?;
    if c.get_envs().len() != 0 {
        return Err(Error::unsupported(
            call,
            "the command sets environment variables, which spawn cannot pass on (as rsmpi)",
        ));
    }
    let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    Ok(SpawnCommand {
        program: text(c.get_program()),
        args: c.get_args().map(text).collect(),
        maxprocs,
        info: c
            .get_current_dir()
            .map(|d| ("wdir".to_owned(), d.to_string_lossy().into_owned()))
            .into_iter()
            .collect(),
    })
}

impl Process<'_> {
    /// Spawns `maxprocs` processes running `command` as a new job (MPI_Comm_spawn), this
    /// process being the root that names them. Collective over the communicator: every
    /// member calls it with the same root. The new job's world is the other group of the
    /// returned intercommunicator.
    pub fn spawn(
        &self,
        command: &Command,
        maxprocs: Rank,
    ) -> std::result::Result<InterCommunicator, MpiError> {
        self.spawn_multiple(std::slice::from_ref(command), &[maxprocs])
    }

    /// Spawns one new job of `commands` as the process manager takes them (program,
    /// arguments, process count and info keys: `wdir`, `path`, `host`), significant at
    /// the root only, where an `Err` (the caller found the arguments bad) fails the call at
    /// every member with that error: the C ABI's way in. Collective as
    /// [`spawn`](Self::spawn).
    pub fn spawn_commands(
        &self,
        commands: std::result::Result<&[SpawnCommand], Error>,
    ) -> Result<InterCommunicator> {
        const CALL: &str = "spawn";
        let comm = self.comm;
        comm.check_rank(CALL, self.rank)?;
        let bad = |c: &SpawnCommand| {
            Error::new(
                ErrorClass::Arg,
                CALL,
                format!(
                    "maxprocs is 0 for {:?}; at least 1 process must be spawned",
                    c.program
                ),
            )
        };
        let meet = (comm.rank as Rank == self.rank).then(|| match commands {
            Err(e) => Meet::Fail(e),
            Ok([]) => Meet::Fail(Error::new(ErrorClass::Arg, CALL, "no command to spawn")),
            Ok(cmds) => match cmds.iter().find(|c| c.maxprocs == 0) {
                Some(c) => Meet::Fail(bad(c)),
                None => Meet::Spawn(cmds),
            },
        });
        let data = runtime::with_call(CALL, |rt| {
            dynamic::join(CALL, rt.joining(), comm, self.rank as u32, meet)
        })?;
        Ok(InterCommunicator(SimpleCommunicator::user(data)))
    }

    /// Spawns one new job running several commands, `maxprocs[i]` processes of
    /// `commands[i]`, in order (MPI_Comm_spawn_multiple). Collective as
    /// [`spawn`](Self::spawn).
    pub fn spawn_multiple(
        &self,
        commands: &[Command],
        maxprocs: &[Rank],
    ) -> std::result::Result<InterCommunicator, MpiError> {
        const CALL: &str = "spawn";
        if commands.len() != maxprocs.len() {
            return Err(Error::new(
                ErrorClass::Arg,
                CALL,
                format!(
                    "{} commands but {} process counts",
                    commands.len(),
                    maxprocs.len()
                ),
            )
            .into());
        }
        // The commands matter at the root only (MPI): the others pass what they like. A bad
        // one fails the call at every member (the root's failure is broadcast).
        let at_root = self.comm.rank as Rank == self.rank;
        let cmds: Result<Vec<SpawnCommand>> = match at_root {
            true => commands
                .iter()
                .zip(maxprocs)
                .map(|(c, &n)| spawn_command(CALL, c, n))
                .collect(),
            false => Ok(Vec::new()),
        };
        Ok(self.spawn_commands(cmds.as_deref().map_err(Clone::clone))?)
    }
}

impl SimpleCommunicator {
    /// The intercommunicator with the job that spawned this one (MPI_Comm_get_parent), or
    /// `None` when this job was not spawned.
    pub fn parent(&self) -> Option<InterCommunicator> {
        let data = runtime::with_call("parent", |rt| rt.parent.clone())?;
        Some(InterCommunicator(SimpleCommunicator::borrowed(data)))
    }

    /// Waits at `port` (significant at `root` only) for another group to
    /// [`connect`](Self::connect), and joins it (MPI_Comm_accept). Collective over this
    /// communicator.
    pub fn accept(&self, port: Option<&Port>, root: Rank) -> Result<InterCommunicator> {
        self.meet("accept", root, port.map(|p| Meet::Accept(&p.0)))
    }

    /// Joins the group accepting at the port named `port_name` (significant at `root`
    /// only) (MPI_Comm_connect). Collective over this communicator.
    pub fn connect(&self, port_name: Option<&str>, root: Rank) -> Result<InterCommunicator> {
        self.meet("connect", root, port_name.map(Meet::Connect))
    }

    fn meet(
        &self,
        call: &'static str,
        root: Rank,
        meet: Option<Meet<'_>>,
    ) -> Result<InterCommunicator> {
        let comm = self.comm_data();
        comm.check_rank(call, root)?;
        let meet = match (comm.rank as Rank == root, meet) {
            (true, None) => Some(Meet::Fail(Error::new(
                ErrorClass::Port,
                call,
                format!("the root (rank {root}) must name a port (for accept, one it opened)"),
            ))),
            (true, m) => m,
            (false, _) => None,
        };
        let data = runtime::with_call(call, |rt| {
            dynamic::join(call, rt.joining(), comm, root as u32, meet)
        })?;
        Ok(InterCommunicator(SimpleCommunicator::user(data)))
    }
}
