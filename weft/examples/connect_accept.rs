//! Two halves of the world meet at a port (MPI_Comm_accept / MPI_Comm_connect), trade
//! messages over the intercommunicator, merge it and reduce over the merged communicator.
//! Run with `weft run -n 4 --example connect_accept`; `connect_accept names` passes the
//! port's name through the name service (MPI_Publish_name / MPI_Lookup_name) instead of a
//! message.

use weft::topology::{MergeOrder, Port};
use weft::traits::*;

fn main() {
    let universe = weft::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    assert!(size >= 2, "run with at least 2 ranks");
    let upper = rank >= size / 2;
    let half = world
        .split_by_color(weft::topology::Color::with_value(upper as i32))
        .unwrap();
    let by_name = std::env::args().nth(1).as_deref() == Some("names");
    const SERVICE: &str = "weft-connect-accept-example";
    let inter = if !upper {
        let port = (half.rank() == 0).then(|| Port::open().unwrap());
        if let Some(p) = &port {
            if by_name {
                weft::topology::publish_name(SERVICE, p.name()).unwrap();
                // Published: the other side may look it up now.
                world.process_at_rank(size / 2).send(&0u8);
            } else {
                world.process_at_rank(size / 2).send(p.name().as_bytes());
            }
        }
        let inter = half.accept(port.as_ref(), 0).unwrap();
        if by_name && port.is_some() {
            weft::topology::unpublish_name(SERVICE).unwrap();
            assert!(weft::topology::lookup_name(SERVICE).is_err());
        }
        inter
    } else {
        let name = (half.rank() == 0).then(|| {
            let (bytes, _) = world.process_at_rank(0).receive_vec::<u8>();
            match by_name {
                true => weft::topology::lookup_name(SERVICE).unwrap(),
                false => String::from_utf8(bytes).unwrap(),
            }
        });
        half.connect(name.as_deref(), 0).unwrap()
    };
    assert_eq!(
        inter.remote_size(),
        if upper { size / 2 } else { size - size / 2 }
    );
    // Every member sends its world rank to the other side's rank 0, which checks them all.
    inter.process_at_rank(0).send(&rank);
    if half.rank() == 0 {
        for _ in 0..inter.remote_size() {
            let (got, _) = inter.any_process().receive::<i32>();
            assert!(if upper {
                got < size / 2
            } else {
                got >= size / 2
            });
        }
    }
    let merged = inter.merge(if upper {
        MergeOrder::High
    } else {
        MergeOrder::Low
    });
    assert_eq!(merged.size(), size);
    let mut sum = 0;
    merged.all_reduce_into(&rank, &mut sum, weft::collective::SystemOperation::sum());
    assert_eq!(sum, size * (size - 1) / 2);
    println!(
        "rank {rank}: merged rank {} of {}, sum {sum}",
        merged.rank(),
        merged.size()
    );
}
