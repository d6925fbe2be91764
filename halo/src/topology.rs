//! Halo topologies: who exchanges which cells with whom, validated once.

use crate::field::{FieldLayout, Region};
use crate::HaloError;
use comm::{BlockDecomposition, CommExt, Communicator, IndexBox};

/// Which neighbours a rank exchanges with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Neighborhood {
    /// The six face neighbours: enough for stencils along the axes (the
    /// 7-point Laplacian and its wider-order relatives). Edge and corner
    /// ghosts are left untouched.
    Faces,
    /// Faces, edges and corners (26 neighbours): every ghost cell within the
    /// communicated width is filled, for stencils with mixed derivatives.
    Full,
}

/// One direction of the exchange: the offset to the neighbour, its rank,
/// the owned cells sent to it and the ghost cells received from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// Offset in the process grid, each component in -1..=1.
    pub offset: [isize; 3],
    /// The neighbour's rank.
    pub rank: usize,
    /// Owned cells sent to it (padded local indices).
    pub send: Region,
    /// Ghost cells filled from it (padded local indices).
    pub recv: Region,
}

/// Index 0..27 of a direction offset.
pub(crate) fn dir_index(o: [isize; 3]) -> usize {
    ((o[0] + 1) * 9 + (o[1] + 1) * 3 + (o[2] + 1)) as usize
}

/// How a [`Topology`] is built: ghost widths and neighbourhood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HaloSpec {
    /// Allocated ghost layers per axis.
    pub ghost: [usize; 3],
    /// Communicated ghost layers per axis (`<= ghost`).
    pub width: [usize; 3],
    /// Faces only, or faces, edges and corners.
    pub neighborhood: Neighborhood,
}

impl HaloSpec {
    /// The same allocated and communicated width on every axis.
    pub fn uniform(width: usize, neighborhood: Neighborhood) -> Self {
        HaloSpec {
            ghost: [width; 3],
            width: [width; 3],
            neighborhood,
        }
    }
}

/// The halo topology of one rank: its box, ghost widths and neighbours.
/// Built once, collectively, then used for any number of exchanges.
#[derive(Debug, Clone)]
pub struct Topology {
    rank: usize,
    owned: IndexBox,
    decomposition: BlockDecomposition,
    spec: HaloSpec,
    neighbors: Vec<Neighbor>,
}

impl Topology {
    /// Builds and validates the topology collectively on `comm`.
    ///
    /// Every rank checks every rank's box and specification (gathered), so
    /// all ranks return the same error: a communicated width above the
    /// allocated one, a communicated width larger than a neighbour's extent
    /// (the ghost cells would need a second neighbour), a process grid that
    /// does not match the communicator, or ranks that disagree on the
    /// specification or the global shape.
    pub fn new(
        comm: &dyn Communicator,
        decomposition: &BlockDecomposition,
        spec: HaloSpec,
    ) -> Result<Self, HaloError> {
        let grid = *decomposition.grid();
        grid.check_comm(comm)?;
        let rank = comm.rank();
        let code = |n: Neighborhood| match n {
            Neighborhood::Faces => 0i64,
            Neighborhood::Full => 1,
        };
        let g = decomposition.global();
        let p = grid.periodic();
        let dims = grid.dims();
        let mine: Vec<i64> = spec
            .ghost
            .iter()
            .chain(&spec.width)
            .chain(&g)
            .chain(&dims)
            .map(|&x| x as i64)
            .chain(p.iter().map(|&b| i64::from(b)))
            .chain([code(spec.neighborhood)])
            .collect();
        let mut all = vec![0i64; mine.len() * comm.size()];
        comm.allgather(&mine, &mut all)?;
        for r in 0..comm.size() {
            let theirs = &all[r * mine.len()..(r + 1) * mine.len()];
            if theirs != &all[..mine.len()] {
                return Err(HaloError::Disagree {
                    rank: r,
                    detail: format!(
                        "rank 0 has [ghost, width, global, grid, periodic, neighbourhood] = {:?}, rank {r} has {:?}",
                        &all[..mine.len()],
                        theirs
                    ),
                });
            }
        }
        for d in 0..3 {
            if spec.width[d] > spec.ghost[d] {
                return Err(HaloError::WidthAboveGhost {
                    axis: d,
                    width: spec.width[d],
                    ghost: spec.ghost[d],
                });
            }
        }
        // Every rank's extent must cover the width it is asked to provide.
        for r in 0..grid.size() {
            let b = decomposition.box_of(r);
            for d in 0..3 {
                let has_neighbor = dims[d] > 1 || p[d];
                if has_neighbor && spec.width[d] > 0 && b.shape()[d] < spec.width[d] {
                    return Err(HaloError::WidthAboveExtent {
                        rank: r,
                        axis: d,
                        extent: b.shape()[d],
                        width: spec.width[d],
                    });
                }
            }
        }
        let owned = decomposition.box_of(rank);
        let n = owned.shape();
        let (gh, w) = (spec.ghost, spec.width);
        let mut neighbors = Vec::new();
        for ox in -1isize..=1 {
            for oy in -1isize..=1 {
                for oz in -1isize..=1 {
                    let o = [ox, oy, oz];
                    let nonzero = o.iter().filter(|&&x| x != 0).count();
                    if nonzero == 0 || (spec.neighborhood == Neighborhood::Faces && nonzero > 1) {
                        continue;
                    }
                    if (0..3).any(|d| o[d] != 0 && w[d] == 0) {
                        continue;
                    }
                    let Some(peer) = grid.neighbor(rank, o) else {
                        continue;
                    };
                    let mut send = Region::default();
                    let mut recv = Region::default();
                    for d in 0..3 {
                        let (s, r) = match o[d] {
                            -1 => ((gh[d], gh[d] + w[d]), (gh[d] - w[d], gh[d])),
                            1 => (
                                (gh[d] + n[d] - w[d], gh[d] + n[d]),
                                (gh[d] + n[d], gh[d] + n[d] + w[d]),
                            ),
                            _ => ((gh[d], gh[d] + n[d]), (gh[d], gh[d] + n[d])),
                        };
                        (send.lo[d], send.hi[d]) = s;
                        (recv.lo[d], recv.hi[d]) = r;
                    }
                    neighbors.push(Neighbor {
                        offset: o,
                        rank: peer,
                        send,
                        recv,
                    });
                }
            }
        }
        Ok(Topology {
            rank,
            owned,
            decomposition: decomposition.clone(),
            spec,
            neighbors,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The global box this rank owns.
    pub fn owned(&self) -> IndexBox {
        self.owned
    }

    /// The decomposition the topology was built on.
    pub fn decomposition(&self) -> &BlockDecomposition {
        &self.decomposition
    }

    /// The ghost widths and neighbourhood.
    pub fn spec(&self) -> HaloSpec {
        self.spec
    }

    /// The neighbours, in a fixed order (offsets in lexicographic order).
    pub fn neighbors(&self) -> &[Neighbor] {
        &self.neighbors
    }

    /// The periodic self-copies `(owned source, ghost destination)`: the
    /// self-neighbour in direction `o` fills its ghosts from the owned
    /// cells this rank would send in direction `-o`.
    pub(crate) fn self_copies(&self) -> Vec<(crate::Region, crate::Region)> {
        let (me, nbs) = (self.rank(), &self.neighbors);
        nbs.iter()
            .filter(|nb| nb.rank == me)
            .map(|nb| {
                let back = nb.offset.map(|x| -x);
                let src = nbs
                    .iter()
                    .find(|m| m.offset == back)
                    .expect("periodic self-neighbours come in opposite pairs");
                (src.send, nb.recv)
            })
            .collect()
    }

    /// The layout of a field with `components` components on this rank.
    pub fn layout(&self, components: usize) -> FieldLayout {
        FieldLayout {
            owned: self.owned.shape(),
            ghost: self.spec.ghost,
            components,
        }
    }

    /// Per axis: true when some neighbour across that axis is another rank,
    /// so ghost cells across it arrive by message (and only at `finish`).
    /// Ghosts across the other axes are either copied locally during `post`
    /// (periodic self-neighbours) or not exchanged (physical boundaries).
    pub fn remote_axes(&self) -> [bool; 3] {
        [0, 1, 2].map(|d| {
            self.neighbors
                .iter()
                .any(|nb| nb.offset[d] != 0 && nb.rank != self.rank)
        })
    }

    /// The owned cells whose stencil of the given radius (per axis) reads no
    /// ghost cell that is still in flight after `post`: they can be updated
    /// while the exchange is on the wire. Along axes without a remote
    /// neighbour the interior spans the whole owned extent. Empty when the
    /// box is thinner than twice the radius along a remote axis.
    pub fn interior(&self, radius: [usize; 3]) -> Region {
        let g = self.spec.ghost;
        let n = self.owned.shape();
        let remote = self.remote_axes();
        let mut r = Region::default();
        for d in 0..3 {
            let rad = if remote[d] { radius[d] } else { 0 };
            r.lo[d] = g[d] + rad;
            r.hi[d] = (g[d] + n[d]).saturating_sub(rad).max(r.lo[d]);
        }
        if r.is_empty() {
            // Keep a canonical empty region inside the owned box.
            r.hi = r.lo;
        }
        r
    }

    /// The owned cells outside [`interior`](Self::interior), as at most six
    /// disjoint boxes (low and high slabs along axis 0, then along axis 1
    /// within the remaining range, then along axis 2): updated after
    /// `finish`.
    pub fn shell(&self, radius: [usize; 3]) -> Vec<Region> {
        let owned = self.layout(1).owned_region();
        let inner = self.interior(radius);
        if inner.is_empty() {
            return vec![owned];
        }
        let mut out = Vec::new();
        let mut rest = owned;
        for d in 0..3 {
            let mut low = rest;
            low.hi[d] = inner.lo[d];
            let mut high = rest;
            high.lo[d] = inner.hi[d];
            for s in [low, high] {
                if !s.is_empty() {
                    out.push(s);
                }
            }
            rest.lo[d] = inner.lo[d];
            rest.hi[d] = inner.hi[d];
        }
        out
    }
}
