//! Moving one level between two decompositions of the same global box:
//! the gather of a coarse level onto fewer ranks (agglomeration) and the
//! scatter of its correction back.

use crate::MgError;
use comm::{CommExt, Communicator, IndexBox};
use halo::Field;

/// Sends the owned values of `from` (this rank's box `from_boxes[rank]`, or
/// nothing past the end of `from_boxes`) to the ranks whose boxes in
/// `to_boxes` intersect it, and receives this rank's box `to_boxes[rank]`
/// into `to` (when this rank has one). Collective on `comm`; pure data
/// movement, so values arrive bit for bit.
pub(crate) fn redistribute(
    comm: &dyn Communicator,
    from_boxes: &[IndexBox],
    from: Option<&Field>,
    to_boxes: &[IndexBox],
    to: Option<&mut Field>,
) -> Result<(), MgError> {
    let p = comm.size();
    let me = comm.rank();
    let empty = IndexBox {
        lo: [0; 3],
        hi: [0; 3],
    };
    let my_from = from_boxes.get(me).copied().unwrap_or(empty);
    let my_to = to_boxes.get(me).copied().unwrap_or(empty);
    let mut send_counts = vec![0usize; p];
    let mut send = Vec::new();
    if let Some(src) = from {
        for q in 0..p {
            let Some(tb) = to_boxes.get(q) else { break };
            let x = my_from.intersect(tb);
            send_counts[q] = x.len();
            pack(src, &my_from, &x, &mut send);
        }
    }
    let recv_counts: Vec<usize> = (0..p)
        .map(|s| from_boxes.get(s).map_or(0, |fb| fb.intersect(&my_to).len()))
        .collect();
    let displs = |c: &[usize]| {
        c.iter()
            .scan(0, |acc, &x| {
                let d = *acc;
                *acc += x;
                Some(d)
            })
            .collect::<Vec<usize>>()
    };
    let (sd, rd) = (displs(&send_counts), displs(&recv_counts));
    let mut recv = vec![0.0; recv_counts.iter().sum()];
    comm.alltoallv(&send, &send_counts, &sd, &mut recv, &recv_counts, &rd)?;
    if let Some(dst) = to {
        for s in 0..p {
            let Some(fb) = from_boxes.get(s) else { break };
            let x = fb.intersect(&my_to);
            unpack(dst, &my_to, &x, &recv[rd[s]..rd[s] + recv_counts[s]]);
        }
    }
    Ok(())
}

fn pack(f: &Field, own: &IndexBox, x: &IndexBox, out: &mut Vec<f64>) {
    if x.is_empty() {
        return;
    }
    let lay = f.layout();
    let (s, g) = (lay.strides(), lay.ghost);
    let v = f.as_slice();
    for i in x.lo[0]..x.hi[0] {
        for j in x.lo[1]..x.hi[1] {
            let o = (i - own.lo[0] + g[0]) * s[0] + (j - own.lo[1] + g[1]) * s[1] + g[2];
            let (a, b) = (o + x.lo[2] - own.lo[2], o + x.hi[2] - own.lo[2]);
            out.extend_from_slice(&v[a..b]);
        }
    }
}

fn unpack(f: &mut Field, own: &IndexBox, x: &IndexBox, input: &[f64]) {
    if x.is_empty() {
        return;
    }
    let lay = f.layout();
    let (s, g) = (lay.strides(), lay.ghost);
    let v = f.as_mut_slice();
    let n2 = x.hi[2] - x.lo[2];
    let mut t = 0;
    for i in x.lo[0]..x.hi[0] {
        for j in x.lo[1]..x.hi[1] {
            let o = (i - own.lo[0] + g[0]) * s[0] + (j - own.lo[1] + g[1]) * s[1] + g[2];
            let a = o + x.lo[2] - own.lo[2];
            v[a..a + n2].copy_from_slice(&input[t..t + n2]);
            t += n2;
        }
    }
}
