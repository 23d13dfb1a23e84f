//! The PMI-1 server side: one thread per rank reads that rank's commands from its socket
//! and answers them from a key-value space shared by the job.
//!
//! Puts are stored as they arrive; a barrier releases every rank once all have entered it
//! (`barrier_in` from all → `barrier_out` to all). `abort`, `init` and `finalize` are also
//! reported to the launcher's event loop. On a multi-host job each host's proxy serves its
//! own ranks: its barrier completes when its ranks have entered and the [`Fence`] hook has
//! exchanged the puts with every other host.
//!
//! Spawn (`mcmd=spawn` blocks, [`crate::pmi_spawn`]): once a rank's whole request is read,
//! its server thread sends [`Event::Spawn`] to the event loop, waits for the verdict and
//! answers `cmd=spawn_result rc=0` (or `rc=-1 msg=...`, with a note on stderr). The local
//! launcher starts the new job ([`crate::spawn`]); a proxy refuses.
//!
//! A launcher's jobs form one universe: the first job and each job spawned since, each with
//! its own key-value space ([`Job`]); a job's [`Place`] says where its ranks are in the
//! launcher's rank table (their events carry that index, base + rank), which command of
//! its spawn each rank runs (`get_appnum`: 0 in the first job), and how many processes the
//! universe has now (`get_universe_size`: the first job's and every spawned job's so far;
//! the job's size under a proxy).

use crate::event::Event;
use crate::pmi_spawn::{self, Blocks, Finished};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use weft::launcher::pmi::{Line, MAX_LINE};

/// The key under which the job's secret is served (lowercase hex of 32 random bytes): TCP
/// peers prove they belong to the job with it.
pub use weft::launcher::auth::SECRET_KEY;

/// The job-wide part of a barrier: takes this server's puts since the last barrier and
/// returns every put made anywhere in the job since then (or why that failed).
pub type Fence =
    Box<dyn Fn(Vec<(String, String)>) -> Result<Vec<(String, String)>, String> + Send + Sync>;

/// Where a job sits in the launcher's universe.
#[derive(Clone, Debug)]
pub struct Place {
    /// 0 for the first job; k for the k-th job spawned.
    pub number: u32,
    /// The launcher's index of the job's rank 0 (its events carry base + rank).
    pub base: u32,
    /// The first rank of each command of the spawn that started the job, in order (empty:
    /// one command).
    pub apps: Vec<u32>,
    /// Processes in the universe so far (shared by all its jobs; the launcher adds to it).
    pub universe: Arc<AtomicU32>,
    /// Names published in the universe (`publish_name`): service → port.
    pub names: Names,
}

/// The universe's published names (MPI_Publish_name), shared by all its jobs.
pub type Names = Arc<Mutex<HashMap<String, String>>>;

impl Place {
    /// The first job's place: a universe of its `size` ranks so far.
    pub fn first(size: u32) -> Place {
        Place {
            number: 0,
            base: 0,
            apps: Vec::new(),
            universe: Arc::new(AtomicU32::new(size)),
            names: Names::default(),
        }
    }
}

/// What every rank's server thread shares.
pub struct Job {
    /// Number of ranks this server serves (= size, except under a proxy).
    pub local: u32,
    /// The key-value-space name (unique per job).
    pub kvsname: String,
    /// Value of `PMI_process_mapping`.
    pub mapping: String,
    /// Print every line received and sent to stderr.
    pub debug: bool,
    /// Where the job sits in the launcher's universe.
    pub place: Place,
    /// The job-wide exchange behind a barrier (None: every rank is served here).
    fence: Option<Fence>,
    state: Mutex<State>,
    barrier_done: Condvar,
}

#[derive(Default)]
struct State {
    kvs: HashMap<String, String>,
    /// Puts since the last barrier (for the fence hook).
    fresh: Vec<(String, String)>,
    in_barrier: u32,
    generation: u64,
    /// A failed fence: every barrier from now on fails.
    broken: Option<String>,
}

impl Job {
    /// A job of `size` ranks all served here; `mapping` defaults to all on one node. The
    /// key-value space starts with `secret` under [`SECRET_KEY`].
    pub fn new(
        size: u32,
        kvsname: String,
        mapping: Option<String>,
        debug: bool,
        secret: String,
    ) -> Arc<Job> {
        let mapping = mapping.unwrap_or_else(|| weft::launcher::mapping::single_node(size));
        Job::part(
            size,
            size,
            kvsname,
            mapping,
            debug,
            vec![(SECRET_KEY.to_owned(), secret)],
            None,
        )
    }

    /// The part of a job served by one host's proxy: `local` of its `size` ranks, a key-value
    /// space starting as `kvs`, and barriers completed through `fence`.
    pub fn part(
        size: u32,
        local: u32,
        kvsname: String,
        mapping: String,
        debug: bool,
        kvs: Vec<(String, String)>,
        fence: Option<Fence>,
    ) -> Arc<Job> {
        Arc::new(Job {
            local,
            kvsname,
            mapping,
            debug,
            place: Place::first(size),
            fence,
            state: Mutex::new(State {
                kvs: kvs.into_iter().collect(),
                ..State::default()
            }),
            barrier_done: Condvar::new(),
        })
    }

    /// A job started by PMI spawn, all served here (all on one node): `size` ranks at
    /// `place`, a key-value space starting as `kvs`.
    pub fn spawned(
        size: u32,
        kvsname: String,
        debug: bool,
        kvs: Vec<(String, String)>,
        place: Place,
    ) -> Arc<Job> {
        Arc::new(Job {
            local: size,
            kvsname,
            mapping: weft::launcher::mapping::single_node(size),
            debug,
            place,
            fence: None,
            state: Mutex::new(State {
                kvs: kvs.into_iter().collect(),
                ..State::default()
            }),
            barrier_done: Condvar::new(),
        })
    }

    /// The launcher's index of rank `rank` of this job.
    pub fn index(&self, rank: u32) -> u32 {
        self.place.base + rank
    }

    /// How messages name rank `rank`: "rank R", or "rank R of spawned job J".
    pub fn label(&self, rank: u32) -> String {
        match self.place.number {
            0 => format!("rank {rank}"),
            j => format!("rank {rank} of spawned job {j}"),
        }
    }

    /// The `--tag-output` prefix's label of rank `rank`: "R", or "J.R" in spawned job J.
    pub fn tag(&self, rank: u32) -> String {
        match self.place.number {
            0 => rank.to_string(),
            j => format!("{j}.{rank}"),
        }
    }

    /// The command of the spawn that rank `rank` runs (0 in a job not spawned).
    pub fn appnum(&self, rank: u32) -> u32 {
        let apps = &self.place.apps;
        apps.partition_point(|&first| first <= rank)
            .saturating_sub(1) as u32
    }

    /// Enters the barrier; `Err` when the job-wide fence failed.
    fn barrier(&self) -> Result<(), String> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &st.broken {
            return Err(why.clone());
        }
        st.in_barrier += 1;
        if st.in_barrier == self.local {
            if let Some(fence) = &self.fence {
                let mine = std::mem::take(&mut st.fresh);
                // Not holding the lock while the other hosts catch up: ranks here may still
                // `get` (their own puts).
                drop(st);
                let result = fence(mine);
                st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                match result {
                    Ok(all) => st.kvs.extend(all),
                    Err(why) => st.broken = Some(why),
                }
            }
            st.in_barrier = 0;
            st.generation += 1;
            self.barrier_done.notify_all();
            return st.broken.clone().map_or(Ok(()), Err);
        }
        let gen = st.generation;
        while st.generation == gen {
            st = self
                .barrier_done
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        st.broken.clone().map_or(Ok(()), Err)
    }
}

/// Serves rank `rank` of the job on `stream` until it hangs up; then reports
/// [`Event::PmiClosed`].
pub fn serve(job: Arc<Job>, rank: u32, stream: UnixStream, events: Sender<Event>) {
    let (index, label) = (job.index(rank), job.label(rank));
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            note!("weft run: {label}: cannot duplicate the PMI socket: {e}");
            let _ = events.send(Event::PmiClosed { rank: index });
            return;
        }
    };
    let mut input = BufReader::new(stream);
    let mut text = String::new();
    // A multi-line command (`mcmd=spawn`) under way.
    let mut blocks = Blocks::default();
    loop {
        text.clear();
        match input.read_line(&mut text) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if job.debug {
            note!("weft run: pmi {label} > {}", text.trim_end());
        }
        let reply = if blocks.is_open() || text.starts_with("mcmd=") {
            blocks
                .line(&text)
                .map(|done| spawn(&job, rank, done, &events))
        } else {
            handle(&job, rank, &text, &events)
        };
        if let Some(reply) = reply {
            if job.debug {
                note!("weft run: pmi {label} < {}", reply.trim_end());
            }
            debug_assert!(reply.len() <= MAX_LINE, "reply over the PMI line limit");
            if out.write_all(reply.as_bytes()).is_err() {
                break;
            }
        }
    }
    let _ = events.send(Event::PmiClosed { rank: index });
}

/// Answers a finished `mcmd` request: a spawn request goes to the event loop
/// ([`Event::Spawn`]), and this thread waits for its verdict.
fn spawn(job: &Job, rank: u32, done: Finished, events: &Sender<Event>) -> String {
    let ending = || "weft run is ending".to_owned();
    let result = done.request.and_then(|request| {
        let (reply, verdict) = mpsc::channel();
        events
            .send(Event::Spawn {
                rank: job.index(rank),
                request,
                reply,
            })
            .map_err(|_| ending())?;
        verdict.recv().map_err(|_| ending())?
    });
    if let Err(why) = &result {
        note!(
            "weft run: {} asked to spawn processes (PMI mcmd={}): refused: {why}",
            job.label(rank),
            done.mcmd
        );
    }
    pmi_spawn::reply(&done.mcmd, &result)
}

/// MPI's name service (MPI_Publish_name, MPI_Unpublish_name, MPI_Lookup_name) over the
/// universe's table: a service is published once until unpublished.
fn name_service(job: &Job, line: &Line) -> String {
    let mut names = job.place.names.lock().unwrap_or_else(|e| e.into_inner());
    let service = line.get("service").unwrap_or("");
    match (line.cmd.as_str(), line.get("port")) {
        ("publish_name", Some(port)) if !service.is_empty() => match names.get(service) {
            Some(_) => {
                format!("cmd=publish_result rc=-1 msg=service_{service}_is_already_published\n")
            }
            None => {
                names.insert(service.to_owned(), port.to_owned());
                "cmd=publish_result rc=0 msg=success\n".to_owned()
            }
        },
        ("unpublish_name", _) => match names.remove(service) {
            Some(_) => "cmd=unpublish_result rc=0 msg=success\n".to_owned(),
            None => format!("cmd=unpublish_result rc=-1 msg=service_{service}_is_not_published\n"),
        },
        ("lookup_name", _) => match names.get(service) {
            Some(port) => format!("cmd=lookup_result rc=0 msg=success port={port}\n"),
            None => format!("cmd=lookup_result rc=-1 msg=service_{service}_is_not_published\n"),
        },
        (cmd, _) => format!(
            "cmd={}_result rc=-1 msg=missing_service_or_port\n",
            cmd.trim_end_matches("_name")
        ),
    }
}

fn handle(job: &Job, job_rank: u32, text: &str, events: &Sender<Event>) -> Option<String> {
    // Events carry the launcher's index of the rank.
    let rank = job.index(job_rank);
    let Some(line) = Line::parse(text) else {
        note!(
            "weft run: {} sent a malformed PMI line {:?}; ignoring it",
            job.label(job_rank),
            text.trim_end()
        );
        return None;
    };
    Some(match line.cmd.as_str() {
        "init" => {
            let version = line.get("pmi_version").unwrap_or("1");
            if version != "1" {
                // Weft's client offers PMI-2 first and falls back on this refusal (the
                // version we serve, rc != 0), so it is routine, not worth a note.
                return Some(format!(
                    "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 \
                     msg=weft_run_serves_PMI-1_not_{version}\n"
                ));
            }
            let _ = events.send(Event::PmiInit { rank });
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".to_owned()
        }
        "get_maxes" => format!(
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max={}\n",
            MAX_LINE
        ),
        "get_appnum" => format!("cmd=appnum appnum={}\n", job.appnum(job_rank)),
        "get_universe_size" => format!(
            "cmd=universe_size size={}\n",
            job.place.universe.load(Ordering::Relaxed)
        ),
        "get_my_kvsname" => format!("cmd=my_kvsname kvsname={}\n", job.kvsname),
        "publish_name" | "unpublish_name" | "lookup_name" => name_service(job, &line),
        "put" => match (line.get("key"), line.get("value")) {
            (Some(k), Some(v)) if line.get("kvsname") == Some(job.kvsname.as_str()) => {
                let mut st = job.state.lock().unwrap_or_else(|e| e.into_inner());
                st.kvs.insert(k.to_owned(), v.to_owned());
                if job.fence.is_some() {
                    st.fresh.push((k.to_owned(), v.to_owned()));
                }
                "cmd=put_result rc=0 msg=success\n".to_owned()
            }
            _ => "cmd=put_result rc=-1 msg=bad_kvsname_or_missing_key_or_value\n".to_owned(),
        },
        "barrier_in" => match job.barrier() {
            Ok(()) => "cmd=barrier_out\n".to_owned(),
            Err(why) => {
                note!(
                    "weft: {}: the job-wide PMI barrier failed: {why}",
                    job.label(job_rank)
                );
                "cmd=barrier_out rc=-1\n".to_owned()
            }
        },
        "get" => {
            let key = line.get("key").unwrap_or("");
            let value = if line.get("kvsname") != Some(job.kvsname.as_str()) {
                None
            } else if key == "PMI_process_mapping" {
                // An empty mapping is served as absent, as Hydra does when it has none.
                Some(job.mapping.clone()).filter(|m| !m.is_empty())
            } else {
                let st = job.state.lock().unwrap_or_else(|e| e.into_inner());
                st.kvs.get(key).cloned()
            };
            match value {
                Some(v) => format!("cmd=get_result rc=0 msg=success value={v}\n"),
                None => format!("cmd=get_result rc=-1 msg=key_{key}_not_found\n"),
            }
        }
        "finalize" => {
            let _ = events.send(Event::PmiFinalize { rank });
            "cmd=finalize_ack\n".to_owned()
        }
        "abort" => {
            let code = line
                .get("exitcode")
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(1);
            let _ = events.send(Event::PmiAbort { rank, code });
            return None;
        }
        other => {
            note!(
                "weft run: {} sent PMI command {other:?}, which weft run does not serve: {:?}",
                job.label(job_rank),
                text.trim_end()
            );
            format!("cmd={other}_result rc=-1 msg=unknown_command\n")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;

    fn ask(job: &Job, rank: u32, line: &str) -> String {
        let (tx, _rx) = mpsc::channel();
        handle(job, rank, line, &tx).unwrap_or_default()
    }

    #[test]
    fn the_secret_is_served_from_the_start() {
        let job = Job::new(2, "kvs".into(), None, false, "00ab".into());
        assert_eq!(
            ask(&job, 0, "cmd=get kvsname=kvs key=weft-job-secret\n"),
            "cmd=get_result rc=0 msg=success value=00ab\n"
        );
    }

    #[test]
    fn a_spawned_job_serves_its_appnums_its_preput_and_the_universe_size() {
        let universe = Arc::new(AtomicU32::new(5));
        let place = Place {
            number: 2,
            base: 3,
            apps: vec![0, 2],
            universe: universe.clone(),
            names: Names::default(),
        };
        let kvs = vec![("PARENT_KEY".into(), "v=1".into())];
        let job = Job::spawned(3, "kvs2".into(), false, kvs, place);
        let appnums: Vec<String> = (0..3).map(|r| ask(&job, r, "cmd=get_appnum\n")).collect();
        assert_eq!(
            appnums,
            [
                "cmd=appnum appnum=0\n",
                "cmd=appnum appnum=0\n",
                "cmd=appnum appnum=1\n"
            ]
        );
        assert_eq!(
            ask(&job, 1, "cmd=get kvsname=kvs2 key=PARENT_KEY\n"),
            "cmd=get_result rc=0 msg=success value=v=1\n"
        );
        assert!(
            ask(&job, 0, "cmd=get kvsname=kvs2 key=PMI_process_mapping\n")
                .contains("value=(vector,(0,1,3))")
        );
        universe.store(9, Ordering::Relaxed);
        assert_eq!(
            ask(&job, 0, "cmd=get_universe_size\n"),
            "cmd=universe_size size=9\n"
        );
        assert_eq!(
            (job.index(1), job.label(1), job.tag(1)),
            (4, "rank 1 of spawned job 2".into(), "2.1".into())
        );
        let (tx, rx) = mpsc::channel();
        handle(&job, 2, "cmd=init pmi_version=1\n", &tx);
        assert!(matches!(rx.try_recv(), Ok(Event::PmiInit { rank: 5 })));
    }

    #[test]
    fn a_spawn_request_goes_to_the_event_loop_and_its_verdict_to_the_rank() {
        use std::io::BufRead;
        let job = Job::new(2, "kvs".into(), None, false, "00".into());
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel();
        let server = {
            let job = job.clone();
            thread::spawn(move || serve(job, 1, theirs, tx))
        };
        let mut reader = std::io::BufReader::new(ours.try_clone().unwrap());
        let mut out = ours;
        let block = |i: u32, prog: &str| {
            format!(
                "mcmd=spawn\nnprocs=1\nexecname={prog}\ntotspawns=2\nspawnssofar={i}\n\
                 argcnt=0\npreput_num=0\ninfo_num=0\nendcmd\n"
            )
        };
        let mut line = String::new();
        for verdict in [
            Ok(()),
            Err("cannot find program b (searched /x)".to_owned()),
        ] {
            out.write_all(block(1, "a").as_bytes()).unwrap();
            out.write_all(block(2, "b").as_bytes()).unwrap();
            match rx.recv().unwrap() {
                Event::Spawn {
                    rank,
                    request,
                    reply,
                } => {
                    assert_eq!(rank, 1);
                    assert_eq!(request.commands.len(), 2);
                    reply.send(verdict.clone()).unwrap();
                }
                other => panic!("{other:?}"),
            }
            line.clear();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, pmi_spawn::reply("spawn", &verdict));
        }
        // Still served line by line afterwards.
        out.write_all(b"cmd=get_appnum\n").unwrap();
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, "cmd=appnum appnum=0\n");
        drop(out);
        drop(reader);
        server.join().unwrap();
        assert!(matches!(rx.recv(), Ok(Event::PmiClosed { rank: 1 })));
    }

    #[test]
    fn a_proxy_barrier_sends_local_puts_and_takes_everyone_s() {
        let (seen_tx, seen_rx) = mpsc::channel();
        let fence: Fence = Box::new(move |mine| {
            seen_tx.send(mine.clone()).unwrap();
            let mut all = mine;
            all.push(("from-other-host".into(), "v9".into()));
            Ok(all)
        });
        let job = Job::part(
            4,
            2,
            "kvs".into(),
            "(vector,(0,2,2))".into(),
            false,
            vec![],
            Some(fence),
        );
        let threads: Vec<_> = [1u32, 3]
            .into_iter()
            .map(|rank| {
                let job = job.clone();
                thread::spawn(move || {
                    let put = format!("cmd=put kvsname=kvs key=k{rank} value=v{rank}\n");
                    assert!(ask(&job, rank, &put).contains("rc=0"));
                    ask(&job, rank, "cmd=barrier_in\n")
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), "cmd=barrier_out\n");
        }
        let mut sent = seen_rx.recv().unwrap();
        sent.sort();
        assert_eq!(
            sent,
            [("k1".into(), "v1".into()), ("k3".into(), "v3".into())]
        );
        assert!(seen_rx.try_recv().is_err(), "one fence per barrier");
        assert!(ask(&job, 1, "cmd=get kvsname=kvs key=from-other-host\n").contains("value=v9"));
        assert!(
            ask(&job, 3, "cmd=get kvsname=kvs key=PMI_process_mapping\n")
                .contains("value=(vector,(0,2,2))")
        );
    }

    #[test]
    fn a_failed_fence_fails_the_barrier() {
        let fence: Fence = Box::new(|_| Err("the head is gone".into()));
        let job = Job::part(
            2,
            1,
            "kvs".into(),
            String::new(),
            false,
            vec![],
            Some(fence),
        );
        assert_eq!(ask(&job, 0, "cmd=barrier_in\n"), "cmd=barrier_out rc=-1\n");
        assert_eq!(ask(&job, 0, "cmd=barrier_in\n"), "cmd=barrier_out rc=-1\n");
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    fn ask(job: &Job, line: &str) -> String {
        handle(job, 0, line, &mpsc::channel().0).unwrap()
    }

    #[test]
    fn names_are_published_looked_up_and_unpublished_once() {
        let job = Job::new(1, "kvs".into(), None, false, "00".into());
        let publish = "cmd=publish_name service=svc port=weft-port:127.0.0.1:9\n";
        assert_eq!(ask(&job, publish), "cmd=publish_result rc=0 msg=success\n");
        assert!(ask(&job, publish).contains("rc=-1 msg=service_svc_is_already_published"));
        assert_eq!(
            ask(&job, "cmd=lookup_name service=svc\n"),
            "cmd=lookup_result rc=0 msg=success port=weft-port:127.0.0.1:9\n"
        );
        assert_eq!(
            ask(&job, "cmd=unpublish_name service=svc\n"),
            "cmd=unpublish_result rc=0 msg=success\n"
        );
        assert!(ask(&job, "cmd=lookup_name service=svc\n").contains("rc=-1"));
        assert!(ask(&job, "cmd=unpublish_name service=svc\n").contains("rc=-1"));
        assert!(ask(&job, "cmd=publish_name service=svc\n").contains("missing_service_or_port"));
    }
}
