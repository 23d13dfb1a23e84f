//! Host lists and process placement for multi-host `weft run`.
//!
//! Hosts come from `--hosts a,b:2,[::1]:2` or a hostfile (`host [slots=N]` or `host:N` per
//! line, `#` comments; an IPv6 address takes brackets when a count follows it). A host given
//! without a count has one slot (Open MPI's `--host`, MPICH's `-hosts`); a host named twice
//! has the sum of its slots. More ranks than slots is an error unless oversubscription is
//! allowed (Open MPI's `--oversubscribe`).
//!
//! Placement (`--map-by`): `block` fills each host's slots in list order (ranks 0..s0 on the
//! first host, ...); `round-robin` deals one rank per host in turn, skipping full hosts. The
//! node id of a rank is the index of its host in the list, and `PMI_process_mapping` is built
//! from those ids (see [`weft::launcher::mapping::encode`]).

use anyhow::{bail, Context};

/// A host and its slot count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// The name handed to the remote-start command.
    pub name: String,
    /// How many ranks it takes before it counts as oversubscribed.
    pub slots: u32,
}

/// How ranks are dealt to hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MapBy {
    /// Fill each host's slots before moving on (Open MPI `--map-by slot`, MPICH's default).
    #[value(alias = "slot")]
    Block,
    /// One rank per host in turn (Open MPI `--map-by node`, MPICH `-rr`).
    #[value(alias = "node", alias = "rr")]
    RoundRobin,
}

fn check_name(name: &str, whence: &str) -> anyhow::Result<()> {
    if name.is_empty() {
        bail!("{whence}: empty host name");
    }
    if name.starts_with('-') {
        // The remote-start command would take it for an option.
        bail!("{whence}: host name {name:?} starts with '-'");
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "'\"\\`$;&|<>(){}*?!#".contains(*c))
    {
        bail!("{whence}: host name {name:?} contains {c:?}");
    }
    Ok(())
}

fn parse_slots(text: &str, whence: &str) -> anyhow::Result<u32> {
    match text.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("{whence}: slot count {text:?} is not a whole number of at least 1"),
    }
}

/// Adds `name` with `slots`, merging a host named again.
fn add(hosts: &mut Vec<Host>, name: &str, slots: u32) {
    match hosts.iter_mut().find(|h| h.name == name) {
        Some(h) => h.slots = h.slots.saturating_add(slots),
        None => hosts.push(Host {
            name: name.to_owned(),
            slots,
        }),
    }
}

/// Splits `HOST[:SLOTS]` into the host and its slot count, if given. An IPv6 address takes
/// brackets when a count follows (`[::1]:2`, as in URLs); a bare one (`::1`, more than one
/// colon) is a host without a count. The brackets are not part of the name: the
/// remote-start command (ssh) wants the bare address.
fn split_slots<'a>(item: &'a str, whence: &str) -> anyhow::Result<(&'a str, Option<u32>)> {
    if let Some(rest) = item.strip_prefix('[') {
        let Some((name, after)) = rest.split_once(']') else {
            bail!("{whence}: {item:?} has no closing ']'");
        };
        return match after {
            "" => Ok((name, None)),
            _ => match after.strip_prefix(':') {
                Some(s) => Ok((name, Some(parse_slots(s, whence)?))),
                None => bail!("{whence}: {item:?}: expected `:SLOTS` after ']'"),
            },
        };
    }
    match item.split_once(':') {
        Some((n, s)) if !s.contains(':') => Ok((n, Some(parse_slots(s, whence)?))),
        _ => Ok((item, None)),
    }
}

/// Parses `a,b:2,c,[::1]:2` (the `--hosts` value).
pub fn parse_list(text: &str) -> anyhow::Result<Vec<Host>> {
    let mut hosts = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let whence = format!("--hosts {text:?}");
        let (name, slots) = split_slots(item, &whence)?;
        let slots = slots.unwrap_or(1);
        check_name(name, &whence)?;
        add(&mut hosts, name, slots);
    }
    Ok(hosts)
}

/// Parses a hostfile: one `host [slots=N]` or `host:N` per line; `#` starts a comment.
pub fn parse_file_text(text: &str, path: &str) -> anyhow::Result<Vec<Host>> {
    let mut hosts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let whence = format!("hostfile {path} line {}", i + 1);
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let (name, mut slots) = split_slots(first, &whence)?;
        check_name(name, &whence)?;
        for w in words {
            match w.split_once('=') {
                Some(("slots", v)) if slots.is_none() => slots = Some(parse_slots(v, &whence)?),
                Some(("slots", _)) => bail!("{whence}: the slot count is given twice"),
                _ => bail!("{whence}: {w:?} is not understood (expected `slots=N`)"),
            }
        }
        add(&mut hosts, name, slots.unwrap_or(1));
    }
    if hosts.is_empty() {
        bail!("hostfile {path} names no host");
    }
    Ok(hosts)
}

/// Reads and parses a hostfile.
pub fn parse_file(path: &str) -> anyhow::Result<Vec<Host>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading hostfile {path}"))?;
    parse_file_text(&text, path)
}

/// The host index of each of `np` ranks.
pub fn place(
    hosts: &[Host],
    np: u32,
    map_by: MapBy,
    oversubscribe: bool,
) -> anyhow::Result<Vec<usize>> {
    if hosts.is_empty() {
        bail!("no hosts to place {np} ranks on");
    }
    let total: u64 = hosts.iter().map(|h| u64::from(h.slots)).sum();
    let over = u64::from(np) > total;
    if over && !oversubscribe {
        let list: Vec<String> = hosts
            .iter()
            .map(|h| format!("{}:{}", h.name, h.slots))
            .collect();
        bail!(
            "-n {np} is more ranks than the {total} slot(s) of the hosts ({}); give hosts more \
             slots (host:N or slots=N), start fewer ranks, or pass --oversubscribe",
            list.join(",")
        );
    }
    let np = np as usize;
    let mut host_of = Vec::with_capacity(np);
    match map_by {
        MapBy::Block => {
            // Each host gets one contiguous run; when oversubscribed, runs in proportion to
            // the slots (the first hosts take the remainder).
            let counts: Vec<usize> = if over {
                let base: Vec<usize> = hosts
                    .iter()
                    .map(|h| (np as u64 * u64::from(h.slots) / total) as usize)
                    .collect();
                let mut extra = np - base.iter().sum::<usize>();
                base.into_iter()
                    .map(|c| {
                        let e = usize::from(extra > 0);
                        extra -= e;
                        c + e
                    })
                    .collect()
            } else {
                let mut left = np;
                hosts
                    .iter()
                    .map(|h| {
                        let c = left.min(h.slots as usize);
                        left -= c;
                        c
                    })
                    .collect()
            };
            for (i, c) in counts.into_iter().enumerate() {
                host_of.extend(std::iter::repeat_n(i, c));
            }
        }
        MapBy::RoundRobin => {
            let mut used = vec![0u32; hosts.len()];
            while host_of.len() < np {
                let before = host_of.len();
                for (i, h) in hosts.iter().enumerate() {
                    if host_of.len() < np && used[i] < h.slots {
                        used[i] += 1;
                        host_of.push(i);
                    }
                }
                if host_of.len() == before {
                    // Every slot is taken (oversubscribing): deal on regardless of slots.
                    let mut i = 0;
                    while host_of.len() < np {
                        host_of.push(i % hosts.len());
                        i += 1;
                    }
                }
            }
        }
    }
    debug_assert_eq!(host_of.len(), np, "place: every rank gets a host");
    Ok(host_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: u32) -> Host {
        Host {
            name: name.into(),
            slots,
        }
    }

    #[test]
    fn host_lists() {
        assert_eq!(parse_list("a,b:2").unwrap(), vec![h("a", 1), h("b", 2)]);
        assert_eq!(parse_list("a,a:3, b").unwrap(), vec![h("a", 4), h("b", 1)]);
        for bad in ["", "a,,b", "a:0", "a:x", "-oProxyCommand=x", "a b", "a;rm"] {
            let e = parse_list(bad).unwrap_err().to_string();
            assert!(e.contains("--hosts"), "{bad}: {e}");
        }
    }

    #[test]
    fn bracketed_ipv6_hosts() {
        assert_eq!(parse_list("[::1]:2").unwrap(), vec![h("::1", 2)]);
        assert_eq!(
            parse_list("[fe80::1],[::1]:3,b:2").unwrap(),
            vec![h("fe80::1", 1), h("::1", 3), h("b", 2)]
        );
        assert_eq!(parse_list("::1").unwrap(), vec![h("::1", 1)]);
        for bad in ["[::1", "[::1]x", "[::1]:0", "[]:2"] {
            let e = parse_list(bad).unwrap_err().to_string();
            assert!(e.contains("--hosts"), "{bad}: {e}");
        }
        assert_eq!(
            parse_file_text(
                "[::1]:2
::2 slots=3
",
                "hf"
            )
            .unwrap(),
            vec![h("::1", 2), h("::2", 3)]
        );
    }

    #[test]
    fn hostfiles() {
        let text = "# cluster\nnode1 slots=2\n\nnode2   # one slot\nnode3:4\nnode1 slots=1\n";
        assert_eq!(
            parse_file_text(text, "hf").unwrap(),
            vec![h("node1", 3), h("node2", 1), h("node3", 4)]
        );
        for (bad, what) in [
            ("a slots=0", "line 1"),
            ("a\nb max_slots=2", "line 2: \"max_slots=2\""),
            ("a:2 slots=3", "given twice"),
            ("# nothing", "names no host"),
            ("\n\n-x", "line 3"),
        ] {
            let e = parse_file_text(bad, "hf").unwrap_err().to_string();
            assert!(
                e.contains("hostfile hf") && e.contains(what),
                "{bad:?}: {e}"
            );
        }
        assert!(parse_file("/nonexistent/weft-hostfile")
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/weft-hostfile"));
    }

    #[test]
    fn block_and_round_robin() {
        let two = [h("a", 2), h("b", 2)];
        assert_eq!(place(&two, 4, MapBy::Block, false).unwrap(), [0, 0, 1, 1]);
        assert_eq!(place(&two, 3, MapBy::Block, false).unwrap(), [0, 0, 1]);
        assert_eq!(
            place(&two, 4, MapBy::RoundRobin, false).unwrap(),
            [0, 1, 0, 1]
        );
        let uneven = [h("a", 1), h("b", 3)];
        assert_eq!(
            place(&uneven, 4, MapBy::RoundRobin, false).unwrap(),
            [0, 1, 1, 1]
        );
        assert_eq!(place(&uneven, 2, MapBy::Block, false).unwrap(), [0, 1]);
    }

    #[test]
    fn more_ranks_than_slots() {
        let two = [h("a", 1), h("b", 1)];
        let e = place(&two, 3, MapBy::Block, false).unwrap_err().to_string();
        assert!(
            e.contains("-n 3") && e.contains("a:1,b:1") && e.contains("--oversubscribe"),
            "{e}"
        );
        assert_eq!(place(&two, 5, MapBy::Block, true).unwrap(), [0, 0, 0, 1, 1]);
        assert_eq!(
            place(&two, 5, MapBy::RoundRobin, true).unwrap(),
            [0, 1, 0, 1, 0]
        );
        let uneven = [h("a", 1), h("b", 3)];
        assert_eq!(
            place(&uneven, 8, MapBy::Block, true).unwrap(),
            [0, 0, 1, 1, 1, 1, 1, 1]
        );
    }
}
