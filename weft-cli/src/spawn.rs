//! `weft run`'s side of PMI spawn (MPI_Comm_spawn, MPI_Comm_spawn_multiple): the event loop
//! starts the job a rank asked for ([`Spawner`]), on this host only.
//!
//! A spawned job is a PMI job of its own: key-value space `weft_<job id>` (a fresh
//! [`new_job_id`]) holding the first job's secret under [`SECRET_KEY`] and the request's
//! preput pairs, `PMI_process_mapping` `(vector,(0,1,N))`, N = the request's processes
//! (command 0's first). Its processes are ranks 0..N-1 of the new job, and indices
//! base..base+N-1 of the launcher's rank table, base = the processes the launcher had before
//! (the first job is 0..np-1). Each gets the environment of a first-job rank (`PMI_RANK`
//! its rank in the new job, `PMI_SIZE` = N, `PMI_JOBID` the new kvsname, `MPI_LOCALNRANKS` =
//! N, `MPI_LOCALRANKID` = its rank, `WEFT_JOB_ID` the new job id, every `-x`) plus
//! `PMI_SPAWNED=1`, `WEFT_UNIVERSE_BASE=<base>` and `PMI_APPNUM=<its command's index>`; its
//! own process group (the first process leads it); with `--bind-to core` it continues
//! where the universe's last process left off (index k on the k-th CPU, wrapping around).
//!
//! Info keys honoured per command: `wdir` (its working directory, relative to the
//! launcher's), `path` (`:`-separated directories searched for the program before PATH),
//! `host`/`hosts` (`,`-separated; only `localhost`, this host's name or one of its addresses
//! are accepted). Others are ignored. Before anything starts, every command is checked:
//! its program is found as execvp would (a name without `/` in `path`, then the PATH the
//! processes get; an existing file with an execute bit), its `wdir` exists, its hosts are
//! this one, and the universe with the new processes passes the host's limits
//! ([`check_ranks_here`]). The verdict is given once the new job's starter runs: a process
//! that then cannot be started ends the universe as a first-job rank would.

use crate::event::Event;
use crate::launch::{check_ranks_here, new_job_id, App, Children, Control, Outputs, Rank, Starter};
use crate::pmi_server::{Job, Place, SECRET_KEY};
use crate::pmi_spawn::{SpawnCommand, SpawnRequest};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};

/// The PATH searched when neither the launcher nor `-x` sets one (glibc's execvp default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What the local event loop needs to start spawned jobs.
pub struct Spawner {
    /// For the new jobs' starters and PMI servers.
    pub tx: mpsc::Sender<Event>,
    pub children: Arc<Children>,
    pub outputs: Outputs,
    /// Every `-x`.
    pub env: Vec<(String, String)>,
    pub tag_output: bool,
    pub pmi_debug: bool,
    /// The first job's secret (every job of the universe shares it).
    pub secret: String,
    /// `--bind-to core`'s CPUs (empty: no binding).
    pub cpus: Vec<usize>,
    /// Processes in the universe (served as `get_universe_size`).
    pub universe: Arc<AtomicU32>,
    /// The universe's published names.
    pub names: crate::pmi_server::Names,
    /// The job ids of the universe: the first job's, then each spawned job's.
    pub job_ids: Vec<String>,
}

impl Spawner {
    /// Starts the job that the rank at index `asker` asked for, adding its processes to
    /// `ctl`; `Err` (nothing started) says why not.
    pub fn spawn(
        &mut self,
        ctl: &mut Control,
        asker: usize,
        request: SpawnRequest,
    ) -> Result<(), String> {
        let base = u32::try_from(ctl.ranks.len()).map_err(|_| "too many processes".to_owned())?;
        let total = request
            .total()
            .ok_or("the commands' nprocs add up to more than 2^32")?;
        if total == 0 || request.commands.iter().any(|c| c.nprocs == 0) {
            return Err("every command must start at least one process (nprocs >= 1)".into());
        }
        let universe = base
            .checked_add(total)
            .ok_or("the universe would have more than 2^32 processes")?;
        check_ranks_here(
            universe,
            &format!("spawn of {total} process(es) beside the {base} already running"),
        )
        .map_err(|e| format!("{e:#}"))?;
        let apps = request
            .commands
            .iter()
            .map(|c| self.app(c))
            .collect::<Result<Vec<App>, String>>()?;

        let number = self.job_ids.len() as u32;
        let job_id = new_job_id();
        let kvsname = format!("weft_{job_id}");
        // The secret last: a preput cannot replace it.
        let kvs = request
            .preput
            .into_iter()
            .filter(|(k, _)| k != SECRET_KEY)
            .chain([(SECRET_KEY.to_owned(), self.secret.clone())])
            .collect();
        let mut first = 0;
        let starts = apps
            .iter()
            .map(|a| {
                let at = first;
                first += a.count;
                at
            })
            .collect();
        let place = Place {
            number,
            base,
            apps: starts,
            universe: self.universe.clone(),
            names: self.names.clone(),
        };
        let pmi = Job::spawned(total, kvsname.clone(), self.pmi_debug, kvs, place);
        let starting = Starter {
            apps,
            env: self.env.clone(),
            size: total,
            job_id: job_id.clone(),
            kvsname,
            cpus: rotated(&self.cpus, base as usize),
            ranks: (0..total).collect(),
            tag_output: self.tag_output,
            pmi,
            // Checked above, for the whole universe.
            check_limits: false,
        }
        .start(&self.tx, &self.children, &self.outputs)
        .map_err(|e| format!("{e:#}"))?;
        // The starter's events are handled after this returns: the ranks are there by then.
        ctl.ranks
            .extend((0..total).map(|r| Rank::spawned(number, r)));
        ctl.alive += total;
        ctl.starting.push(starting);
        self.universe.store(universe, Ordering::Relaxed);
        if self.pmi_debug {
            note!(
                "weft run: {} spawned job {number} ({job_id}): {total} process(es), indices \
                 {base}..{} of the universe",
                ctl.name(asker),
                universe - 1
            );
        }
        self.job_ids.push(job_id);
        Ok(())
    }

    /// The program, arguments and directory of one command, checked.
    fn app(&self, c: &SpawnCommand) -> Result<App, String> {
        let here = std::env::current_dir()
            .map_err(|e| format!("the launcher's working directory: {e}"))?;
        let mut wdir = None;
        let mut search = Vec::new();
        for (k, v) in &c.info {
            match k.as_str() {
                "wdir" => {
                    let dir = here.join(v);
                    if !dir.is_dir() {
                        return Err(format!("wdir {v:?} is not a directory"));
                    }
                    wdir = Some(dir);
                }
                "path" => search.extend(v.split(':').map(str::to_owned)),
                "host" | "hosts" => check_hosts(v)?,
                _ => {}
            }
        }
        let path = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_else(|| DEFAULT_PATH.to_owned());
        search.extend(path.split(':').map(str::to_owned));
        let dir = wdir.as_deref().unwrap_or(&here);
        Ok(App {
            program: find_program(&c.program, dir, &search)?
                .to_string_lossy()
                .into_owned(),
            args: c.args.clone(),
            cwd: wdir,
            count: c.nprocs,
        })
    }
}

/// `cpus` starting at the `skip`-th (wrapping around).
fn rotated(cpus: &[usize], skip: usize) -> Vec<usize> {
    if cpus.is_empty() {
        return Vec::new();
    }
    let k = skip % cpus.len();
    [&cpus[k..], &cpus[..k]].concat()
}

/// Finds `program` as execvp would, from directory `dir` (the processes'): a name with a
/// `/` is that file; another is looked for in each of `search` (an empty entry is `dir`).
/// Returns an absolute path to an existing file with an execute bit.
pub fn find_program(program: &str, dir: &Path, search: &[String]) -> Result<PathBuf, String> {
    if program.is_empty() {
        return Err("the program name is empty".into());
    }
    if program.contains('/') {
        let file = dir.join(program);
        return match executable(&file) {
            true => Ok(file),
            false => Err(format!(
                "cannot find program {program} (searched {}: no executable file there)",
                file.display()
            )),
        };
    }
    let found = search
        .iter()
        .map(|d| dir.join(if d.is_empty() { "." } else { d }).join(program))
        .find(|f| executable(f));
    found.ok_or_else(|| {
        let dirs: Vec<&str> = search
            .iter()
            .map(|d| if d.is_empty() { "." } else { d.as_str() })
            .collect();
        format!(
            "cannot find program {program} (searched {})",
            dirs.join(":")
        )
    })
}

/// Whether `file` is a file (symbolic links followed) with an execute bit.
fn executable(file: &Path) -> bool {
    std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Accepts an info `host`/`hosts` value naming only this host.
fn check_hosts(value: &str) -> Result<(), String> {
    for host in value
        .split([',', ' ', '\t'])
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        if !is_this_host(host) {
            return Err(format!(
                "spawn: host {host} is not this host; weft run spawns on its own host only"
            ));
        }
    }
    Ok(())
}

/// Whether `name` is `localhost`, this host's name (or its first label), or an address of
/// one of its interfaces (no name is looked up: that could block the event loop).
fn is_this_host(name: &str) -> bool {
    let me = weft::launcher::host::hostname();
    let short = |n: &str| n.split('.').next().unwrap_or("").to_ascii_lowercase();
    if name.eq_ignore_ascii_case("localhost")
        || name.eq_ignore_ascii_case(&me)
        || (!name.contains('.') && short(name) == short(&me))
    {
        return true;
    }
    let Ok(ip) = name.trim_matches(['[', ']']).parse::<std::net::IpAddr>() else {
        return false;
    };
    ip.is_loopback()
        || weft::launcher::host::interface_addrs()
            .is_ok_and(|addrs| addrs.iter().any(|a| a.addr == ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-spawn-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn programs_are_found_as_execvp_would() {
        let dir = tmp("find");
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let prog = bin.join("prog");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = bin.join("plain");
        std::fs::write(&plain, "").unwrap();
        let search = ["/nonexistent".to_owned(), "bin".to_owned()];
        assert_eq!(
            find_program("prog", &dir, &search).unwrap(),
            dir.join("bin").join("prog")
        );
        assert_eq!(
            find_program("./bin/prog", &dir, &[]).unwrap(),
            dir.join("./bin/prog")
        );
        let abs = prog.to_string_lossy().into_owned();
        assert_eq!(find_program(&abs, Path::new("/"), &[]).unwrap(), prog);
        let e = find_program("plain", &dir, &search).unwrap_err();
        assert_eq!(e, "cannot find program plain (searched /nonexistent:bin)");
        let e = find_program("bin/plain", &dir, &search).unwrap_err();
        assert!(
            e.starts_with("cannot find program bin/plain (searched "),
            "{e}"
        );
        assert!(find_program("", &dir, &search).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_this_host_is_accepted() {
        let me = weft::launcher::host::hostname();
        for ok in [
            "localhost",
            "127.0.0.1",
            "::1",
            me.as_str(),
            "localhost,127.0.0.1",
        ] {
            assert!(check_hosts(ok).is_ok(), "{ok}");
        }
        let e = check_hosts("localhost,elsewhere.invalid").unwrap_err();
        assert_eq!(
            e,
            "spawn: host elsewhere.invalid is not this host; weft run spawns on its own host only"
        );
        assert!(check_hosts("192.0.2.77").is_err());
    }

    #[test]
    fn cpus_continue_where_the_universe_left_off() {
        assert_eq!(rotated(&[4, 5, 6], 4), [5, 6, 4]);
        assert!(rotated(&[], 3).is_empty());
    }
}
