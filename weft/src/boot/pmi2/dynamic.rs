//! PMI-2's dynamic-process commands, as Hydra serves them: `spawn` (one message for every
//! command: the common pairs `ncmds`, `preputcount`, `ppkeyI`/`ppvalI`, then per command a
//! segment opened by `subcmd` with `maxprocs`, `argc`, `argvI`, `infokeycount`,
//! `infokeyI`/`infovalI`; answered by `spawn-response` with `rc`), and the name service
//! (`name-publish`, `name-unpublish`, `name-lookup`).

use super::{Msg, MAX_BODY, MAX_VALUE};
use crate::boot::{NameCall, SpawnCommand};
use crate::error::{Error, ErrorClass, Result};

/// Checks that `text` (`what`, for the message) can be a PMI-2 value: not empty, no `;`
/// (which ends a field: PMI-2 escapes nothing), no newline or other control character.
fn check_value(call: &'static str, what: &str, text: &str) -> Result<()> {
    let bad = |why: String| Err(Error::new(ErrorClass::Arg, call, why));
    if text.is_empty() {
        return bad(format!("the {what} is empty, which PMI-2 cannot carry"));
    }
    if text.len() > MAX_VALUE {
        return bad(format!(
            "the {what} is {} bytes, more than PMI-2's {MAX_VALUE}",
            text.len()
        ));
    }
    if let Some(c) = text.chars().find(|&c| c == ';' || c.is_control()) {
        return bad(format!(
            "the {what} {text:?} holds {c:?}, which PMI-2 cannot carry"
        ));
    }
    Ok(())
}

/// The `spawn` message for `cmds` with the new job's key-value space starting with `preput`.
pub fn spawn_msg(cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<Msg> {
    const CALL: &str = "spawn";
    let mut pairs = vec![
        ("ncmds".to_owned(), cmds.len().to_string()),
        ("preputcount".to_owned(), preput.len().to_string()),
    ];
    for (i, (k, v)) in preput.iter().enumerate() {
        check_value(CALL, "key-value space key", k)?;
        check_value(CALL, "key-value space value", v)?;
        pairs.push((format!("ppkey{i}"), k.clone()));
        pairs.push((format!("ppval{i}"), v.clone()));
    }
    for c in cmds {
        check_value(CALL, "program", &c.program)?;
        pairs.push(("subcmd".to_owned(), c.program.clone()));
        pairs.push(("maxprocs".to_owned(), c.maxprocs.to_string()));
        pairs.push(("argc".to_owned(), c.args.len().to_string()));
        for (i, a) in c.args.iter().enumerate() {
            check_value(CALL, &format!("argument {i} of {}", c.program), a)?;
            pairs.push((format!("argv{i}"), a.clone()));
        }
        pairs.push(("infokeycount".to_owned(), c.info.len().to_string()));
        for (i, (k, v)) in c.info.iter().enumerate() {
            check_value(CALL, "info key", k)?;
            check_value(CALL, &format!("value of info key {k}"), v)?;
            pairs.push((format!("infokey{i}"), k.clone()));
            pairs.push((format!("infoval{i}"), v.clone()));
        }
    }
    let msg = Msg {
        cmd: "spawn".to_owned(),
        pairs,
    };
    let len = msg.body().len();
    if len > MAX_BODY {
        return Err(Error::new(
            ErrorClass::Arg,
            CALL,
            format!("the spawn request is {len} bytes, more than PMI-2's {MAX_BODY}"),
        ));
    }
    Ok(msg)
}

/// The message for name-service call `call`, the reply it expects, the MPI name of the call
/// and the error class of a refusal.
pub fn name_msg(call: NameCall<'_>) -> Result<(Msg, &'static str, &'static str, ErrorClass)> {
    let (msg, expect, name, class) = match call {
        NameCall::Publish { service, port } => (
            Msg::new("name-publish", &[("name", service), ("port", port)]),
            "name-publish-response",
            "publish_name",
            ErrorClass::Service,
        ),
        NameCall::Unpublish { service } => (
            Msg::new("name-unpublish", &[("name", service)]),
            "name-unpublish-response",
            "unpublish_name",
            ErrorClass::Service,
        ),
        NameCall::Lookup { service } => (
            Msg::new("name-lookup", &[("name", service)]),
            "name-lookup-response",
            "lookup_name",
            ErrorClass::Name,
        ),
    };
    for (k, v) in &msg.pairs {
        let what = if k == "name" { "service name" } else { "port name" };
        check_value(name, what, v)?;
    }
    Ok((msg, expect, name, class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_of_two_commands_has_the_common_pairs_then_one_segment_each() {
        let cmds = [
            SpawnCommand {
                program: "/bin/a".into(),
                args: vec!["x y".into(), "z".into()],
                maxprocs: 2,
                info: vec![("wdir".into(), "/tmp".into())],
            },
            SpawnCommand {
                program: "b".into(),
                args: vec![],
                maxprocs: 1,
                info: vec![],
            },
        ];
        let m = spawn_msg(&cmds, &[("K".into(), "v:1".into())]).unwrap();
        assert_eq!(
            m.body(),
            "cmd=spawn;ncmds=2;preputcount=1;ppkey0=K;ppval0=v:1;subcmd=/bin/a;maxprocs=2;\
             argc=2;argv0=x y;argv1=z;infokeycount=1;infokey0=wdir;infoval0=/tmp;subcmd=b;\
             maxprocs=1;argc=0;infokeycount=0;"
        );
    }

    #[test]
    fn values_pmi2_cannot_carry_are_refused_naming_them() {
        let cmd = |arg: &str| SpawnCommand {
            program: "p".into(),
            args: vec![arg.into()],
            maxprocs: 1,
            info: vec![],
        };
        let e = spawn_msg(&[cmd("a;b")], &[]).unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
        assert!(e.detail.contains("argument 0 of p \"a;b\" holds ';'"), "{e}");
        let e = spawn_msg(&[cmd("")], &[]).unwrap_err();
        assert!(e.detail.contains("argument 0 of p is empty"), "{e}");
        let e = name_msg(NameCall::Lookup { service: "" }).unwrap_err();
        assert_eq!((e.call, e.class), ("lookup_name", ErrorClass::Arg));
    }
}
