//! Groups: ordered sets of world ranks, and MPI's set operations on them.

/// How two groups relate (MPI_IDENT, MPI_SIMILAR, MPI_UNEQUAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// Same members in the same order.
    Identical,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

/// An ordered list of distinct world ranks; a member's position is its rank in the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupData {
    members: Vec<u32>,
}

impl GroupData {
    /// A group of `members` (world ranks, distinct).
    pub fn new(members: Vec<u32>) -> Self {
        debug_assert!(
            {
                let mut m = members.clone();
                m.sort_unstable();
                m.windows(2).all(|w| w[0] != w[1])
            },
            "group members must be distinct: {members:?}"
        );
        GroupData { members }
    }
    /// The world ranks, in group order.
    pub fn members(&self) -> &[u32] {
        &self.members
    }
    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }
    /// Position of world rank `w`, if a member.
    pub fn rank_of(&self, w: u32) -> Option<usize> {
        self.members.iter().position(|&m| m == w)
    }
    /// Whether world rank `w` is a member.
    pub fn contains(&self, w: u32) -> bool {
        self.members.contains(&w)
    }
    /// Members at positions `ranks`, in that order (caller validated the positions).
    pub fn include(&self, ranks: &[usize]) -> GroupData {
        GroupData::new(ranks.iter().map(|&r| self.members[r]).collect())
    }
    /// Members not at positions `ranks`, in group order.
    pub fn exclude(&self, ranks: &[usize]) -> GroupData {
        GroupData::new(
            self.members
                .iter()
                .enumerate()
                .filter(|(i, _)| !ranks.contains(i))
                .map(|(_, &m)| m)
                .collect(),
        )
    }
    /// Members of self, then members of `other` not in self.
    pub fn union(&self, other: &GroupData) -> GroupData {
        let mut m = self.members.clone();
        m.extend(other.members.iter().filter(|w| !self.contains(**w)));
        GroupData::new(m)
    }
    /// Members of self also in `other`, in self's order.
    pub fn intersection(&self, other: &GroupData) -> GroupData {
        GroupData::new(
            self.members
                .iter()
                .copied()
                .filter(|w| other.contains(*w))
                .collect(),
        )
    }
    /// Members of self not in `other`, in self's order.
    pub fn difference(&self, other: &GroupData) -> GroupData {
        GroupData::new(
            self.members
                .iter()
                .copied()
                .filter(|w| !other.contains(*w))
                .collect(),
        )
    }
    /// The rank in `other` of the member at position `rank` here.
    pub fn translate(&self, rank: usize, other: &GroupData) -> Option<usize> {
        other.rank_of(*self.members.get(rank)?)
    }
    /// MPI's group comparison.
    pub fn compare(&self, other: &GroupData) -> Relation {
        if self.members == other.members {
            Relation::Identical
        } else if self.size() == other.size() && self.members.iter().all(|w| other.contains(*w)) {
            Relation::Similar
        } else {
            Relation::Unequal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_follow_mpi_order_rules() {
        let g = GroupData::new(vec![0, 1, 2, 3, 4, 5]);
        let a = g.include(&[4, 1, 3]);
        assert_eq!(a.members(), &[4, 1, 3]);
        assert_eq!(g.exclude(&[0, 2]).members(), &[1, 3, 4, 5]);
        let b = GroupData::new(vec![3, 5, 0]);
        assert_eq!(a.union(&b).members(), &[4, 1, 3, 5, 0]);
        assert_eq!(a.intersection(&b).members(), &[3]);
        assert_eq!(a.difference(&b).members(), &[4, 1]);
        assert_eq!(a.translate(0, &g), Some(4));
        assert_eq!(a.translate(1, &b), None);
        assert_eq!(a.compare(&GroupData::new(vec![1, 3, 4])), Relation::Similar);
        assert_eq!(a.compare(&a.clone()), Relation::Identical);
        assert_eq!(a.compare(&b), Relation::Unequal);
        assert_eq!(
            g.difference(&g).compare(&GroupData::default()),
            Relation::Identical
        );
    }
}
