//! `PMI_process_mapping` parsing: which node each rank lives on.
//!
//! The format (MPICH `src/mpl/src/mpl_rankmap.c`, served by Hydra and Slurm) is
//! `(vector,(start,nnodes,ppn),(start,nnodes,ppn),...)`: each block puts `ppn` consecutive
//! ranks on node `start`, then `ppn` on `start + 1`, ... up to `start + nnodes - 1`. When the
//! blocks run out before every rank is placed, placement starts again from the first block:
//! Hydra describes 4 ranks on one host as `(vector,(0,1,1))` (one rank per pass, on node 0,
//! four passes). Node ids may have gaps; ranks with equal ids share a node.

use crate::error::{Error, ErrorClass, Result};

/// One `(start,nnodes,ppn)` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// First node id of the block.
    pub start: u32,
    /// Number of consecutive node ids in the block.
    pub nnodes: u32,
    /// Consecutive ranks placed on each node of the block per pass.
    pub ppn: u32,
}

fn bad(mapping: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorClass::Boot,
        "PMI_process_mapping",
        format!("cannot parse {mapping:?}: {why}"),
    )
}

/// Parses the blocks of a mapping; `Ok(vec![])` for an empty string or `(vector)`.
pub fn parse_blocks(mapping: &str) -> Result<Vec<Block>> {
    let text: String = mapping.chars().filter(|c| !c.is_whitespace()).collect();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| bad(mapping, "expected it to be enclosed in parentheses"))?;
    let rest = inner
        .strip_prefix("vector")
        .ok_or_else(|| bad(mapping, "expected the first element to be `vector`"))?;
    let mut blocks = Vec::new();
    let mut rest = rest;
    while !rest.is_empty() {
        rest = rest
            .strip_prefix(',')
            .ok_or_else(|| bad(mapping, format!("expected `,` before {rest:?}")))?;
        let body = rest
            .strip_prefix('(')
            .ok_or_else(|| bad(mapping, format!("expected `(` at {rest:?}")))?;
        let close = body
            .find(')')
            .ok_or_else(|| bad(mapping, "a block is missing its `)`"))?;
        let nums: Vec<&str> = body[..close].split(',').collect();
        if nums.len() != 3 {
            return Err(bad(
                mapping,
                format!(
                    "block ({}) has {} numbers, expected 3 (start,nnodes,ppn)",
                    &body[..close],
                    nums.len()
                ),
            ));
        }
        let num = |s: &str, what: &str| -> Result<u32> {
            s.parse::<u32>().map_err(|_| {
                bad(
                    mapping,
                    format!("{what} {s:?} is not a non-negative whole number"),
                )
            })
        };
        let block = Block {
            start: num(nums[0], "start")?,
            nnodes: num(nums[1], "nnodes")?,
            ppn: num(nums[2], "ppn")?,
        };
        if block.nnodes == 0 || block.ppn == 0 {
            return Err(bad(
                mapping,
                format!(
                    "block ({},{},{}) places no rank (nnodes and ppn must be at least 1)",
                    block.start, block.nnodes, block.ppn
                ),
            ));
        }
        if block.start.checked_add(block.nnodes - 1).is_none() {
            return Err(bad(
                mapping,
                format!(
                    "block ({},{},..) overflows node ids",
                    block.start, block.nnodes
                ),
            ));
        }
        blocks.push(block);
        rest = &body[close + 1..];
    }
    Ok(blocks)
}

/// Parses `(vector,(start,nnodes,ppn),...)` into the node id of each of `size` ranks.
/// Returns `Ok(None)` for an empty mapping (unknown: exchange hostnames instead).
pub fn parse(mapping: &str, size: u32) -> Result<Option<Vec<u32>>> {
    let blocks = parse_blocks(mapping)?;
    if blocks.is_empty() {
        return Ok(None);
    }
    Ok(Some(place(&blocks, size)))
}

/// Places `size` ranks on the nodes `blocks` describe, wrapping around when they run out.
pub fn place(blocks: &[Block], size: u32) -> Vec<u32> {
    debug_assert!(
        blocks.iter().all(|b| b.nnodes > 0 && b.ppn > 0),
        "place: every block must place at least one rank, got {blocks:?}"
    );
    let size = size as usize;
    let mut node_of = Vec::with_capacity(size);
    if blocks.is_empty() {
        return node_of;
    }
    'passes: loop {
        for b in blocks {
            for node in b.start..=b.start + (b.nnodes - 1) {
                for _ in 0..b.ppn {
                    if node_of.len() == size {
                        break 'passes;
                    }
                    node_of.push(node);
                }
            }
        }
    }
    node_of
}

/// Assigns node ids by first appearance of each host name: `["a","b","a"]` gives `[0,1,0]`.
pub fn nodes_from_hostnames<S: AsRef<str>>(hosts: &[S]) -> Vec<u32> {
    let mut seen: Vec<&str> = Vec::new();
    hosts
        .iter()
        .map(|h| {
            let h = h.as_ref();
            match seen.iter().position(|s| *s == h) {
                Some(i) => i as u32,
                None => {
                    seen.push(h);
                    (seen.len() - 1) as u32
                }
            }
        })
        .collect()
}

/// The mapping `weft run` serves for `size` ranks on one host.
pub fn single_node(size: u32) -> String {
    format!("(vector,(0,1,{size}))")
}

/// The shortest `(vector,...)` mapping that the ranks' `parse` turns back into `node_of` (what a
/// launcher serves once it has placed its ranks). Runs of equal ids become `ppn`, runs on
/// consecutive ids with equal lengths one block, and a repeating pattern is written once
/// (placement wraps around). Empty for no ranks.
pub fn encode(node_of: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &n in node_of {
        match runs.last_mut() {
            Some((node, count)) if *node == n => *count += 1,
            _ => runs.push((n, 1)),
        }
    }
    let mut blocks: Vec<Block> = Vec::new();
    for (node, count) in runs {
        match blocks.last_mut() {
            Some(b) if b.ppn == count && b.start.checked_add(b.nnodes) == Some(node) => {
                b.nnodes += 1
            }
            _ => blocks.push(Block {
                start: node,
                nnodes: 1,
                ppn: count,
            }),
        }
    }
    let size = node_of.len() as u32;
    let keep = (1..=blocks.len())
        .find(|&k| place(&blocks[..k], size) == node_of)
        .unwrap_or(blocks.len());
    let mut text = String::from("(vector");
    for b in &blocks[..keep] {
        text.push_str(&format!(",({},{},{})", b.start, b.nnodes, b.ppn));
    }
    text.push(')');
    if blocks.is_empty() {
        text.clear();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(m: &str, size: u32) -> Vec<u32> {
        parse(m, size).unwrap().unwrap()
    }

    #[test]
    fn empty_means_unknown() {
        assert_eq!(parse("", 4).unwrap(), None);
        assert_eq!(parse("   ", 4).unwrap(), None);
    }

    #[test]
    fn one_node_all_ranks() {
        assert_eq!(p("(vector,(0,1,4))", 4), vec![0, 0, 0, 0]);
        assert_eq!(p(&single_node(8), 8), vec![0; 8]);
    }

    #[test]
    fn hydra_one_host_wraps_around() {
        // Hydra's description of 4 ranks on one host: one rank per pass, four passes.
        assert_eq!(p("(vector,(0,1,1))", 4), vec![0, 0, 0, 0]);
        assert_eq!(p("(vector,(0,1,1))", 1), vec![0]);
    }

    #[test]
    fn block_placement_across_nodes() {
        assert_eq!(p("(vector,(0,2,2))", 4), vec![0, 0, 1, 1]);
        assert_eq!(p("(vector,(0,4,1))", 4), vec![0, 1, 2, 3]);
        assert_eq!(p("(vector,(0,2,3))", 5), vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn round_robin_wraps() {
        // Cyclic placement on 2 nodes: Hydra/Slurm write it as one rank per node per pass.
        assert_eq!(p("(vector,(0,2,1))", 5), vec![0, 1, 0, 1, 0]);
        assert_eq!(p("(vector,(0,2,2))", 6), vec![0, 0, 1, 1, 0, 0]);
    }

    #[test]
    fn several_blocks_and_gaps() {
        assert_eq!(p("(vector,(0,1,2),(2,1,2))", 4), vec![0, 0, 2, 2]);
        assert_eq!(p("(vector,(0,2,2),(5,1,1))", 7), vec![0, 0, 1, 1, 5, 0, 0]);
        assert_eq!(p("(vector,(3,2,1),(0,1,2))", 4), vec![3, 4, 0, 0]);
    }

    #[test]
    fn fewer_ranks_than_the_mapping_describes() {
        assert_eq!(p("(vector,(0,4,4))", 3), vec![0, 0, 0]);
        assert_eq!(p("(vector,(0,4,4))", 0), Vec::<u32>::new());
    }

    #[test]
    fn whitespace_is_tolerated() {
        assert_eq!(p(" ( vector , (0, 2, 1) ) \n", 2), vec![0, 1]);
    }

    #[test]
    fn empty_vector_is_unknown() {
        assert_eq!(parse("(vector)", 3).unwrap(), None);
    }

    #[test]
    fn malformed_mappings_are_errors_naming_the_text() {
        for bad in [
            "vector,(0,1,1)",
            "(list,(0,1,1))",
            "(vector,(0,1))",
            "(vector,(0,1,1,1))",
            "(vector,(0,1,1)",
            "(vector,(a,1,1))",
            "(vector,(-1,1,1))",
            "(vector,(0,0,1))",
            "(vector,(0,1,0))",
            "(vector(0,1,1))",
            "(vector,(0,1,1)x)",
            "(vector,(4294967295,2,1))",
        ] {
            let e = parse(bad, 4).unwrap_err();
            assert_eq!(e.class, ErrorClass::Boot, "{bad}");
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn encode_round_trips_in_short_form() {
        for (nodes, text) in [
            (&[0, 0, 1, 1][..], "(vector,(0,2,2))"),
            (&[0, 1, 0, 1], "(vector,(0,2,1))"),
            (&[0, 1, 0, 1, 0], "(vector,(0,2,1))"),
            (&[0, 0, 0, 0], "(vector,(0,1,4))"),
            (&[0, 1, 1, 1], "(vector,(0,1,1),(1,1,3))"),
            (&[0, 0, 0, 1, 1], "(vector,(0,1,3),(1,1,2))"),
            (&[2, 0, 2, 0], "(vector,(2,1,1),(0,1,1))"),
            (&[], ""),
        ] {
            assert_eq!(encode(nodes), text, "{nodes:?}");
            if !nodes.is_empty() {
                assert_eq!(p(text, nodes.len() as u32), nodes, "{text}");
            }
        }
        // Any placement survives the round trip.
        let mut x = 12345u32;
        for _ in 0..200 {
            let n = (x % 13) as usize + 1;
            let nodes: Vec<u32> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) % 4
                })
                .collect();
            assert_eq!(p(&encode(&nodes), n as u32), nodes);
        }
    }

    #[test]
    fn hostnames_by_first_appearance() {
        assert_eq!(
            nodes_from_hostnames(&["b", "a", "b", "c", "a"]),
            vec![0, 1, 0, 2, 1]
        );
        assert_eq!(nodes_from_hostnames::<&str>(&[]), Vec::<u32>::new());
    }
}
