//! `mpiexec` and `mpirun` as other names of `weft run`: called by one of those names, the
//! command line is read as `weft run`'s, with the spellings of MPICH's and Open MPI's
//! launchers turned into its own: `-np N`, `-host(s) H`, `-env NAME VALUE` / `-genv`, `-x
//! NAME[=VALUE]`, `-f`/`-machinefile`/`-hostfile FILE`, `-l`. Everything from the program on
//! is passed unchanged.

use std::ffi::OsString;
use std::path::Path;

/// The arguments `weft` parses: unchanged when called as `weft`; else `run` and the
/// translated launcher flags.
pub fn arguments(args: Vec<OsString>) -> Vec<OsString> {
    let called = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("weft");
    if !matches!(called, "mpiexec" | "mpirun") {
        return args;
    }
    let mut out: Vec<OsString> = vec![args[0].clone(), "run".into()];
    let mut rest = args.into_iter().skip(1);
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.to_str().filter(|a| a.starts_with('-')) else {
            // The program: it and everything after it are its own.
            out.push("--".into());
            out.push(arg);
            out.extend(rest);
            break;
        };
        match flag {
            "-np" | "-n" | "--np" | "-c" => push_with_value(&mut out, "-n", &mut rest),
            "-host" | "-hosts" | "--host" | "--hosts" | "-H" => {
                push_with_value(&mut out, "--hosts", &mut rest)
            }
            "-f" | "-machinefile" | "-hostfile" | "--hostfile" | "--machinefile" => {
                push_with_value(&mut out, "--hostfile", &mut rest)
            }
            "-env" | "-genv" => {
                let name = rest.next().unwrap_or_default();
                let value = rest.next().unwrap_or_default();
                let mut pair = name;
                pair.push("=");
                pair.push(value);
                out.push("-x".into());
                out.push(pair);
            }
            "-x" | "-genvlist" | "-envlist" => push_with_value(&mut out, "-x", &mut rest),
            "-l" | "-prepend-rank" | "--tag-output" | "-tag-output" => out.push("-l".into()),
            _ => out.push(arg),
        }
    }
    out
}

fn push_with_value(out: &mut Vec<OsString>, flag: &str, rest: &mut impl Iterator<Item = OsString>) {
    out.push(flag.into());
    if let Some(value) = rest.next() {
        out.push(value);
    }
}

#[cfg(test)]
mod tests {
    use super::arguments;

    fn args(line: &str) -> Vec<String> {
        let a = line.split(' ').map(Into::into).collect();
        arguments(a)
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    #[test]
    fn mpiexec_spellings_become_weft_run_flags() {
        assert_eq!(
            args("/usr/bin/mpiexec -np 4 -env A 1 -x B=2 -hosts h1,h2 -l ./prog -n 3 -x"),
            "/usr/bin/mpiexec run -n 4 -x A=1 -x B=2 --hosts h1,h2 -l -- ./prog -n 3 -x"
                .split(' ')
                .collect::<Vec<_>>()
        );
        assert_eq!(
            args("mpirun -n 2 prog"),
            vec!["mpirun", "run", "-n", "2", "--", "prog"]
        );
    }

    #[test]
    fn weft_itself_is_left_alone() {
        assert_eq!(
            args("weft run -np 2 x"),
            vec!["weft", "run", "-np", "2", "x"]
        );
    }
}
