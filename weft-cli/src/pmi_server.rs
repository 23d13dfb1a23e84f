//! The PMI-1 server side: one thread per rank reads that rank's commands from its socket
//! and answers them from a key-value space shared by the job.
//!
//! Puts are stored as they arrive; a barrier releases every rank once all have entered it
//! (`barrier_in` from all → `barrier_out` to all). `abort`, `init` and `finalize` are also
//! reported to the launcher's event loop.

use crate::launch::Event;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use weft::boot::pmi1::{Line, MAX_LINE};

/// What every rank's server thread shares.
pub struct Job {
    /// Number of ranks.
    pub size: u32,
    /// The key-value-space name (unique per job).
    pub kvsname: String,
    /// Value of `PMI_process_mapping`.
    pub mapping: String,
    /// Print every line received and sent to stderr.
    pub debug: bool,
    state: Mutex<State>,
    barrier_done: Condvar,
}

#[derive(Default)]
struct State {
    kvs: HashMap<String, String>,
    in_barrier: u32,
    generation: u64,
}

impl Job {
    /// A job of `size` ranks; `mapping` defaults to all on one node.
    pub fn new(size: u32, kvsname: String, mapping: Option<String>, debug: bool) -> Arc<Job> {
        Arc::new(Job {
            size,
            kvsname,
            mapping: mapping.unwrap_or_else(|| weft::boot::mapping::single_node(size)),
            debug,
            state: Mutex::new(State::default()),
            barrier_done: Condvar::new(),
        })
    }

    fn barrier(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.in_barrier += 1;
        if st.in_barrier == self.size {
            st.in_barrier = 0;
            st.generation += 1;
            self.barrier_done.notify_all();
            return;
        }
        let gen = st.generation;
        while st.generation == gen {
            st = self
                .barrier_done
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
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
                "cmd=put_result rc=0 msg=success\n".to_owned()
            }
            _ => "cmd=put_result rc=-1 msg=bad_kvsname_or_missing_key_or_value\n".to_owned(),
        },
        "barrier_in" => {
            job.barrier();
            "cmd=barrier_out\n".to_owned()
        }
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
