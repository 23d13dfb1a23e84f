//! The PMI-2 client against fake servers over a socket pair: framing in both alignments,
//! lookups by name, refusal and fallback, bad replies.

use super::*;
use crate::boot::select::{negotiate, start, Either};
use crate::tunables::PmiChoice;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;

/// How the fake server frames its replies.
#[derive(Clone, Copy)]
enum Align {
    /// Hydra: `%6d`.
    Right,
    /// Slurm: `%-6d`.
    Left,
}

fn frame(align: Align, body: &str) -> String {
    match align {
        Align::Right => format!("{:>6}{body}", body.len()),
        Align::Left => format!("{:<6}{body}", body.len()),
    }
}

/// A reply: a body to frame, or raw bytes to send as they are, or nothing.
enum Reply {
    Body(String),
    Raw(String),
    None,
}

/// A fake server: answers the PMI-1 init line with `init_reply`, then each framed message
/// with `handler`'s reply. Returns every body it received when the client hangs up.
fn fake_server(
    init_reply: &'static str,
    align: Align,
    mut handler: impl FnMut(&Msg) -> Reply + Send + 'static,
) -> (Box<dyn Stream>, thread::JoinHandle<Vec<String>>) {
    let (client, server) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut seen = Vec::new();
        let mut w = server.try_clone().unwrap();
        let mut r = BufReader::new(server);
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            return seen;
        }
        seen.push(line.trim_end().to_owned());
        w.write_all(init_reply.as_bytes()).unwrap();
        if !init_reply.contains("pmi_version=2") || !init_reply.contains("rc=0") {
            // A refused offer: the client continues in PMI-1.
            line.clear();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                seen.push(line.trim_end().to_owned());
                let l = pmi1::Line::parse(&line).unwrap();
                let reply = match l.cmd.as_str() {
                    "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                    "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
                    "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_1\n",
                    "get_appnum" => "cmd=appnum appnum=0\n",
                    "get" => "cmd=get_result rc=0 value=(vector,(0,1,1))\n",
                    _ => "cmd=unknown rc=-1\n",
                };
                w.write_all(reply.as_bytes()).unwrap();
                line.clear();
            }
            return seen;
        }
        loop {
            let mut len = [0u8; 6];
            if r.read_exact(&mut len).is_err() {
                break;
            }
            let n = parse_len(&len).expect("client sent a length prefix");
            let mut body = vec![0u8; n];
            r.read_exact(&mut body).unwrap();
            let body = String::from_utf8(body).unwrap();
            let msg = Msg::parse(&body).expect("client sent a parsable message");
            seen.push(body);
            match handler(&msg) {
                Reply::Body(b) => w.write_all(frame(align, &b).as_bytes()).unwrap(),
                Reply::Raw(b) => w.write_all(b.as_bytes()).unwrap(),
                Reply::None => {}
            }
        }
        seen
    });
    (Box::new(client), t)
}

const ACCEPT: &str = "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";

/// A well-behaved PMI-2 server for rank 1 of 4, with a key-value space.
fn standard(mapping: Option<&'static str>) -> impl FnMut(&Msg) -> Reply + Send {
    let mut kvs: HashMap<String, String> = HashMap::new();
    move |m| {
        let body = match m.cmd.as_str() {
            // Keys in an unusual order, to check lookup by name.
            "fullinit" => "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;size=4;rank=1;\
                           appnum=0;debugged=FALSE;pmiverbose=0;rc=0;"
                .to_owned(),
            "job-getid" => "cmd=job-getid-response;rc=0;jobid=kvs_42_0;".to_owned(),
            "info-getjobattr" => match (m.get("key"), mapping) {
                (Some("PMI_process_mapping"), Some(v)) => {
                    format!("cmd=info-getjobattr-response;found=TRUE;value={v};rc=0;")
                }
                _ => "cmd=info-getjobattr-response;found=FALSE;rc=0;".to_owned(),
            },
            "kvs-put" => {
                kvs.insert(m.get("key").unwrap().into(), m.get("value").unwrap().into());
                "cmd=kvs-put-response;rc=0;".to_owned()
            }
            "kvs-fence" => "cmd=kvs-fence-response;rc=0;".to_owned(),
            "kvs-get" => match kvs.get(m.get("key").unwrap()) {
                Some(v) => format!("cmd=kvs-get-response;found=TRUE;value={v};rc=0;"),
                None => "cmd=kvs-get-response;found=FALSE;rc=0;".to_owned(),
            },
            "finalize" => "cmd=finalize-response;rc=0;".to_owned(),
            "abort" => return Reply::None,
            other => panic!("unexpected command {other}"),
        };
        Reply::Body(body)
    }
}

fn accepted(init: Result<Init>) -> Pmi2 {
    match init.unwrap() {
        Init::Accepted(p) => p,
        Init::Refused(_, why) => panic!("refused: {why}"),
    }
}

#[test]
fn message_parsing_and_framing() {
    let m = Msg::parse("cmd=kvs-get-response;found=TRUE;value=a=b;rc=0;").unwrap();
    assert_eq!(m.cmd, "kvs-get-response");
    assert_eq!(m.get("value"), Some("a=b"));
    assert_eq!(m.get("rc"), Some("0"));
    assert!(m.found());
    // No trailing `;`, cmd not first.
    let m = Msg::parse("rc=0;cmd=x;found=false").unwrap();
    assert_eq!(m.cmd, "x");
    assert!(!m.found());
    assert!(Msg::parse("found=TRUE;").is_none(), "no cmd");
    assert!(Msg::parse("cmd=x;junk;").is_none(), "a field without =");

    let m = Msg::new("kvs-put", &[("key", "k"), ("value", "v")]);
    assert_eq!(m.body(), "cmd=kvs-put;key=k;value=v;");
    assert_eq!(m.frame(), "26    cmd=kvs-put;key=k;value=v;");
    assert_eq!(Msg::parse(&m.body()).unwrap(), m);

    assert_eq!(parse_len(b"    26"), Some(26));
    assert_eq!(parse_len(b"26    "), Some(26));
    assert_eq!(parse_len(b"000026"), Some(26));
    assert_eq!(parse_len(b"cmd=in"), None);
    assert_eq!(parse_len(b"      "), None);
}

fn full_conversation(align: Align) {
    let (conn, server) = fake_server(ACCEPT, align, standard(Some("(vector,(0,2,2))")));
    let mut pmi = accepted(Pmi2::init(conn, 1));
    assert_eq!((pmi.size(), pmi.appnum(), pmi.jobid()), (4, 0, "kvs_42_0"));
    assert_eq!(pmi.protocol(), "pmi-2");
    assert_eq!(
        pmi.job_attr("PMI_process_mapping").unwrap().as_deref(),
        Some("(vector,(0,2,2))")
    );
    assert_eq!(pmi.job_attr("PMI_other").unwrap(), None);
    pmi.put("k1", "dGVzdA==").unwrap();
    pmi.fence().unwrap();
    assert_eq!(pmi.get("k1").unwrap(), "dGVzdA==");
    assert_eq!(pmi.try_get("nope").unwrap(), None);
    let e = pmi.get("nope").unwrap_err();
    assert!(
        e.detail.contains("nope") && e.detail.contains("kvs_42_0"),
        "{e}"
    );
    pmi.finalize().unwrap();
    pmi.finalize().unwrap(); // idempotent
    let e = pmi.put("k", "v").unwrap_err();
    assert!(e.detail.contains("after PMI finalize"), "{e}");
    drop(pmi);
    let seen = server.join().unwrap();
    assert_eq!(seen[0], "cmd=init pmi_version=2 pmi_subversion=0");
    assert_eq!(seen[1], "cmd=fullinit;pmirank=1;threaded=FALSE;");
    assert!(seen.contains(&"cmd=kvs-put;key=k1;value=dGVzdA==;".to_string()));
    assert!(seen.contains(&"cmd=kvs-get;srcid=-1;key=k1;".to_string()));
    // Every fence is followed by a get that waits for it (Hydra answers the fence at once).
    let fence = seen.iter().position(|b| b == "cmd=kvs-fence;").unwrap();
    assert_eq!(
        seen[fence + 1],
        "cmd=kvs-get;srcid=-1;key=weft-fence-barrier;"
    );
    assert_eq!(seen.last().unwrap(), "cmd=finalize;");
}

#[test]
fn conversation_with_right_aligned_lengths_like_hydra() {
    full_conversation(Align::Right);
}

#[test]
fn conversation_with_left_aligned_lengths_like_slurm() {
    full_conversation(Align::Left);
}

#[test]
fn boot_reads_the_mapping_as_a_job_attribute() {
    let (conn, _s) = fake_server(ACCEPT, Align::Right, standard(Some("(vector,(0,2,2))")));
    let boot = start(conn, 1, 4, PmiChoice::Auto).unwrap();
    assert_eq!(boot.node_of, vec![0, 0, 1, 1]);
    assert_eq!(boot.local_ranks(), vec![0, 1]);
    assert_eq!(boot.pmi.protocol(), "pmi-2");

    // The launcher's PMI_SIZE and the server's size must agree.
    let (conn, _s) = fake_server(ACCEPT, Align::Right, standard(Some("(vector,(0,2,2))")));
    let e = start(conn, 1, 8, PmiChoice::Auto).unwrap_err();
    assert!(
        e.detail.contains("4 ranks") && e.detail.contains("PMI_SIZE=8"),
        "{e}"
    );
}

#[test]
fn replies_split_across_reads_and_joined_in_one() {
    // The fullinit reply arrives in pieces (one split inside the length prefix); the
    // job-getid reply arrives in one write with the reply to the next command.
    let (client, server) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut w = server.try_clone().unwrap();
        let mut r = BufReader::new(server);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        w.write_all(ACCEPT.as_bytes()).unwrap();
        let read_msg = |r: &mut BufReader<UnixStream>| {
            let mut len = [0u8; 6];
            r.read_exact(&mut len).unwrap();
            let mut body = vec![0u8; parse_len(&len).unwrap()];
            r.read_exact(&mut body).unwrap();
        };
        read_msg(&mut r); // fullinit
        let full = frame(Align::Left, "cmd=fullinit-response;rank=0;size=1;rc=0;");
        for piece in [&full[..3], &full[3..10], &full[10..]] {
            w.write_all(piece.as_bytes()).unwrap();
            thread::sleep(std::time::Duration::from_millis(10));
        }
        read_msg(&mut r); // job-getid
        let two = frame(Align::Right, "cmd=job-getid-response;jobid=j;rc=0;")
            + &frame(
                Align::Right,
                "cmd=info-getjobattr-response;found=FALSE;rc=0;",
            );
        w.write_all(two.as_bytes()).unwrap();
        read_msg(&mut r); // info-getjobattr, already answered
    });
    let mut pmi = accepted(Pmi2::init(Box::new(client), 0));
    assert_eq!(pmi.jobid(), "j");
    assert_eq!(pmi.job_attr("PMI_process_mapping").unwrap(), None);
    t.join().unwrap();
}

#[test]
fn refused_offer_falls_back_to_pmi1_in_auto_only() {
    // What `weft run` answers to a PMI-2 init.
    const REFUSE: &str = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n";
    let (conn, server) = fake_server(REFUSE, Align::Right, |_| Reply::None);
    let boot = start(conn, 0, 1, PmiChoice::Auto).unwrap();
    assert_eq!(boot.pmi.protocol(), "pmi-1");
    assert_eq!(boot.node_of, vec![0]);
    drop(boot);
    let seen = server.join().unwrap();
    assert_eq!(seen[0], "cmd=init pmi_version=2 pmi_subversion=0");
    assert_eq!(seen[1], "cmd=init pmi_version=1 pmi_subversion=1");

    // A server that answers rc=0 but version 1 is a refusal too.
    const OLD: &str = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n";
    let (conn, _s) = fake_server(OLD, Align::Right, |_| Reply::None);
    assert!(matches!(
        negotiate(conn, 0, PmiChoice::Auto).unwrap(),
        Either::V1(_)
    ));

    let (conn, _s) = fake_server(REFUSE, Align::Right, |_| Reply::None);
    let e = negotiate(conn, 0, PmiChoice::V2).err().unwrap();
    assert_eq!((e.call, e.class), ("PMI-2 init", ErrorClass::Unsupported));
    assert!(
        e.detail.contains("WEFT_PMI=2") && e.detail.contains("rc=-1"),
        "{e}"
    );

    // WEFT_PMI=1 never offers PMI-2.
    let (conn, server) = fake_server(OLD, Align::Right, |_| Reply::None);
    assert!(matches!(
        negotiate(conn, 0, PmiChoice::V1).unwrap(),
        Either::V1(_)
    ));
    let seen = server.join().unwrap();
    assert_eq!(seen[0], "cmd=init pmi_version=1 pmi_subversion=1");
}

#[test]
fn bad_replies_are_errors_naming_the_command_and_the_reply() {
    // Not a response_to_init at all.
    let (conn, _s) = fake_server("cmd=something_else rc=0\n", Align::Right, |_| Reply::None);
    let e = Pmi2::init(conn, 0).err().unwrap();
    assert_eq!(e.call, "PMI-2 init");
    assert!(
        e.detail.contains("response_to_init") && e.detail.contains("something_else"),
        "{e}"
    );

    // fullinit refused with rc and errmsg.
    let (conn, _s) = fake_server(ACCEPT, Align::Left, |_| {
        Reply::Body("cmd=fullinit-response;rc=14;errmsg=invalid rank;".into())
    });
    let e = Pmi2::init(conn, 3).err().unwrap();
    assert_eq!(e.call, "PMI-2 fullinit");
    assert!(
        e.detail.contains("rc=14")
            && e.detail.contains("invalid rank")
            && e.detail.contains("pmirank=3"),
        "{e}"
    );

    // A different rank than ours.
    let (conn, _s) = fake_server(ACCEPT, Align::Left, |_| {
        Reply::Body("cmd=fullinit-response;rank=2;size=4;rc=0;".into())
    });
    let e = Pmi2::init(conn, 1).err().unwrap();
    assert!(
        e.detail.contains("rank 2 of 4") && e.detail.contains("rank 1"),
        "{e}"
    );

    // The wrong reply command, a malformed body, a PMI-1 line where a frame belongs.
    for (reply, want) in [
        (
            Reply::Body("cmd=kvs-get-response;found=TRUE;value=x;rc=0;".into()),
            "expected cmd=fullinit-response",
        ),
        (Reply::Body("garbage".into()), "malformed reply \"garbage\""),
        (
            Reply::Raw("cmd=fullinit_result rc=0\n".into()),
            "bad PMI-2 length prefix \"cmd=fu\"",
        ),
        (
            Reply::Body("cmd=fullinit-response;rc=0;".into()),
            "no `rank`",
        ),
        (
            Reply::Body("cmd=fullinit-response;rank=one;size=4;rc=0;".into()),
            "rank=\"one\", not a number",
        ),
    ] {
        let mut reply = Some(reply);
        let (conn, _s) = fake_server(ACCEPT, Align::Right, move |_| {
            reply.take().unwrap_or(Reply::None)
        });
        let e = Pmi2::init(conn, 0).err().unwrap();
        assert_eq!(e.call, "PMI-2 fullinit");
        assert!(e.detail.contains(want), "want {want:?}: {e}");
    }

    // A failing put names the key, and a hang-up is reported as such.
    let mut std = standard(None);
    let (conn, _s) = fake_server(ACCEPT, Align::Right, move |m| match m.cmd.as_str() {
        "kvs-put" => Reply::Body("cmd=kvs-put-response;rc=1;errmsg=duplicate_key;".into()),
        "kvs-fence" => Reply::None,
        _ => std(m),
    });
    let mut pmi = accepted(Pmi2::init(conn, 1));
    let e = pmi.put("k", "v").unwrap_err();
    assert_eq!(e.call, "PMI-2 kvs-put");
    assert!(
        e.detail.contains("duplicate_key") && e.detail.contains("key=k"),
        "{e}"
    );
}

#[test]
fn hangup_is_reported() {
    let (client, server) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut b = [0u8; 64];
        let _ = (&server).read(&mut b);
    });
    let e = Pmi2::init(Box::new(client), 0).err().unwrap();
    t.join().unwrap();
    assert!(e.detail.contains("closed"), "{e}");
}

#[test]
fn bad_keys_and_values_are_refused_before_sending() {
    let (conn, server) = fake_server(ACCEPT, Align::Right, standard(None));
    let mut pmi = accepted(Pmi2::init(conn, 1));
    for (k, v, want) in [
        ("k", "semi;colon", "contains ';'"),
        ("k", "", "empty"),
        ("", "v", "empty"),
        ("PMI_mine", "v", "PMI_"),
        ("a=b", "v", "`=`"),
    ] {
        let e = pmi.put(k, v).unwrap_err();
        assert_eq!(
            (e.call, e.class),
            ("PMI-2 kvs-put", ErrorClass::Arg),
            "{k:?}"
        );
        assert!(e.detail.contains(want), "{k:?} {v:?}: {e}");
    }
    let e = pmi.put(&"k".repeat(65), "v").unwrap_err();
    assert!(e.detail.contains("65 bytes"), "{e}");
    let e = pmi.put("k", &"v".repeat(1025)).unwrap_err();
    assert!(e.detail.contains("1025 bytes"), "{e}");
    pmi.put("k", &"v".repeat(1024)).unwrap();
    drop(pmi);
    let seen = server.join().unwrap();
    assert_eq!(
        seen.iter().filter(|l| l.starts_with("cmd=kvs-put")).count(),
        1
    );
}

#[test]
fn weft_pmi_setting_parses() {
    use crate::tunables::Parse;
    for (text, want) in [
        ("auto", PmiChoice::Auto),
        ("1", PmiChoice::V1),
        ("2", PmiChoice::V2),
        (" PMI-2 ", PmiChoice::V2),
        ("pmi1", PmiChoice::V1),
    ] {
        assert_eq!(PmiChoice::parse("WEFT_PMI", text).unwrap(), want);
    }
    let e = PmiChoice::parse("WEFT_PMI", "3").unwrap_err();
    assert!(e.detail.contains("WEFT_PMI=\"3\""), "{e}");
}

#[test]
fn fence_waits_for_the_get_whatever_it_finds() {
    // Servers differ on a missing key: found=FALSE, or an error rc. Either ends the wait.
    for get_reply in [
        "cmd=kvs-get-response;found=FALSE;rc=0;",
        "cmd=kvs-get-response;rc=-1;errmsg=key not found;",
    ] {
        let mut std = standard(None);
        let (conn, server) = fake_server(ACCEPT, Align::Left, move |m| match m.cmd.as_str() {
            "kvs-get" => Reply::Body(get_reply.into()),
            _ => std(m),
        });
        let mut pmi = accepted(Pmi2::init(conn, 1));
        pmi.fence().unwrap();
        drop(pmi);
        let seen = server.join().unwrap();
        assert_eq!(
            &seen[seen.len() - 2..],
            [
                "cmd=kvs-fence;",
                "cmd=kvs-get;srcid=-1;key=weft-fence-barrier;"
            ]
        );
    }
    // But a reply to something else is still an error naming the fence.
    let mut std = standard(None);
    let (conn, _s) = fake_server(ACCEPT, Align::Left, move |m| match m.cmd.as_str() {
        "kvs-get" => Reply::Body("cmd=kvs-put-response;rc=0;".into()),
        _ => std(m),
    });
    let mut pmi = accepted(Pmi2::init(conn, 1));
    let e = pmi.fence().unwrap_err();
    assert_eq!(e.call, "PMI-2 kvs-fence");
    assert!(
        e.detail.contains("kvs-get-response") && e.detail.contains("kvs-put-response"),
        "{e}"
    );
}

#[test]
fn gets_before_the_first_fence_stay_local() {
    // Hydra 4.0.2 ends the job on a kvs-get before the asker's first fence.
    let mut std = standard(None);
    let (conn, server) = fake_server(ACCEPT, Align::Right, move |m| {
        assert!(
            m.cmd != "kvs-get" || m.get("key") == Some("weft-fence-barrier"),
            "kvs-get {:?} reached the server before a fence",
            m.get("key")
        );
        std(m)
    });
    let mut pmi = accepted(Pmi2::init(conn, 1));
    assert_eq!(pmi.try_get("secret").unwrap(), None);
    pmi.put("mine", "v1").unwrap();
    assert_eq!(pmi.get("mine").unwrap(), "v1");
    pmi.fence().unwrap();
    drop(pmi);
    let seen = server.join().unwrap();
    assert!(seen.contains(&"cmd=kvs-put;key=mine;value=v1;".to_string()));
}
