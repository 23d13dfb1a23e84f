//! A datatype's layout as C sees it: the weft type map (byte blocks and the extent, where
//! element `i` starts `i * extent` bytes after the buffer's address), the lower and upper
//! bounds, the true bounds, the alignment, and the basic elements in type-map order (for
//! MPI_Get_elements and external32).

use std::sync::Arc;
use weft::datatype::TypeMap;

/// See the module's comment.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    map: Arc<TypeMap>,
    pub(crate) lb: isize,
    pub(crate) ub: isize,
    pub(crate) true_lb: isize,
    pub(crate) true_ub: isize,
    /// The largest alignment of the basic types inside (a struct's extent is padded to it).
    pub(crate) align: usize,
    /// The basic elements of one element, in type-map order: runs of (bytes, the unit to
    /// swap for external32, how many in a row).
    pub(crate) runs: Vec<Run>,
    /// A predefined type's (its map lives for the program: views borrow it).
    predefined: bool,
}

/// `count` basic elements in a row, of `size` bytes each, made of values of `unit` bytes
/// (a complex number: two; otherwise one); in external32, `external` bytes each (less than
/// `size` for C's `long`: 4 bytes there), sign-extended back when `signed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) size: usize,
    pub(crate) unit: usize,
    pub(crate) count: usize,
    pub(crate) external: usize,
    pub(crate) signed: bool,
}

/// `count` copies of `old`, back to back, the first `disp` bytes from the origin.
pub(crate) struct Piece<'a> {
    pub(crate) disp: isize,
    pub(crate) count: usize,
    pub(crate) old: &'a Shape,
}

impl Shape {
    /// A predefined type: `map` (lower bound 0, its extent as upper bound), made of `runs`.
    pub(crate) fn predefined(map: TypeMap, align: usize, runs: Vec<Run>) -> Shape {
        let ub = map.extent() as isize;
        let (true_lb, true_ub) = true_bounds(&map);
        Shape {
            map: Arc::new(map),
            lb: 0,
            ub,
            true_lb,
            true_ub,
            align,
            runs,
            predefined: true,
        }
    }

    /// The type made of `pieces` (in type-map order), its bounds those of the pieces; a
    /// struct's (`pad`) upper bound is rounded up so the extent is a multiple of the largest
    /// alignment inside, as C lays out a struct.
    pub(crate) fn compose(pieces: &[Piece<'_>], pad: bool) -> Shape {
        let mut bounds: Option<(isize, isize)> = None;
        let mut align = 1;
        let mut runs: Vec<Run> = vec![];
        for p in pieces.iter().filter(|p| p.count > 0) {
            let ext = p.old.extent();
            let lo = p.disp + p.old.lb;
            let hi = p.disp + (p.count as isize - 1) * ext + p.old.ub;
            bounds = Some(bounds.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
            align = align.max(p.old.align);
            if let [r] = p.old.runs[..] {
                let count = r.count.saturating_mul(p.count);
                push_runs(&mut runs, &[Run { count, ..r }]);
            } else {
                for _ in 0..p.count {
                    push_runs(&mut runs, &p.old.runs);
                }
            }
        }
        let (lb, mut ub) = bounds.unwrap_or((0, 0));
        if pad && pieces.iter().any(|p| p.count > 0) {
            let rem = (ub - lb).rem_euclid(align as isize);
            if rem != 0 {
                ub += align as isize - rem;
            }
        }
        let extent = (ub - lb).max(0) as usize;
        // Copies of a type whose elements lie back to back make one block, however many.
        let runs_of: Vec<Option<TypeMap>> = pieces
            .iter()
            .map(|p| {
                let m = p.old.type_map();
                let plain = p.count > 1 && p.old.extent() == m.extent() as isize;
                plain.then(|| m.repeated(p.count)).flatten()
            })
            .collect();
        let parts = pieces.iter().zip(&runs_of).flat_map(|(p, run)| {
            let ext = p.old.extent();
            let (n, map) = match run {
                Some(m) => (1, m),
                None => (p.count as isize, p.old.type_map()),
            };
            (0..n).map(move |j| (p.disp + j * ext, map))
        });
        let map = TypeMap::from_parts(parts, extent);
        let (true_lb, true_ub) = true_bounds(&map);
        Shape {
            map: Arc::new(map),
            lb,
            ub,
            true_lb,
            true_ub,
            align,
            runs,
            predefined: false,
        }
    }

    /// About how many blocks and runs the type made of `pieces` would have (its memory is
    /// proportional: the type map is flattened).
    pub(crate) fn estimate(pieces: &[Piece<'_>]) -> usize {
        pieces
            .iter()
            .map(|p| {
                let m = p.old.type_map();
                let one_block = m.is_contiguous() && !m.is_restricted();
                let blocks = if one_block {
                    1
                } else {
                    p.count.saturating_mul(m.blocks().len())
                };
                let runs = if p.old.runs.len() == 1 {
                    1
                } else {
                    p.count.saturating_mul(p.old.runs.len())
                };
                blocks.saturating_add(runs)
            })
            .fold(0usize, usize::saturating_add)
    }

    /// `self` with the bounds `lb` and `lb + extent` (MPI_Type_create_resized).
    pub(crate) fn resized(&self, lb: isize, extent: usize) -> Shape {
        let map = TypeMap::from_parts([(0, self.type_map())], extent);
        Shape {
            map: Arc::new(map),
            lb,
            ub: lb + extent as isize,
            predefined: false,
            ..self.clone()
        }
    }

    /// A copy for a new user type (MPI_Type_dup of a predefined type).
    pub(crate) fn to_user(&self) -> Shape {
        Shape {
            map: Arc::new(self.type_map().clone()),
            predefined: false,
            ..self.clone()
        }
    }

    pub(crate) fn type_map(&self) -> &TypeMap {
        &self.map
    }
    /// The map to share with a pending operation, for a user type (`None`: predefined,
    /// borrowed for the program).
    pub(crate) fn shared(&self) -> Option<&Arc<TypeMap>> {
        (!self.predefined).then_some(&self.map)
    }
    pub(crate) fn size(&self) -> usize {
        self.map.size()
    }
    pub(crate) fn extent(&self) -> isize {
        self.ub - self.lb
    }
    /// Bytes of one element in external32.
    pub(crate) fn external_size(&self) -> usize {
        self.runs.iter().map(|r| r.external * r.count).sum()
    }

    /// Basic elements in one element.
    pub(crate) fn elements(&self) -> usize {
        self.runs.iter().map(|r| r.count).sum()
    }

    /// Basic elements in `bytes` bytes of packed data: `None` when they end inside one.
    pub(crate) fn elements_in(&self, bytes: usize) -> Option<usize> {
        let size = self.size();
        if size == 0 {
            return Some(0);
        }
        let mut n = (bytes / size) * self.elements();
        let mut rest = bytes % size;
        for r in &self.runs {
            if rest == 0 {
                break;
            }
            let whole = (rest / r.size).min(r.count);
            n += whole;
            rest -= whole * r.size;
            if whole < r.count && rest > 0 {
                return None;
            }
        }
        (rest == 0).then_some(n)
    }
}

/// Appends `more` to `runs`, merging a run with the one before it when they are alike.
fn push_runs(runs: &mut Vec<Run>, more: &[Run]) {
    for &r in more {
        match runs.last_mut() {
            Some(last) if Run { count: 0, ..*last } == Run { count: 0, ..r } => {
                last.count += r.count
            }
            _ => runs.push(r),
        }
    }
}

/// The lowest and highest byte of data in one element, relative to its origin.
fn true_bounds(map: &TypeMap) -> (isize, isize) {
    let blocks = map.blocks();
    if blocks.is_empty() {
        return (0, 0);
    }
    let lo = blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let hi = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0);
    (lo, hi)
}
