//! Where a communicator's members are, node by node: its members on this rank's node and the
//! leader of each node (for shared-memory and hierarchical collectives). Computed from the
//! job's node map, with no messages, once per communicator handle (cached lazily).

/// A communicator's members by node, as one member sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTopology {
    /// Communicator ranks on this member's node, in rank order.
    pub local: Vec<u32>,
    /// This member's position in `local`.
    pub local_rank: usize,
    /// The leader of each node: its lowest communicator rank; in increasing rank order.
    pub leaders: Vec<u32>,
    /// Which of `leaders` leads this member's node.
    pub node_index: usize,
    /// For each communicator rank, which of `leaders` leads its node.
    pub node_of_member: Vec<u32>,
}

impl NodeTopology {
    /// The topology of a communicator whose member `r` is world rank `members[r]`, seen by
    /// member `me`; `node_of[w]` is world rank `w`'s node.
    pub fn of(members: &[u32], me: u32, node_of: &[u32]) -> Self {
        let node = |r: usize| node_of[members[r] as usize];
        let mine = node(me as usize);
        let local: Vec<u32> = (0..members.len())
            .filter(|&r| node(r) == mine)
            .map(|r| r as u32)
            .collect();
        let local_rank = local
            .iter()
            .position(|&r| r == me)
            .expect("a member is on its own node");
        // A member leads its node when no lower rank is on the same node.
        let mut seen = std::collections::HashSet::new();
        let leaders: Vec<u32> = (0..members.len())
            .filter(|&r| seen.insert(node(r)))
            .map(|r| r as u32)
            .collect();
        let node_index = leaders
            .iter()
            .position(|&l| node(l as usize) == mine)
            .expect("every node has a leader");
        let index_of_node: std::collections::HashMap<u32, u32> = leaders
            .iter()
            .enumerate()
            .map(|(i, &l)| (node(l as usize), i as u32))
            .collect();
        let node_of_member = (0..members.len())
            .map(|r| index_of_node[&node(r)])
            .collect();
        NodeTopology {
            local,
            local_rank,
            leaders,
            node_index,
            node_of_member,
        }
    }

    /// Whether every member is on this node.
    pub fn single_node(&self) -> bool {
        self.leaders.len() == 1
    }

    /// Whether this member leads its node.
    pub fn is_leader(&self) -> bool {
        self.local_rank == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_round_robin_and_uneven_placements() {
        // World ranks 0..6 on nodes [0,0,0,1,1,2] (block, uneven).
        let node_of = [0, 0, 0, 1, 1, 2];
        let world: Vec<u32> = (0..6).collect();
        let t = NodeTopology::of(&world, 4, &node_of);
        assert_eq!(t.local, [3, 4]);
        assert_eq!(t.local_rank, 1);
        assert_eq!(t.leaders, [0, 3, 5]);
        assert_eq!(t.node_index, 1);
        assert_eq!(t.node_of_member, [0, 0, 0, 1, 1, 2]);
        assert!(!t.single_node() && !t.is_leader());
        // Round robin over two nodes, through a communicator in another order: members are
        // world ranks [5, 2, 1, 4, 3, 0] on nodes 1,0,1,0,1,0.
        let node_of = [0, 1, 0, 1, 0, 1];
        let members = [5, 2, 1, 4, 3, 0];
        let t = NodeTopology::of(&members, 2, &node_of);
        assert_eq!(t.local, [0, 2, 4], "members whose world rank is odd");
        assert_eq!((t.local_rank, t.leaders.clone(), t.node_index), (1, vec![0, 1], 0));
        let t = NodeTopology::of(&members, 3, &node_of);
        assert_eq!((t.local.clone(), t.node_index), (vec![1, 3, 5], 1));
        assert_eq!(t.node_of_member, [0, 1, 0, 1, 0, 1]);
        // One node.
        let t = NodeTopology::of(&[7, 3], 0, &[0; 8]);
        assert!(t.single_node() && t.is_leader());
        assert_eq!(t.local, [0, 1]);
    }
}
