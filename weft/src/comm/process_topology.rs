//! Process topologies (MPI's "virtual topologies"): a Cartesian grid, a graph, or a
//! distributed graph attached to a communicator. Plain data and pure functions: the
//! coordinate and rank arithmetic, shifts, sub-grids, argument checks and each member's
//! neighbour lists, which the neighbourhood collectives follow. Ranks here are ranks of the
//! communicator the topology belongs to.
//!
//! A Cartesian grid and a graph are the same at every member (each member passed the same
//! arguments); a distributed graph is each member's own view: its in-edges and out-edges.

use crate::error::{Error, ErrorClass, Result};

/// The topology a communicator carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessTopology {
    /// A grid of `dims` (MPI_Cart_create).
    Cartesian(Cartesian),
    /// A graph known to every member (MPI_Graph_create).
    Graph(Graph),
    /// This member's edges of a distributed graph (MPI_Dist_graph_create(_adjacent)).
    DistGraph(DistGraph),
}

impl ProcessTopology {
    /// Member `rank`'s neighbours, in the order the neighbourhood collectives use.
    pub fn neighbors(&self, rank: u32) -> Neighbors {
        match self {
            ProcessTopology::Cartesian(c) => {
                let n = c.neighbors(rank);
                Neighbors {
                    sources: n.clone(),
                    destinations: n,
                    cartesian_pairs: true,
                }
            }
            ProcessTopology::Graph(g) => {
                let n: Vec<Option<u32>> = g.neighbors(rank).iter().map(|&r| Some(r)).collect();
                Neighbors {
                    sources: n.clone(),
                    destinations: n,
                    cartesian_pairs: false,
                }
            }
            ProcessTopology::DistGraph(d) => Neighbors {
                sources: d.sources.iter().map(|&r| Some(r)).collect(),
                destinations: d.destinations.iter().map(|&r| Some(r)).collect(),
                cartesian_pairs: false,
            },
        }
    }
}

/// One member's neighbours for a neighbourhood collective: block `k` of its output comes from
/// `sources[k]`, block `k` of its input (or all of it) goes to `destinations[k]`. `None` is
/// MPI_PROC_NULL, the missing neighbour at a non-periodic edge of a grid: it takes part as an
/// empty exchange (nothing sent, the block left as it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbors {
    /// Where each received block comes from.
    pub sources: Vec<Option<u32>>,
    /// Where each sent block goes.
    pub destinations: Vec<Option<u32>>,
    /// Blocks come in pairs, (−1, +1) of each grid dimension. A message sent towards −1
    /// arrives as the one from +1 even when both neighbours are the same member (a periodic
    /// dimension of size 1 or 2), so the collectives post each pair's receives +1 first and
    /// its sends −1 first: messages between two members match in order.
    pub cartesian_pairs: bool,
}

// ----- Cartesian grids --------------------------------------------------------------------

/// A Cartesian grid: members are numbered in row-major order (the last dimension varies
/// fastest), as MPI_Cart_create numbers them without reordering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cartesian {
    /// Extent of each dimension (each ≥ 1).
    pub dims: Vec<i32>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
}

/// The communicator split that MPI_Cart_sub makes, for one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubGrid {
    /// Members with equal coordinates in the dropped dimensions share a color.
    pub color: i32,
    /// The member's rank in its sub-grid.
    pub key: i32,
    /// The sub-grid: the kept dimensions.
    pub grid: Cartesian,
}

impl Cartesian {
    /// Checks `dims` and `periods` for `call` on a communicator of `comm_size` members.
    pub fn new(call: &'static str, dims: &[i32], periods: &[bool], comm_size: u32) -> Result<Self> {
        if dims.len() != periods.len() {
            return Err(Error::new(
                ErrorClass::Dims,
                call,
                format!(
                    "dims has {} entries and periods {}: they must be the same length",
                    dims.len(),
                    periods.len()
                ),
            ));
        }
        if let Some((i, d)) = dims.iter().enumerate().find(|(_, &d)| d <= 0) {
            return Err(Error::new(
                ErrorClass::Dims,
                call,
                format!("dims[{i}] is {d}: every dimension needs at least one member (dims {dims:?})"),
            ));
        }
        let product = dims.iter().try_fold(1u64, |p, &d| {
            p.checked_mul(d as u64).filter(|&p| p <= u32::MAX as u64)
        });
        match product {
            Some(p) if p <= comm_size as u64 => {}
            _ => {
                return Err(Error::new(
                    ErrorClass::Dims,
                    call,
                    format!(
                        "dims {dims:?} make a grid of {} members, more than the communicator's \
                         {comm_size}",
                        product.map_or("too many".to_string(), |p| p.to_string())
                    ),
                ))
            }
        }
        Ok(Cartesian {
            dims: dims.to_vec(),
            periods: periods.to_vec(),
        })
    }

    /// Number of dimensions.
    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// Number of members in the grid (1 for a grid without dimensions).
    pub fn size(&self) -> u32 {
        self.dims.iter().map(|&d| d as u32).product()
    }

    /// The coordinates of member `rank` (`rank < size()`).
    pub fn coords(&self, rank: u32) -> Vec<i32> {
        debug_assert!(rank < self.size(), "rank {rank} outside a grid of {}", self.size());
        let mut c = vec![0; self.ndims()];
        let mut r = rank as i64;
        for (i, &d) in self.dims.iter().enumerate().rev() {
            c[i] = (r % d as i64) as i32;
            r /= d as i64;
        }
        c
    }

    /// The member at `coords`; periodic dimensions wrap, others must be in range.
    pub fn rank(&self, call: &'static str, coords: &[i32]) -> Result<u32> {
        if coords.len() != self.ndims() {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!(
                    "{} coordinates given for a grid of {} dimensions",
                    coords.len(),
                    self.ndims()
                ),
            ));
        }
        let mut r = 0u32;
        for (i, (&c, &d)) in coords.iter().zip(&self.dims).enumerate() {
            let c = if self.periods[i] {
                c.rem_euclid(d)
            } else if (0..d).contains(&c) {
                c
            } else {
                return Err(Error::new(
                    ErrorClass::Arg,
                    call,
                    format!(
                        "coordinate {c} of dimension {i} is outside 0..{d}, and the dimension \
                         is not periodic (coordinates {coords:?})"
                    ),
                ));
            };
            r = r * d as u32 + c as u32;
        }
        Ok(r)
    }

    /// MPI_Cart_shift: the members `disp` places before and after member `rank` along
    /// dimension `dim`, as (source, destination); `None` past a non-periodic edge.
    pub fn shift(
        &self,
        call: &'static str,
        rank: u32,
        dim: i32,
        disp: i32,
    ) -> Result<(Option<u32>, Option<u32>)> {
        if dim < 0 || dim as usize >= self.ndims() {
            return Err(Error::new(
                ErrorClass::Dims,
                call,
                format!(
                    "dimension {dim} does not exist in a grid of {} dimensions",
                    self.ndims()
                ),
            ));
        }
        let d = dim as usize;
        let at = |offset: i64| -> Option<u32> {
            let mut c = self.coords(rank);
            let moved = c[d] as i64 + offset;
            let extent = self.dims[d] as i64;
            c[d] = if self.periods[d] {
                moved.rem_euclid(extent) as i32
            } else if (0..extent).contains(&moved) {
                moved as i32
            } else {
                return None;
            };
            Some(self.rank(call, &c).expect("coordinates in range"))
        };
        Ok((at(-(disp as i64)), at(disp as i64)))
    }

    /// Member `rank`'s neighbours: for each dimension the one at −1, then the one at +1.
    pub fn neighbors(&self, rank: u32) -> Vec<Option<u32>> {
        (0..self.ndims() as i32)
            .flat_map(|d| {
                let (before, after) = self.shift("neighbors", rank, d, 1).expect("d in range");
                [before, after]
            })
            .collect()
    }

    /// MPI_Cart_sub: the split that keeps the dimensions where `retain` is true.
    pub fn sub(&self, call: &'static str, rank: u32, retain: &[bool]) -> Result<SubGrid> {
        if retain.len() != self.ndims() {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!(
                    "retain has {} entries for a grid of {} dimensions",
                    retain.len(),
                    self.ndims()
                ),
            ));
        }
        let c = self.coords(rank);
        let (mut color, mut key) = (0i32, 0i32);
        let mut grid = Cartesian {
            dims: Vec::new(),
            periods: Vec::new(),
        };
        for i in 0..self.ndims() {
            if retain[i] {
                key = key * self.dims[i] + c[i];
                grid.dims.push(self.dims[i]);
                grid.periods.push(self.periods[i]);
            } else {
                color = color * self.dims[i] + c[i];
            }
        }
        Ok(SubGrid { color, key, grid })
    }
}

/// MPI_Dims_create: fills the zero entries of `dims` so that the product of all entries is
/// `nnodes`, with the filled ones as close to each other as possible and in non-increasing
/// order. Non-zero entries are kept.
pub fn dims_create(call: &'static str, nnodes: i32, dims: &mut [i32]) -> Result<()> {
    let err = |detail: String| Err(Error::new(ErrorClass::Dims, call, detail));
    if nnodes <= 0 {
        return err(format!("nnodes is {nnodes}: it must be positive"));
    }
    if let Some((i, d)) = dims.iter().enumerate().find(|(_, &d)| d < 0) {
        return err(format!("dims[{i}] is {d}: entries must be 0 (free) or positive"));
    }
    let fixed: i64 = dims.iter().filter(|&&d| d > 0).map(|&d| d as i64).product();
    let free = dims.iter().filter(|&&d| d == 0).count();
    if nnodes as i64 % fixed != 0 || (free == 0 && fixed != nnodes as i64) {
        return err(format!(
            "the fixed entries of dims {dims:?} (product {fixed}) do not divide nnodes {nnodes}{}",
            if free == 0 { " exactly" } else { "" }
        ));
    }
    let rest = (nnodes as i64 / fixed) as u32;
    let mut divisors: Vec<u32> = (1..)
        .take_while(|&d: &u32| (d as u64) * (d as u64) <= rest as u64)
        .filter(|&d| rest.is_multiple_of(d))
        .flat_map(|d| [d, rest / d])
        .collect();
    divisors.sort_unstable();
    divisors.dedup();
    let mut best = None;
    balanced_factors(rest, free, &divisors, &mut Vec::with_capacity(free), &mut best);
    let mut factors = best.unwrap_or_default().into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        *d = factors.next().expect("one factor per free entry") as i32;
    }
    Ok(())
}

/// Searches the factorisations of `n` into `k` more factors (from `divisors`, ascending),
/// each at most the last of `prefix`, for the one whose largest and smallest factors are
/// closest; keeps it in `best`.
fn balanced_factors(
    n: u32,
    k: usize,
    divisors: &[u32],
    prefix: &mut Vec<u32>,
    best: &mut Option<Vec<u32>>,
) {
    let spread = |v: &[u32]| v[0] - v[v.len() - 1];
    // Closest: the smallest spread; among equal spreads, the one whose smallest factor is
    // largest, then the next smallest, and so on (MPICH's choice too: 13 x 9 x 8 x 6 before
    // 13 x 12 x 6 x 6, and 21 x 16 x 15 before 20 x 18 x 14).
    if k == 0 {
        let better = |b: &Vec<u32>| {
            let s = (spread(prefix), spread(b));
            s.0 < s.1 || (s.0 == s.1 && prefix.iter().rev().gt(b.iter().rev()))
        };
        if n == 1 && !prefix.is_empty() && best.as_ref().is_none_or(better) {
            *best = Some(prefix.clone());
        }
        return;
    }
    let max = prefix.last().copied().unwrap_or(u32::MAX);
    // Smallest first, from the k-th root of n up (the largest of the remaining k factors is
    // at least that): the closest factorisations come early and bound the rest.
    let from = divisors
        .partition_point(|&d| (d as u64).checked_pow(k as u32).is_some_and(|p| p < n as u64));
    for &d in &divisors[from..] {
        if d > max {
            break;
        }
        if !n.is_multiple_of(d) {
            continue;
        }
        // The last factor is at most d, and at most the (k−1)-th root of what remains, so
        // the spread is at least first minus the smaller of the two.
        let first = prefix.first().copied().unwrap_or(d);
        let rest_root = if k > 1 { root(n / d, k - 1) } else { d };
        let last = d.min(rest_root);
        // Hopeless: a wider spread, or the same one with a smaller smallest factor. Past the
        // root of what remains, a larger d only widens the bound (first grows, or the root
        // shrinks), so nothing later can do better.
        let hopeless = |b: &Vec<u32>| {
            let (lower, theirs) = (first - last, spread(b));
            lower > theirs || (lower == theirs && last < b[b.len() - 1])
        };
        if best.as_ref().is_some_and(hopeless) {
            if d >= rest_root {
                break;
            }
            continue;
        }
        prefix.push(d);
        balanced_factors(n / d, k - 1, divisors, prefix, best);
        prefix.pop();
    }
}

/// The largest r with r^k <= n.
fn root(n: u32, k: usize) -> u32 {
    let mut r = (f64::from(n).powf(1.0 / k as f64)).round() as u32;
    let fits = |r: u32| (r as u64).checked_pow(k as u32).is_some_and(|p| p <= n as u64);
    while r > 0 && !fits(r) {
        r -= 1;
    }
    while fits(r + 1) {
        r += 1;
    }
    r
}

// ----- graphs -----------------------------------------------------------------------------

/// A graph known to every member, in MPI_Graph_create's form: member `i`'s neighbours are
/// `edges[index[i-1]..index[i]]` (from 0 for member 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// Cumulative neighbour counts, one per node.
    pub index: Vec<i32>,
    /// The neighbours of every node, node after node.
    pub edges: Vec<u32>,
    /// Where the graph is not symmetric, found once at creation (see [`Graph::asymmetry`]).
    asymmetry: Option<String>,
}

impl Graph {
    /// Checks MPI_Graph_create's arguments for `call` on a communicator of `comm_size`.
    pub fn new(call: &'static str, index: &[i32], edges: &[i32], comm_size: u32) -> Result<Self> {
        let err = |detail: String| Err(Error::new(ErrorClass::Arg, call, detail));
        let nnodes = index.len();
        if nnodes > comm_size as usize {
            return err(format!(
                "the graph has {nnodes} nodes, more than the communicator's {comm_size} members"
            ));
        }
        let mut prev = 0;
        for (i, &x) in index.iter().enumerate() {
            if x < prev {
                return err(format!(
                    "index[{i}] is {x}, below the {prev} before it: index holds cumulative \
                     neighbour counts (index {index:?})"
                ));
            }
            prev = x;
        }
        if prev as usize != edges.len() {
            return err(format!(
                "index ends at {prev} but edges has {} entries (index {index:?})",
                edges.len()
            ));
        }
        if let Some((i, e)) = edges.iter().enumerate().find(|(_, &e)| e < 0 || e as usize >= nnodes) {
            return err(format!(
                "edges[{i}] is {e}, not a node of a graph of {nnodes} nodes"
            ));
        }
        let mut g = Graph {
            index: index.to_vec(),
            edges: edges.iter().map(|&e| e as u32).collect(),
            asymmetry: None,
        };
        g.asymmetry = g.find_asymmetry();
        Ok(g)
    }

    /// Number of nodes.
    pub fn nnodes(&self) -> usize {
        self.index.len()
    }

    /// Node `rank`'s neighbours (MPI_Graph_neighbors order).
    pub fn neighbors(&self, rank: u32) -> &[u32] {
        let r = rank as usize;
        let start = if r == 0 { 0 } else { self.index[r - 1] as usize };
        &self.edges[start..self.index[r] as usize]
    }

    /// Where the graph is not symmetric (with multiplicity): the neighbourhood collectives on
    /// a graph send to and receive from the same list, so each edge needs its reverse.
    pub fn asymmetry(&self) -> Option<&str> {
        self.asymmetry.as_deref()
    }

    /// Compares the sorted edges with the sorted reversed edges: O(E log E).
    fn find_asymmetry(&self) -> Option<String> {
        let mut listed: Vec<(u32, u32)> = (0..self.nnodes() as u32)
            .flat_map(|a| self.neighbors(a).iter().map(move |&b| (a, b)))
            .collect();
        let mut reversed: Vec<(u32, u32)> = listed.iter().map(|&(a, b)| (b, a)).collect();
        listed.sort_unstable();
        reversed.sort_unstable();
        let i = listed.iter().zip(&reversed).position(|(x, y)| x != y)?;
        // The smaller of the two is listed a different number of times each way.
        let (a, b) = listed[i].min(reversed[i]);
        let count = |v: &[(u32, u32)]| {
            v.partition_point(|&x| x <= (a, b)) - v.partition_point(|&x| x < (a, b))
        };
        Some(format!(
            "node {a} lists node {b} {} time(s) but node {b} lists node {a} {} time(s)",
            count(&listed),
            count(&reversed)
        ))
    }
}

/// One member's part of a distributed graph: its in-edges and out-edges, with weights when
/// the graph has them (`None`: MPI_UNWEIGHTED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistGraph {
    /// Members with an edge to this one.
    pub sources: Vec<u32>,
    /// The weight of each in-edge.
    pub source_weights: Option<Vec<i32>>,
    /// Members this one has an edge to.
    pub destinations: Vec<u32>,
    /// The weight of each out-edge.
    pub destination_weights: Option<Vec<i32>>,
}

impl DistGraph {
    /// Checks MPI_Dist_graph_create_adjacent's arguments for `call` on a communicator of
    /// `comm_size` members.
    pub fn adjacent(
        call: &'static str,
        (sources, source_weights): (&[i32], Option<&[i32]>),
        (destinations, destination_weights): (&[i32], Option<&[i32]>),
        comm_size: u32,
    ) -> Result<Self> {
        let ranks = |what: &str, v: &[i32]| -> Result<Vec<u32>> {
            v.iter()
                .enumerate()
                .map(|(i, &r)| {
                    if r < 0 || r as u32 >= comm_size {
                        return Err(Error::new(
                            ErrorClass::Rank,
                            call,
                            format!(
                                "{what}[{i}] is {r}, outside a communicator of {comm_size} members"
                            ),
                        ));
                    }
                    Ok(r as u32)
                })
                .collect()
        };
        let weights = |what: &str, w: Option<&[i32]>, n: usize| -> Result<Option<Vec<i32>>> {
            let Some(w) = w else { return Ok(None) };
            if w.len() != n {
                return Err(Error::new(
                    ErrorClass::Arg,
                    call,
                    format!("{what} has {} entries for {n} edges", w.len()),
                ));
            }
            if let Some((i, x)) = w.iter().enumerate().find(|(_, &x)| x < 0) {
                return Err(Error::new(
                    ErrorClass::Arg,
                    call,
                    format!("{what}[{i}] is {x}: weights must not be negative"),
                ));
            }
            Ok(Some(w.to_vec()))
        };
        Ok(DistGraph {
            sources: ranks("sources", sources)?,
            source_weights: weights("source_weights", source_weights, sources.len())?,
            destinations: ranks("destinations", destinations)?,
            destination_weights: weights(
                "destination_weights",
                destination_weights,
                destinations.len(),
            )?,
        })
    }
}

#[cfg(test)]
mod tests;

