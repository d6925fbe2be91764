//! Moving one level between two decompositions of the same global box:
//! the gather of a coarse level onto fewer ranks (agglomeration) and the
//! scatter of its correction back, each a [`comm::Redistribution`] (the
//! engine `dfft` and `sht` share) of the box intersections, planned once.

use crate::MgError;
use comm::{Communicator, IndexBox, Protocol, Redistribution, Strided};
use halo::{Field, FieldLayout};

/// The block `x` (global indices) of a field whose owned box is `own`, in
/// its padded array (component 0), travelling row by row.
fn block(lay: &FieldLayout, own: &IndexBox, x: &IndexBox) -> Strided {
    if x.is_empty() {
        return Strided::contiguous(0, 0);
    }
    let (s, g) = (lay.strides(), lay.ghost);
    let offset = (0..3)
        .map(|d| (x.lo[d] - own.lo[d] + g[d]) * [s[0], s[1], 1][d])
        .sum();
    Strided::nested(offset, x.shape(), [s[0], s[1], 1])
}

/// Plans the move of the owned values of a field with layout `from` (this
/// rank's box `from_boxes[rank]`, or nothing past the end of `from_boxes`)
/// to the ranks whose boxes in `to_boxes` intersect it, landing in a field
/// with layout `to` on this rank's box `to_boxes[rank]` (when it has one).
/// Collective on `comm`; pure data movement, so values arrive bit for bit.
pub(crate) fn plan(
    comm: &dyn Communicator,
    from_boxes: &[IndexBox],
    from: Option<&FieldLayout>,
    to_boxes: &[IndexBox],
    to: Option<&FieldLayout>,
) -> Result<Redistribution<f64>, MgError> {
    let (p, me) = (comm.size(), comm.rank());
    let empty = IndexBox::default();
    let my_from = from_boxes.get(me).copied().unwrap_or(empty);
    let my_to = to_boxes.get(me).copied().unwrap_or(empty);
    let send = (0..p)
        .map(|q| match (from, to_boxes.get(q)) {
            (Some(l), Some(tb)) => block(l, &my_from, &my_from.intersect(tb)),
            _ => Strided::contiguous(0, 0),
        })
        .collect();
    let recv = (0..p)
        .map(|q| match (to, from_boxes.get(q)) {
            (Some(l), Some(fb)) => block(l, &my_to, &fb.intersect(&my_to)),
            _ => Strided::contiguous(0, 0),
        })
        .collect();
    Ok(Redistribution::new(comm, send, recv, Protocol::Alltoallv)?)
}

/// Executes a planned move from `from` into `to` (either may be absent on
/// a rank that holds no box on that side).
pub(crate) fn execute(
    comm: &dyn Communicator,
    plan: &mut Redistribution<f64>,
    from: Option<&Field>,
    to: Option<&mut Field>,
) -> Result<(), MgError> {
    let src = from.map_or(&[][..], |f| f.as_slice());
    let dst = to.map_or(&mut [][..], |f| f.as_mut_slice());
    plan.execute(comm, src, dst)?;
    Ok(())
}
