//! A datatype's layout as C sees it: the weft type map (byte blocks and the extent, where
//! element `i` starts `i * extent` bytes after the buffer's address), the lower and upper
//! bounds, the true bounds, the alignment, and the basic elements in type-map order (for
//! MPI_Get_elements and external32).

use crate::datatype::TypeMap;
use std::sync::Arc;

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
            // Copy j spans lb + j * ext .. ub + j * ext; a negative extent steps down.
            let last = (p.count as isize - 1) * p.old.extent();
            let lo = p.disp + p.old.lb + last.min(0);
            let hi = p.disp + p.old.ub + last.max(0);
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
    /// A negative `extent` is kept in the bounds; the map steps by 0 then, so such a type
    /// moves one element at a time (see `stride_ok`).
    pub(crate) fn resized(&self, lb: isize, extent: isize) -> Shape {
        let map = TypeMap::from_parts([(0, self.type_map())], extent.max(0) as usize);
        Shape {
            map: Arc::new(map),
            lb,
            ub: lb + extent,
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
    /// Whether `count` elements can be laid out by the map: a type of negative extent
    /// (MPI_Type_create_resized allows one) only one at a time, its map stepping by 0.
    pub(crate) fn stride_ok(&self, count: usize) -> bool {
        count <= 1 || self.extent() >= 0
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

    /// Bytes of packed data that hold `n` basic elements (the inverse of `elements_in`).
    pub(crate) fn bytes_of(&self, n: usize) -> usize {
        let per = self.elements();
        if per == 0 {
            return 0;
        }
        let mut bytes = (n / per) * self.size();
        let mut rest = n % per;
        for r in &self.runs {
            let take = rest.min(r.count);
            bytes += take * r.size;
            rest -= take;
        }
        bytes
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::map_of;

    fn int() -> Shape {
        let run = Run {
            size: 4,
            unit: 4,
            count: 1,
            external: 4,
            signed: true,
        };
        Shape::predefined(map_of::<i32>(), 4, vec![run])
    }

    fn piece(disp: isize, count: usize, old: &Shape) -> Piece<'_> {
        Piece { disp, count, old }
    }

    #[test]
    fn bounds_of_strided_and_negative_pieces() {
        let i = int();
        // A vector: 3 blocks of 2 ints, 4 ints apart.
        let v = Shape::compose(
            &[piece(0, 2, &i), piece(16, 2, &i), piece(32, 2, &i)],
            false,
        );
        assert_eq!((v.lb, v.ub, v.size(), v.elements()), (0, 40, 24, 6));
        assert_eq!(v.type_map().blocks(), &[(0, 8), (16, 8), (32, 8)]);
        // Displacements below the origin: the lower bound follows them.
        let h = Shape::compose(&[piece(8, 1, &i), piece(-4, 1, &i)], false);
        assert_eq!((h.lb, h.ub, h.true_lb, h.true_ub), (-4, 12, -4, 12));
        // Resized: the bounds change, the data does not.
        let r = i.resized(-4, 16);
        let n = i.resized(6, -9);
        let c = Shape::compose(&[piece(0, 3, &n)], false);
        assert_eq!((c.lb, c.ub), (-12, -3));
        assert_eq!(
            (r.lb, r.extent(), r.size(), r.true_lb, r.true_ub),
            (-4, 16, 4, 0, 4)
        );
        // No copies at all: empty bounds.
        let e = Shape::compose(&[piece(100, 0, &i)], false);
        assert_eq!((e.lb, e.ub, e.size()), (0, 0, 0));
    }

    #[test]
    fn a_struct_is_padded_to_its_largest_alignment() {
        let c = Shape::predefined(
            map_of::<i8>(),
            1,
            vec![Run {
                size: 1,
                unit: 1,
                count: 1,
                external: 1,
                signed: true,
            }],
        );
        let d = Shape::predefined(
            map_of::<f64>(),
            8,
            vec![Run {
                size: 8,
                unit: 8,
                count: 1,
                external: 8,
                signed: false,
            }],
        );
        let s = Shape::compose(
            &[piece(0, 1, &c), piece(8, 1, &d), piece(16, 1, &int())],
            true,
        );
        assert_eq!((s.extent(), s.size(), s.true_ub), (24, 13, 20));
        assert_eq!(s.runs.len(), 3);
    }

    #[test]
    fn basic_elements_in_partial_data() {
        let i = int();
        let v = Shape::compose(&[piece(0, 2, &i), piece(16, 2, &i)], false);
        assert_eq!(v.elements_in(32), Some(8));
        assert_eq!(v.elements_in(12), Some(3));
        assert_eq!(v.elements_in(14), None);
        // Copies of a contiguous type are one block and one run, however many.
        let big = Shape::compose(&[piece(0, 1 << 33, &i)], false);
        assert_eq!(big.type_map().blocks().len(), 1);
        assert_eq!((big.runs.len(), big.elements()), (1, 1 << 33));
        assert!(Shape::estimate(&[piece(0, 1 << 33, &i)]) < 4);
        assert!(Shape::estimate(&[piece(0, 1 << 33, &v)]) > 1 << 33);
    }
}
