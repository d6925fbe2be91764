//! The transposition algorithms: one exchange described per peer by a
//! strided block to send and a strided block to receive, moved by P2P,
//! A2AV, A2AW or A2AP.

use std::fmt;
use std::str::FromStr;

use comm::{CommExt, Communicator, Strided};
use num_complex::Complex64;

use crate::dist::DistError;

/// How a transposition moves its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// One non-blocking send and one non-blocking receive per peer (each
    /// block packed into its own buffer region), then a wait on all.
    P2p,
    /// The blocks packed into one buffer and moved by one `alltoallv`.
    A2av,
    /// One strided `alltoallw`: the blocks are read and written in place
    /// through their [`Strided`] layouts, no user packing.
    A2aw,
    /// The blocks packed into slots of the largest block size (over all
    /// ranks) and moved by one `alltoall`.
    A2ap,
    /// Measure the four at plan time and keep the fastest (the slowest
    /// rank's time decides, so every rank keeps the same one).
    Auto,
}

impl Algorithm {
    /// The four concrete algorithms.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::P2p,
        Algorithm::A2av,
        Algorithm::A2aw,
        Algorithm::A2ap,
    ];

    /// Short name (`p2p`, `a2av`, `a2aw`, `a2ap`, `auto`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::P2p => "p2p",
            Algorithm::A2av => "a2av",
            Algorithm::A2aw => "a2aw",
            Algorithm::A2ap => "a2ap",
            Algorithm::Auto => "auto",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = DistError;
    fn from_str(s: &str) -> Result<Self, DistError> {
        match s.to_ascii_lowercase().as_str() {
            "p2p" => Ok(Algorithm::P2p),
            "a2av" | "alltoallv" => Ok(Algorithm::A2av),
            "a2aw" | "alltoallw" => Ok(Algorithm::A2aw),
            "a2ap" | "alltoall" => Ok(Algorithm::A2ap),
            "auto" => Ok(Algorithm::Auto),
            _ => Err(DistError::Invalid(format!(
                "unknown transposition algorithm {s:?}; valid: p2p, a2av, a2aw, a2ap, auto"
            ))),
        }
    }
}

/// Copies the elements of `l` out of `src` into the contiguous `dst`.
pub(crate) fn gather(src: &[Complex64], l: &Strided, dst: &mut [Complex64]) {
    let [c0, c1, c2] = l.counts;
    let [s0, s1, s2] = l.strides;
    let mut p = 0;
    for i in 0..c0 {
        for j in 0..c1 {
            let base = l.offset + i * s0 + j * s1;
            if s2 == 1 {
                dst[p..p + c2].copy_from_slice(&src[base..base + c2]);
            } else {
                for k in 0..c2 {
                    dst[p + k] = src[base + k * s2];
                }
            }
            p += c2;
        }
    }
}

/// Copies the contiguous `src` into the elements of `l` in `dst`.
pub(crate) fn scatter(src: &[Complex64], l: &Strided, dst: &mut [Complex64]) {
    let [c0, c1, c2] = l.counts;
    let [s0, s1, s2] = l.strides;
    let mut p = 0;
    for i in 0..c0 {
        for j in 0..c1 {
            let base = l.offset + i * s0 + j * s1;
            if s2 == 1 {
                dst[base..base + c2].copy_from_slice(&src[p..p + c2]);
            } else {
                for k in 0..c2 {
                    dst[base + k * s2] = src[p + k];
                }
            }
            p += c2;
        }
    }
}

/// Fills `counts` with the block lengths and `displs` with their offsets
/// when packed one after another; returns the total.
fn packed(blocks: &[Strided], counts: &mut Vec<usize>, displs: &mut Vec<usize>) -> usize {
    counts.clear();
    displs.clear();
    let mut total = 0;
    for b in blocks {
        counts.push(b.len());
        displs.push(total);
        total += b.len();
    }
    total
}

/// Scratch of an exchange: pack and unpack buffers and per-peer counts,
/// grown on first use and reused.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    send: Vec<Complex64>,
    recv: Vec<Complex64>,
    sc: Vec<usize>,
    sd: Vec<usize>,
    rc: Vec<usize>,
    rd: Vec<usize>,
}

/// Moves, for every peer `q` of `comm`, the block `send[q]` of `src` into
/// the block `recv[q]` of `dst` (the peer's `send[me]` lands in my
/// `recv[q]`, element for element). `pad` is the A2AP slot size, the same
/// on every rank and at least every block's length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn exchange(
    comm: &dyn Communicator,
    alg: Algorithm,
    tag: u32,
    src: &[Complex64],
    send: &[Strided],
    dst: &mut [Complex64],
    recv: &[Strided],
    pad: usize,
    scratch: &mut Scratch,
) -> Result<(), DistError> {
    let p = comm.size();
    let me = comm.rank();
    let zero = Complex64::new(0.0, 0.0);
    match alg {
        Algorithm::A2aw => comm.alltoallw(src, send, dst, recv)?,
        Algorithm::A2av | Algorithm::P2p => {
            let Scratch {
                send: sbuf,
                recv: rbuf,
                sc,
                sd,
                rc,
                rd,
            } = scratch;
            let ns = packed(send, sc, sd);
            let nr = packed(recv, rc, rd);
            if sbuf.len() < ns {
                sbuf.resize(ns, zero);
            }
            if rbuf.len() < nr {
                rbuf.resize(nr, zero);
            }
            for q in 0..p {
                gather(src, &send[q], &mut sbuf[sd[q]..sd[q] + sc[q]]);
            }
            if alg == Algorithm::A2av {
                comm.alltoallv(&sbuf[..ns], sc, sd, &mut rbuf[..nr], rc, rd)?;
            } else {
                // The own block never touches the communicator.
                scatter(&sbuf[sd[me]..sd[me] + sc[me]], &recv[me], dst);
                let sbuf: &[Complex64] = sbuf;
                comm::scope(comm, |s| {
                    let mut rest: &mut [Complex64] = &mut rbuf[..nr];
                    for q in 0..p {
                        let (head, tail) = std::mem::take(&mut rest).split_at_mut(rc[q]);
                        rest = tail;
                        if q != me && rc[q] > 0 {
                            s.irecv(q, tag, head)?;
                        }
                    }
                    for q in 0..p {
                        if q != me && sc[q] > 0 {
                            s.isend(q, tag, &sbuf[sd[q]..sd[q] + sc[q]])?;
                        }
                    }
                    s.wait_all()
                })?;
            }
            for q in 0..p {
                if alg == Algorithm::A2av || q != me {
                    scatter(&rbuf[rd[q]..rd[q] + rc[q]], &recv[q], dst);
                }
            }
        }
        Algorithm::A2ap => {
            if scratch.send.len() < p * pad {
                scratch.send.resize(p * pad, zero);
            }
            if scratch.recv.len() < p * pad {
                scratch.recv.resize(p * pad, zero);
            }
            for q in 0..p {
                let n = send[q].len();
                gather(src, &send[q], &mut scratch.send[q * pad..q * pad + n]);
            }
            comm.alltoall(&scratch.send[..p * pad], &mut scratch.recv[..p * pad], pad)?;
            for q in 0..p {
                let n = recv[q].len();
                scatter(&scratch.recv[q * pad..q * pad + n], &recv[q], dst);
            }
        }
        Algorithm::Auto => {
            return Err(DistError::Invalid(
                "Algorithm::Auto must be resolved at plan time".into(),
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_scatter_round_trip() {
        let src: Vec<Complex64> = (0..40).map(|i| Complex64::new(i as f64, -1.0)).collect();
        let l = Strided::nested(3, [2, 3, 4], [17, 1, 4]);
        let mut packed = vec![Complex64::new(0.0, 0.0); l.len()];
        gather(&src, &l, &mut packed);
        assert_eq!(packed[0].re, 3.0);
        assert_eq!(packed[1].re, 7.0);
        assert_eq!(packed[4].re, 4.0);
        assert_eq!(packed[12].re, 20.0);
        let mut back = vec![Complex64::new(0.0, 0.0); 40];
        scatter(&packed, &l, &mut back);
        for (k, b) in back.iter().enumerate() {
            let hit = b.im == -1.0;
            assert!(!hit || b.re == k as f64);
        }
        assert_eq!(back.iter().filter(|b| b.im == -1.0).count(), 24);
    }
}
