//! Bootstraps through the process manager and checks its key-value space with a ring:
//! every rank puts a value, fences, and reads its right neighbour's.
//!
//! `weft run -n 4 --example boot_probe -p weft`, or under `mpiexec.hydra -n 4`.
//!
//! Options for launcher tests (RANK applies to one rank; the others carry on normally):
//! `--abort RANK:CODE` (that rank calls PMI abort after the ring), `--skip-finalize RANK`
//! (that rank exits 0 without PMI finalize), and in both cases the other ranks then enter a
//! second fence that can never complete, so only the launcher can end the job.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut abort: Option<(u32, i32)> = None;
    let mut skip_finalize: Option<u32> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--abort" => {
                let v = args.next().unwrap_or_default();
                let (r, c) = v.split_once(':').expect("--abort RANK:CODE");
                abort = Some((r.parse().expect("rank"), c.parse().expect("code")));
            }
            "--skip-finalize" => {
                skip_finalize = Some(args.next().unwrap_or_default().parse().expect("rank"));
            }
            other => {
                eprintln!("boot_probe: unknown argument {other:?}");
                return ExitCode::from(2);
            }
        }
    }

    let mut boot = match weft::boot::Boot::from_env() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("boot_probe: {e}");
            return ExitCode::from(1);
        }
    };
    let (rank, size) = (boot.rank, boot.size);
    println!(
        "boot_probe: rank {rank} of {size}, protocol {}, job {}, nodes {:?}, local ranks {:?}",
        boot.pmi.protocol(),
        boot.job_id,
        boot.node_of,
        boot.local_ranks()
    );
    assert_eq!(
        boot.node_of.len(),
        size as usize,
        "node map covers every rank"
    );
    assert!(
        boot.local_ranks().contains(&rank),
        "a rank is local to itself"
    );

    let value = |r: u32| format!("ring-{r}-of-{size}");
    boot.pmi
        .put(&format!("ring.{rank}"), &value(rank))
        .expect("put");
    boot.pmi.fence().expect("fence");
    let right = (rank + 1) % size;
    let got = boot.pmi.get(&format!("ring.{right}")).expect("get");
    assert_eq!(got, value(right), "rank {rank} read rank {right}'s value");
    println!("boot_probe: rank {rank} ring ok (read {got:?} from rank {right})");

    let misbehave = abort.is_some() || skip_finalize.is_some();
    if let Some((r, code)) = abort {
        if r == rank {
            boot.pmi.abort(code, "boot_probe was asked to abort");
        }
    }
    if skip_finalize == Some(rank) {
        println!("boot_probe: rank {rank} exiting without PMI finalize");
        return ExitCode::SUCCESS;
    }
    if misbehave {
        // The misbehaving rank never joins: only the launcher can end this.
        match boot.pmi.fence() {
            Ok(()) => eprintln!(
                "boot_probe: rank {rank}: second fence returned; the launcher should have ended the job"
            ),
            // The process manager hung up: it is ending the job (Hydra does so on PMI-2 abort).
            Err(e) => eprintln!("boot_probe: rank {rank}: second fence failed: {e}"),
        }
        return ExitCode::from(1);
    }
    boot.pmi.finalize().expect("finalize");
    println!("boot_probe: rank {rank} finalized");
    ExitCode::SUCCESS
}
