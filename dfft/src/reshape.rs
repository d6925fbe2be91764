//! Reshape plans: move a distributed array from one layout to another.
//!
//! At plan time the box intersections give, for every pair of ranks, the
//! block that travels between them, as a strided block of the source and
//! of the destination array ([`comm::Strided`]); the move itself is a
//! [`comm::Redistribution`], the engine every crate shares. A message holds
//! its block in the receiver's memory order, so unpacking writes contiguous
//! rows; the block a rank keeps for itself is copied directly and never
//! touches the communicator. Buffers are allocated once, at plan time.

use crate::layout::Layout;
use crate::FftError;
use comm::{Communicator, Elem, IndexBox, Redistribution, Strided};

pub use comm::Protocol;

/// The block `region` (global indices) of a local box `owned` with memory
/// strides `st`, travelling in `order` (`order[2]` fastest), repeated over
/// `batch` fields of `field` elements each.
fn block(
    owned: &IndexBox,
    st: [usize; 3],
    region: &IndexBox,
    order: [usize; 3],
    batch: usize,
    field: usize,
) -> Strided {
    if region.is_empty() {
        return Strided::contiguous(0, 0);
    }
    let offset = (0..3).map(|d| (region.lo[d] - owned.lo[d]) * st[d]).sum();
    let sh = region.shape();
    Strided::nested(offset, order.map(|d| sh[d]), order.map(|d| st[d]))
        .repeated(batch, field)
        .expect("a 3-level block has a free outer level")
}

/// A planned move from one layout to another for `batch` fields at once.
#[derive(Debug)]
pub struct Reshape<T: Elem> {
    from: Layout,
    to: Layout,
    rank: usize,
    batch: usize,
    plan: Redistribution<T>,
}

impl<T: Elem + Default> Reshape<T> {
    /// Plans the move of `batch` fields from `from` to `to` (collective).
    /// `Protocol::Auto` times the five protocols here and keeps the fastest.
    pub fn new(
        comm: &dyn Communicator,
        from: &Layout,
        to: &Layout,
        batch: usize,
        protocol: Protocol,
    ) -> Result<Self, FftError> {
        if from.global() != to.global() {
            return Err(FftError::Invalid(format!(
                "cannot reshape between layouts of different global shapes {:?} and {:?}",
                from.global(),
                to.global()
            )));
        }
        for l in [from, to] {
            if l.ranks() != comm.size() {
                return Err(FftError::Invalid(format!(
                    "layout grid {:?} holds {} ranks but the communicator has {}",
                    l.dims(),
                    l.ranks(),
                    comm.size()
                )));
            }
        }
        if batch == 0 {
            return Err(FftError::Invalid("batch must be at least 1, got 0".into()));
        }
        let p = comm.size();
        let rank = comm.rank();
        let (fb, fs, nin) = (from.box_of(rank), from.strides(rank), from.local_len(rank));
        let (tb, ts, nout) = (to.box_of(rank), to.strides(rank), to.local_len(rank));
        let order = to.order();
        let send = (0..p)
            .map(|q| block(&fb, fs, &fb.intersect(&to.box_of(q)), order, batch, nin))
            .collect();
        let recv = (0..p)
            .map(|q| block(&tb, ts, &from.box_of(q).intersect(&tb), order, batch, nout))
            .collect();
        let plan = Redistribution::new(comm, send, recv, protocol)?;
        Ok(Reshape {
            from: from.clone(),
            to: to.clone(),
            rank,
            batch,
            plan,
        })
    }
}

impl<T: Elem> Reshape<T> {
    /// The protocol in use (the winner when built with `Auto`).
    pub fn protocol(&self) -> Protocol {
        self.plan.protocol()
    }

    /// Median time of each protocol measured by `Auto` (empty otherwise).
    pub fn timings(&self) -> &[(Protocol, f64)] {
        self.plan.timings()
    }

    /// Source layout.
    pub fn from(&self) -> &Layout {
        &self.from
    }

    /// Destination layout.
    pub fn to(&self) -> &Layout {
        &self.to
    }

    /// Messages this rank sends per execution.
    pub fn messages(&self) -> usize {
        self.plan.messages()
    }

    /// Elements of the input buffer: `batch` fields of the source block,
    /// one after another.
    pub fn input_len(&self) -> usize {
        self.from.local_len(self.rank) * self.batch
    }

    /// Elements of the output buffer.
    pub fn output_len(&self) -> usize {
        self.to.local_len(self.rank) * self.batch
    }

    /// Moves `input` (this rank's block in the source layout, `batch` fields)
    /// into `output` (its block in the destination layout).
    pub fn execute(
        &mut self,
        comm: &dyn Communicator,
        input: &[T],
        output: &mut [T],
    ) -> Result<(), FftError> {
        if input.len() != self.input_len() {
            return Err(FftError::LengthMismatch {
                what: "reshape input",
                expected: self.input_len(),
                got: input.len(),
            });
        }
        if output.len() != self.output_len() {
            return Err(FftError::LengthMismatch {
                what: "reshape output",
                expected: self.output_len(),
                got: output.len(),
            });
        }
        self.plan.execute(comm, input, output)?;
        Ok(())
    }
}
