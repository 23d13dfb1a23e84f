//! PMI-1 `mcmd=spawn` (MPI_Comm_spawn, MPI_Comm_spawn_multiple): the request a rank sends
//! and the parser that gathers it from the rank's PMI lines.
//!
//! The wire format is MPICH's simple PMI, as Hydra serves it. A spawn of K commands is K
//! blocks of newline-terminated `key=value` lines (a value is everything after the first
//! `=`, spaces and `=` included), each opened by `mcmd=spawn` and closed by `endcmd`:
//!
//! ```text
//! mcmd=spawn
//! nprocs=N  execname=PROGRAM  totspawns=K  spawnssofar=I (1-based)
//! argcnt=M  arg1=... argM=...
//! preput_num=P  preput_key_0=KEY  preput_val_0=VALUE ...   (0-based)
//! info_num=Q  info_key_0=KEY  info_val_0=VALUE ...         (0-based)
//! endcmd
//! ```
//!
//! (one pair per line, in any order). The server answers nothing to blocks 1..K-1 and one
//! line after block K: `cmd=spawn_result rc=0`, or `cmd=spawn_result rc=-1 msg=REASON`
//! ([`reply`]). The preput pairs of the first block (the later ones repeat them) go into the
//! new job's key-value space. Another `mcmd` is read to its `endcmd` and refused.
//!
//! Limits (a request past one is refused once its last block is read, never half-stored):
//! [`MAX_ARGS`] arguments, [`MAX_PAIRS`] preput or info pairs per block, [`MAX_COMMANDS`]
//! commands, [`MAX_REQUEST_BYTES`] for all of a request's lines.

use std::collections::HashMap;
use weft::launcher::pmi::MAX_LINE;

/// Most arguments one command may have.
pub const MAX_ARGS: usize = 4096;
/// Most preput or info pairs one block may have.
pub const MAX_PAIRS: usize = 4096;
/// Most commands (blocks) one spawn request may have.
pub const MAX_COMMANDS: usize = 4096;
/// Most bytes all the lines of one request may have together.
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

/// One command of a spawn request: `nprocs` processes of one program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnCommand {
    /// The program, as the rank named it (`execname`).
    pub program: String,
    /// Its arguments (not the program itself).
    pub args: Vec<String>,
    /// How many processes run it (at least 1).
    pub nprocs: u32,
    /// The MPI info pairs given for it, in order.
    pub info: Vec<(String, String)>,
}

/// A whole spawn request: its commands in order, and the pairs to put into the new job's
/// key-value space before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnRequest {
    pub commands: Vec<SpawnCommand>,
    pub preput: Vec<(String, String)>,
}

impl SpawnRequest {
    /// Processes in the new job (the sum of the commands' `nprocs`; None on overflow).
    pub fn total(&self) -> Option<u32> {
        self.commands
            .iter()
            .try_fold(0u32, |sum, c| sum.checked_add(c.nprocs))
    }
}

/// A finished multi-line command: its `mcmd` name and what it asked for (`Err`: why it is
/// refused).
#[derive(Debug)]
pub struct Finished {
    pub mcmd: String,
    pub request: Result<SpawnRequest, String>,
}

/// Gathers the blocks of one `mcmd` command from the lines a rank sends, one at a time.
#[derive(Default)]
pub struct Blocks {
    /// The `mcmd` of the request under way.
    mcmd: Option<String>,
    /// Pairs of the current block, while inside one.
    block: Option<Vec<(String, String)>>,
    /// Bytes of the request's lines so far.
    bytes: usize,
    /// `totspawns` of the first block (None: not read yet, or unreadable).
    total: Option<usize>,
    /// Blocks read to their `endcmd`.
    blocks: usize,
    commands: Vec<SpawnCommand>,
    preput: Vec<(String, String)>,
    /// The first thing wrong with the request (it is still read to its end).
    error: Option<String>,
}

impl Blocks {
    /// Whether a request is under way (its next lines belong to it).
    pub fn is_open(&self) -> bool {
        self.mcmd.is_some()
    }

    /// Takes one line (`mcmd=...` opens a request; call this for every line while
    /// [`is_open`](Blocks::is_open)). Returns the request once its last block is read.
    pub fn line(&mut self, text: &str) -> Option<Finished> {
        let text = text.trim_end_matches(['\n', '\r']);
        self.bytes = self.bytes.saturating_add(text.len() + 1);
        if self.bytes > MAX_REQUEST_BYTES {
            self.fail(format!(
                "the request is longer than {MAX_REQUEST_BYTES} bytes"
            ));
        }
        let Some(block) = &mut self.block else {
            return self.open(text);
        };
        if text == "endcmd" {
            let pairs = std::mem::take(block);
            self.block = None;
            return self.end_block(pairs);
        }
        match text.split_once('=') {
            Some(_) if self.bytes > MAX_REQUEST_BYTES => {}
            Some((k, v)) => block.push((k.to_owned(), v.to_owned())),
            None => {
                let n = self.blocks + 1;
                self.fail(format!("line {text:?} of block {n} has no '='"));
            }
        }
        None
    }

    /// A line between blocks: it must open one.
    fn open(&mut self, text: &str) -> Option<Finished> {
        match text.strip_prefix("mcmd=") {
            Some(name) if self.mcmd.as_deref().is_none_or(|m| m == name) => {
                self.mcmd.get_or_insert_with(|| name.to_owned());
                self.block = Some(Vec::new());
                None
            }
            _ => {
                // The rank stopped sending blocks before the last one: answer now.
                let n = self.blocks + 1;
                let total = self.total.unwrap_or(0);
                self.fail(format!(
                    "expected block {n} of {total} (mcmd=spawn), got {text:?}"
                ));
                Some(self.finish())
            }
        }
    }

    /// Block `blocks + 1` is read: parse it; the request is finished after the last.
    fn end_block(&mut self, pairs: Vec<(String, String)>) -> Option<Finished> {
        self.blocks += 1;
        let n = self.blocks;
        if self.mcmd.as_deref() != Some("spawn") {
            let name = self.mcmd.clone().unwrap_or_default();
            self.fail(format!("weft run serves mcmd=spawn only, not mcmd={name}"));
            return Some(self.finish());
        }
        if self.error.is_none() {
            match parse_block(&pairs, n, self.total) {
                Ok(b) => {
                    self.total = Some(b.total);
                    if n == 1 {
                        self.preput = b.preput;
                    }
                    self.commands.push(b.command);
                    return (n == b.total).then(|| self.finish());
                }
                Err(e) => self.fail(format!("block {n}: {e}")),
            }
        }
        // Refused: answer after the block the rank takes for its last, as far as it can be
        // told (else now, so that the rank does not wait for an answer that never comes).
        let total = self
            .total
            .or_else(|| field(&pairs, "totspawns"))
            .filter(|&t| t <= MAX_COMMANDS);
        self.total = total;
        let so_far = field(&pairs, "spawnssofar").unwrap_or(n);
        match total {
            Some(total) if n < total && so_far < total => None,
            _ => Some(self.finish()),
        }
    }

    fn fail(&mut self, why: String) {
        self.error.get_or_insert(why);
    }

    /// Ends the request, ready for the next.
    fn finish(&mut self) -> Finished {
        let done = std::mem::take(self);
        Finished {
            mcmd: done.mcmd.unwrap_or_default(),
            request: match done.error {
                Some(e) => Err(e),
                None => Ok(SpawnRequest {
                    commands: done.commands,
                    preput: done.preput,
                }),
            },
        }
    }
}

/// What one block holds.
struct Block {
    command: SpawnCommand,
    total: usize,
    preput: Vec<(String, String)>,
}

/// Parses block `n` (1-based); `total` is `totspawns` of the earlier blocks.
fn parse_block(
    pairs: &[(String, String)],
    n: usize,
    total: Option<usize>,
) -> Result<Block, String> {
    let mut seen: HashMap<&str, &str> = HashMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        if seen.insert(k, v).is_some() {
            return Err(format!("{k} is given twice"));
        }
    }
    let pairs = &seen;
    let get = |key: &str| {
        pairs
            .get(key)
            .copied()
            .ok_or_else(|| format!("{key} is missing"))
    };
    let num = |key: &str, most: usize| -> Result<usize, String> {
        let v = get(key)?;
        let n: usize = v
            .trim()
            .parse()
            .map_err(|_| format!("{key}={v:?} is not a number"))?;
        if n > most {
            return Err(format!("{key}={n} is over weft run's limit of {most}"));
        }
        Ok(n)
    };
    let this_total = num("totspawns", MAX_COMMANDS)?;
    if this_total == 0 {
        return Err("totspawns=0: a spawn has at least one command".into());
    }
    if total.is_some_and(|t| t != this_total) {
        return Err(format!(
            "totspawns={this_total}, but the first block said {}",
            total.unwrap_or(0)
        ));
    }
    let so_far = num("spawnssofar", MAX_COMMANDS)?;
    if so_far != n {
        return Err(format!("spawnssofar={so_far} in block {n} of {this_total}"));
    }
    let nprocs = num("nprocs", u32::MAX as usize)?;
    if nprocs == 0 {
        return Err("nprocs=0: a command starts at least one process".into());
    }
    let program = get("execname")?.to_owned();
    if program.is_empty() {
        return Err("execname is empty".into());
    }
    let args = (1..=num("argcnt", MAX_ARGS)?)
        .map(|i| get(&format!("arg{i}")).map(str::to_owned))
        .collect::<Result<Vec<_>, _>>()?;
    let list = |what: &str| -> Result<Vec<(String, String)>, String> {
        (0..num(&format!("{what}_num"), MAX_PAIRS)?)
            .map(|i| {
                let k = get(&format!("{what}_key_{i}"))?;
                let v = get(&format!("{what}_val_{i}"))?;
                Ok((k.to_owned(), v.to_owned()))
            })
            .collect()
    };
    Ok(Block {
        command: SpawnCommand {
            program,
            args,
            nprocs: nprocs as u32,
            info: list("info")?,
        },
        total: this_total,
        preput: list("preput")?,
    })
}

/// The value of `key` as a number, if it is one (for a block already refused).
fn field(pairs: &[(String, String)], key: &str) -> Option<usize> {
    let (_, v) = pairs.iter().find(|(k, _)| k == key)?;
    v.trim().parse().ok()
}

/// The one-line answer to a finished `mcmd` command: `cmd=<mcmd>_result rc=0`, or `rc=-1
/// msg=REASON` with every blank of the reason made `_` and the line kept within PMI's limit.
pub fn reply(mcmd: &str, result: &Result<(), String>) -> String {
    let mcmd: String = mcmd
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    match result {
        Ok(()) => format!("cmd={mcmd}_result rc=0\n"),
        Err(why) => {
            let head = format!("cmd={mcmd}_result rc=-1 msg=");
            let room = MAX_LINE.saturating_sub(head.len() + 1);
            let mut msg = String::with_capacity(why.len().min(room));
            for c in why.chars().map(|c| if c.is_whitespace() { '_' } else { c }) {
                if msg.len() + c.len_utf8() > room {
                    break;
                }
                msg.push(c);
            }
            format!("{head}{msg}\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` line by line; returns what each finished request was.
    fn feed(blocks: &mut Blocks, text: &str) -> Vec<Finished> {
        text.split_inclusive('\n')
            .filter_map(|l| blocks.line(l))
            .collect()
    }

    fn block(i: usize, of: usize, body: &str) -> String {
        format!("mcmd=spawn\ntotspawns={of}\nspawnssofar={i}\n{body}endcmd\n")
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn one_command_with_args_preput_and_info() {
        let mut b = Blocks::default();
        let text = block(
            1,
            1,
            "nprocs=2\nexecname=/bin/prog\nargcnt=2\narg1=a b=c\narg2=\npreput_num=1\n\
             preput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$x=y $\ninfo_num=1\n\
             info_key_0=wdir\ninfo_val_0=/tmp\n",
        );
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for l in &lines[..lines.len() - 1] {
            assert!(b.line(l).is_none(), "{l}");
            assert!(b.is_open());
        }
        let done = b.line(lines[lines.len() - 1]).expect("finished at endcmd");
        assert!(!b.is_open());
        assert_eq!(done.mcmd, "spawn");
        let req = done.request.unwrap();
        assert_eq!(
            req.commands,
            [SpawnCommand {
                program: "/bin/prog".into(),
                args: vec!["a b=c".into(), String::new()],
                nprocs: 2,
                info: pairs(&[("wdir", "/tmp")]),
            }]
        );
        assert_eq!(
            req.preput,
            pairs(&[("PARENT_ROOT_PORT_NAME", "tag#0$x=y $")])
        );
        assert_eq!(req.total(), Some(2));
    }

    #[test]
    fn blocks_gather_until_the_last_and_preput_comes_from_the_first() {
        let mut b = Blocks::default();
        let one = block(
            1,
            2,
            "nprocs=1\nexecname=a\nargcnt=0\npreput_num=1\npreput_key_0=k\npreput_val_0=v\n\
             info_num=0\n",
        );
        let two = block(
            2,
            2,
            "execname=b\nnprocs=3\nargcnt=1\narg1=x\npreput_num=1\npreput_key_0=k\n\
             preput_val_0=other\ninfo_num=0\n",
        );
        assert!(
            feed(&mut b, &one).is_empty(),
            "no answer before the last block"
        );
        let done = feed(&mut b, &two);
        assert_eq!(done.len(), 1);
        let req = done[0].request.as_ref().unwrap();
        assert_eq!(req.commands.len(), 2);
        assert_eq!(
            (req.commands[0].program.as_str(), req.commands[0].nprocs),
            ("a", 1)
        );
        assert_eq!(req.commands[1].args, ["x"]);
        assert_eq!(req.preput, pairs(&[("k", "v")]));
        assert_eq!(req.total(), Some(4));
        // The next request starts afresh.
        let again = feed(
            &mut b,
            &block(
                1,
                1,
                "nprocs=1\nexecname=c\nargcnt=0\npreput_num=0\ninfo_num=0\n",
            ),
        );
        assert_eq!(again[0].request.as_ref().unwrap().commands[0].program, "c");
    }

    #[test]
    fn bad_blocks_are_refused_after_the_last_block_with_a_reason() {
        let cases = [
            (
                "execname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
                "nprocs is missing",
            ),
            (
                "nprocs=two\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
                "nprocs=\"two\" is not a number",
            ),
            (
                "nprocs=0\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
                "nprocs=0",
            ),
            (
                "nprocs=1\nexecname=a\nargcnt=2\narg1=x\npreput_num=0\ninfo_num=0\n",
                "arg2 is missing",
            ),
            (
                "nprocs=1\nexecname=a\nargcnt=5000\npreput_num=0\ninfo_num=0\n",
                "argcnt=5000 is over weft run's limit of 4096",
            ),
            (
                "nprocs=1\nexecname=a\nargcnt=0\npreput_num=1\npreput_key_0=k\ninfo_num=0\n",
                "preput_val_0 is missing",
            ),
            (
                "nprocs=1\nnprocs=2\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
                "nprocs is given twice",
            ),
            ("nprocs=1\nnonsense\nexecname=a\n", "has no '='"),
        ];
        for (body, why) in cases {
            let mut b = Blocks::default();
            // A bad first block of two: the answer waits for the second.
            assert!(feed(&mut b, &block(1, 2, body)).is_empty(), "{body}");
            let good = "nprocs=1\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n";
            let done = feed(&mut b, &block(2, 2, good));
            let err = done[0].request.as_ref().unwrap_err();
            assert!(
                err.contains(why) && err.contains("block 1"),
                "{err} / {why}"
            );
            assert!(!b.is_open());
        }
    }

    #[test]
    fn a_request_without_a_readable_count_is_answered_after_its_block() {
        let mut b = Blocks::default();
        let done = feed(
            &mut b,
            "mcmd=spawn\nnprocs=1\nexecname=a\nspawnssofar=1\nendcmd\n",
        );
        assert!(done[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("totspawns is missing"));
        let mut b = Blocks::default();
        let done = feed(
            &mut b,
            &block(
                2,
                2,
                "nprocs=1\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
            ),
        );
        assert!(done[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("spawnssofar=2 in block 1"));
    }

    #[test]
    fn a_missing_block_another_mcmd_and_an_endless_block_are_refused() {
        let mut b = Blocks::default();
        let one = block(
            1,
            2,
            "nprocs=1\nexecname=a\nargcnt=0\npreput_num=0\ninfo_num=0\n",
        );
        assert!(feed(&mut b, &one).is_empty());
        let done = feed(&mut b, "cmd=get_appnum\n");
        assert!(done[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("expected block 2 of 2"));

        let mut b = Blocks::default();
        let done = feed(&mut b, "mcmd=other\nx=1\nendcmd\n");
        assert_eq!(done[0].mcmd, "other");
        assert!(done[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("mcmd=spawn only"));

        let mut b = Blocks::default();
        assert!(b.line("mcmd=spawn\n").is_none());
        let arg = format!("arg1={}\n", "x".repeat(1 << 16));
        for _ in 0..(MAX_REQUEST_BYTES >> 16) + 2 {
            assert!(b.line(&arg).is_none());
        }
        assert!(b.block.as_ref().unwrap().len() < MAX_REQUEST_BYTES >> 16);
        let done = feed(&mut b, "endcmd\n");
        assert!(done[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("longer than"));
    }

    #[test]
    fn replies_fit_one_line() {
        assert_eq!(reply("spawn", &Ok(())), "cmd=spawn_result rc=0\n");
        assert_eq!(
            reply(
                "spawn",
                &Err("cannot find program x y\n(searched /bin)".into())
            ),
            "cmd=spawn_result rc=-1 msg=cannot_find_program_x_y_(searched_/bin)\n"
        );
        let long = reply("spawn", &Err("é".repeat(4000)));
        assert!(long.len() <= MAX_LINE && long.ends_with("é\n"), "{long}");
    }
}
