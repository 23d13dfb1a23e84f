//! The PMI-1 server side: one thread per rank reads that rank's commands from its socket
//! and answers them from a key-value space shared by the job.
//!
//! Puts are stored as they arrive; a barrier releases every rank once all have entered it
//! (`barrier_in` from all → `barrier_out` to all). `abort`, `init` and `finalize` are also
//! reported to the launcher's event loop. On a multi-host job each host's proxy serves its
//! own ranks: its barrier completes when its ranks have entered and the [`Fence`] hook has
//! exchanged the puts with every other host.

use crate::event::Event;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use weft::launcher::pmi::{Line, MAX_LINE};

/// The key under which the job's secret is served (lowercase hex of 32 random bytes): TCP
/// peers prove they belong to the job with it.
pub use weft::launcher::auth::SECRET_KEY;

/// The job-wide part of a barrier: takes this server's puts since the last barrier and
/// returns every put made anywhere in the job since then (or why that failed).
pub type Fence =
    Box<dyn Fn(Vec<(String, String)>) -> Result<Vec<(String, String)>, String> + Send + Sync>;

/// What every rank's server thread shares.
pub struct Job {
    /// Number of ranks in the job.
    pub size: u32,
    /// Number of ranks this server serves (= size, except under a proxy).
    pub local: u32,
    /// The key-value-space name (unique per job).
    pub kvsname: String,
    /// Value of `PMI_process_mapping`.
    pub mapping: String,
    /// Print every line received and sent to stderr.
    pub debug: bool,
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
            size,
            local,
            kvsname,
            mapping,
            debug,
            fence,
            state: Mutex::new(State {
                kvs: kvs.into_iter().collect(),
                ..State::default()
            }),
            barrier_done: Condvar::new(),
        })
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

/// Serves rank `rank` on `stream` until it hangs up; then reports [`Event::PmiClosed`].
pub fn serve(job: Arc<Job>, rank: u32, stream: UnixStream, events: Sender<Event>) {
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            note!("weft run: rank {rank}: cannot duplicate the PMI socket: {e}");
            let _ = events.send(Event::PmiClosed { rank });
            return;
        }
    };
    let mut input = BufReader::new(stream);
    let mut text = String::new();
    loop {
        text.clear();
        match input.read_line(&mut text) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if job.debug {
            note!("weft run: pmi rank {rank} > {}", text.trim_end());
        }
        let reply = handle(&job, rank, &text, &events);
        if let Some(reply) = reply {
            if job.debug {
                note!("weft run: pmi rank {rank} < {}", reply.trim_end());
            }
            debug_assert!(reply.len() <= MAX_LINE, "reply over the PMI line limit");
            if out.write_all(reply.as_bytes()).is_err() {
                break;
            }
        }
    }
    let _ = events.send(Event::PmiClosed { rank });
}

fn handle(job: &Job, rank: u32, text: &str, events: &Sender<Event>) -> Option<String> {
    let Some(line) = Line::parse(text) else {
        note!(
            "weft run: rank {rank} sent a malformed PMI line {:?}; ignoring it",
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
        "get_appnum" => "cmd=appnum appnum=0\n".to_owned(),
        "get_universe_size" => format!("cmd=universe_size size={}\n", job.size),
        "get_my_kvsname" => format!("cmd=my_kvsname kvsname={}\n", job.kvsname),
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
                note!("weft: rank {rank}: the job-wide PMI barrier failed: {why}");
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
                "weft run: rank {rank} sent PMI command {other:?}, which weft run does not \
                 serve: {:?}",
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
