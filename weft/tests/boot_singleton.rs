//! Bootstrap without a launcher: a singleton, and the refusals of launchers we do not speak.

use weft::boot::Boot;

#[test]
fn singleton_and_its_refusals() {
    // One test, so no other test in this binary sees the environment changing.
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "PMIX_RANK",
        "PMIX_NAMESPACE",
        "SLURM_STEP_NUM_TASKS",
    ] {
        std::env::remove_var(v);
    }
    let mut b = Boot::from_env().expect("singleton");
    assert_eq!((b.rank, b.size, b.node_of.clone()), (0, 1, vec![0]));
    assert_eq!(b.local_ranks(), vec![0]);
    assert_eq!(b.pmi.protocol(), "singleton");
    assert!(!b.job_id.is_empty());
    assert!(b
        .job_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_'));
    b.pmi.put("k", "v").unwrap();
    b.pmi.fence().unwrap();
    assert_eq!(b.pmi.get("k").unwrap(), "v");
    assert!(b.pmi.get("missing").is_err());
    b.pmi.finalize().unwrap();

    std::env::set_var("PMIX_RANK", "0");
    let e = Boot::from_env().unwrap_err();
    assert!(e.to_string().contains("PMIx"), "{e}");
    std::env::remove_var("PMIX_RANK");

    std::env::set_var("SLURM_STEP_NUM_TASKS", "4");
    let e = Boot::from_env().unwrap_err();
    assert!(e.to_string().contains("SLURM_STEP_NUM_TASKS=4"), "{e}");
    std::env::remove_var("SLURM_STEP_NUM_TASKS");

    // A PMI_FD that is not open is an error naming the variable.
    std::env::set_var("PMI_FD", "987");
    std::env::set_var("PMI_RANK", "0");
    std::env::set_var("PMI_SIZE", "1");
    let e = Boot::from_env().unwrap_err();
    assert!(e.to_string().contains("PMI_FD=987"), "{e}");
    std::env::remove_var("PMI_FD");
}
