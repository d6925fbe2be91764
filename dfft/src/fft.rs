//! Distributed 3D FFT plans: a fixed sequence of 1D transforms along whole
//! axes, with reshapes in between.

use crate::col::{prefetch_r, prefetch_w, ColFft, RealCol, WIDTH};
use crate::layout::{others, Layout};
use crate::reshape::{Protocol, Reshape};
use crate::tile::{as_complex, as_complex_mut, flat, flat_mut, to_line_boundary, Moves};
use crate::FftError;
use comm::Communicator;
use num_complex::Complex64;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftDirection, FftPlanner};
use std::sync::Arc;

/// What the plan transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Complex to complex.
    C2C,
    /// Real to complex forward (complex to real backward); `halved` is the
    /// axis whose spectrum keeps `n / 2 + 1` entries.
    R2C {
        /// The halved axis.
        halved: usize,
    },
}

mod sealed {
    pub trait Sealed {}
}

/// What a plan transforms, as its type: complex to complex ([`C2c`]) or
/// real to complex ([`R2c`]). A plan's `forward` and `backward` take the
/// values of physical space as [`Transform::Phys`], so a real array cannot
/// reach a complex plan (or the reverse) at all.
pub trait Transform: sealed::Sealed + std::fmt::Debug + Send + Sync + 'static {
    /// The values of physical space: `Complex64` or `f64`.
    type Phys: Copy + std::fmt::Debug;
}

/// Complex-to-complex plans ([`Fft3d::c2c`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct C2c;

/// Real-to-complex plans ([`Fft3d::r2c`]): real values forward to the half
/// spectrum, and back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct R2c;

impl sealed::Sealed for C2c {}
impl sealed::Sealed for R2c {}

impl Transform for C2c {
    type Phys = Complex64;
}

impl Transform for R2c {
    type Phys = f64;
}

/// Scaling of the transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Normalization {
    /// Neither direction is scaled (backward(forward(x)) = N x).
    None,
    /// The backward transform is scaled by 1/N.
    Full,
    /// Both directions are scaled by 1/sqrt(N).
    Symmetric,
}

/// Where the spectrum lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    /// Spectral data in the input layout (over the complex global shape).
    Input,
    /// Spectral data left in the layout of the last 1D transform: fewer
    /// reshapes when the caller does not need the input layout in spectral
    /// space.
    Transposed,
}

/// Options of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Options {
    /// Reshape protocol of every reshape (or `Auto`, tuned per reshape).
    pub protocol: Protocol,
    /// Spectral layout.
    pub output: Output,
    /// Scaling.
    pub normalization: Normalization,
    /// Fields transformed together (one message per peer for all).
    pub batch: usize,
    /// How the intermediate layouts are chosen.
    pub selection: Selection,
}

/// How a plan chooses the layouts between its 1D transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Selection {
    /// Fewest reshapes: a slab that holds the current and the next transform
    /// axis whole whenever the rank count fits the third axis (one reshape
    /// serves two transforms), a pencil otherwise; no reshape at all when
    /// the current layout already holds the axis whole; with
    /// [`Output::Input`], the input layout itself when it holds every
    /// remaining axis whole (no reshape back at the end). Never more
    /// reshapes than [`Selection::Pencils`].
    MinReshape,
    /// One pencil per transform axis, the classic pencil pipeline (the
    /// baseline the selection is measured against).
    Pencils,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            protocol: Protocol::Alltoallv,
            output: Output::Input,
            normalization: Normalization::Full,
            batch: 1,
            selection: Selection::MinReshape,
        }
    }
}

#[derive(Debug)]
enum Step {
    Reshape {
        fwd: Reshape<Complex64>,
        bwd: Reshape<Complex64>,
    },
    ReshapeReal {
        fwd: Reshape<f64>,
        bwd: Reshape<f64>,
    },
    Fft {
        axis: usize,
        layout: Layout,
    },
    Rfft {
        axis: usize,
        real: Layout,
        complex: Layout,
    },
}

/// A complex 1D transform of one length and direction: the column
/// transform ([`ColFft`]) for powers of two, rustfft's plan for other
/// lengths. The choice depends on the length alone, so every line of a
/// length gets the same arithmetic on any layout and rank count.
#[derive(Clone)]
pub(crate) enum Plan1d {
    Col(Arc<ColFft>),
    Rust(Arc<dyn Fft<f64>>),
}

impl Plan1d {
    pub(crate) fn new(planner: &mut FftPlanner<f64>, n: usize, dir: FftDirection) -> Plan1d {
        match ColFft::new(n, dir == FftDirection::Forward) {
            Some(c) => Plan1d::Col(Arc::new(c)),
            None => Plan1d::Rust(planner.plan_fft(n, dir)),
        }
    }

    /// Scratch (complex values) that [`c2c_lines`] needs besides its block
    /// of lines: for the column transform, [`contiguous_scratch`].
    pub(crate) fn scratch_len(&self) -> usize {
        match self {
            Plan1d::Col(c) => contiguous_scratch(c),
            Plan1d::Rust(p) => p.get_inplace_scratch_len(),
        }
    }
}

/// Forward and inverse complex plans of one length.
pub(crate) type C2cPair = (usize, Plan1d, Plan1d);
/// Forward and inverse real plans of the halved axis: the column
/// transform of half the length for powers of two from 4, realfft's
/// otherwise (again by the length alone).
enum RealPlan {
    Col(Arc<RealCol>),
    Real(Arc<dyn RealToComplex<f64>>, Arc<dyn ComplexToReal<f64>>),
}

impl RealPlan {
    fn new(n: usize) -> RealPlan {
        match RealCol::new(n) {
            Some(c) => RealPlan::Col(Arc::new(c)),
            None => {
                let mut rp = RealFftPlanner::<f64>::new();
                RealPlan::Real(rp.plan_fft_forward(n), rp.plan_fft_inverse(n))
            }
        }
    }

    /// Scratch (complex values) the line steps need besides their blocks.
    fn scratch_len(&self) -> usize {
        match self {
            // A block of `WIDTH` complex lines of half the length, aligned,
            // and what `contiguous_lines` takes for it.
            RealPlan::Col(c) => WIDTH * c.half() + LINE_VALUES + contiguous_scratch(&c.fwd),
            RealPlan::Real(f, b) => f.get_scratch_len().max(b.get_scratch_len()),
        }
    }
}

struct Plans {
    c2c: Vec<C2cPair>,
    r2c: Option<RealPlan>,
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plans")
            .field("lengths", &self.c2c.iter().map(|p| p.0).collect::<Vec<_>>())
            .finish()
    }
}

impl Plans {
    fn c2c(&self, n: usize, dir: FftDirection) -> &Plan1d {
        let p = self.c2c.iter().find(|p| p.0 == n).expect("planned length");
        match dir {
            FftDirection::Forward => &p.1,
            FftDirection::Inverse => &p.2,
        }
    }
}

/// A distributed 3D FFT, built once (collectively) and executed many times
/// without allocation.
///
/// The 1D transforms run in a fixed axis order (for complex-to-complex: axis
/// 2, then 1, then 0; for real-to-complex: the halved axis first, then the
/// others from the highest index down), each line by the same 1D plan
/// whatever the layout or rank count, so the result has the same bits as the
/// single-rank transform for every rank count, grid, layout and protocol.
///
/// The type parameter says what it transforms ([`C2c`] or [`R2c`]): plan
/// with [`Fft3d::c2c`] or [`Fft3d::r2c`].
#[derive(Debug)]
pub struct Fft3d<T: Transform = C2c> {
    kind: Kind,
    options: Options,
    input: Layout,
    output: Layout,
    steps: Vec<Step>,
    plans: Plans,
    rank: usize,
    work_len: usize,
    line_scratch: usize,
    max_line: usize,
    /// The tasks of the forward direction, of the backward direction, and
    /// of the backward direction free to overwrite its input.
    schedule: [Vec<Task>; 3],
    transform: std::marker::PhantomData<T>,
}

/// Picks the layout for transforming `axis` next, preferring a slab that
/// also holds `next` whole (one reshape serves two transforms).
fn layout_for(
    global: [usize; 3],
    p: usize,
    axis: usize,
    next: Option<usize>,
) -> Result<Layout, FftError> {
    if let Some(nx) = next {
        let split = 3 - axis - nx;
        if p <= global[split] {
            // Slab with `axis` contiguous.
            return Layout::new(global, slab_dims(split, p), [split, nx, axis]);
        }
    }
    if p == 1 {
        let (a, b) = others(axis);
        return Layout::new(global, [1; 3], [a, b, axis]);
    }
    Layout::pencils(global, p, axis).or_else(|_| {
        // A pencil is impossible: try any slab holding `axis` whole.
        let (a, b) = others(axis);
        let split = if global[a] >= global[b] { a } else { b };
        let keep = 3 - axis - split;
        Layout::new(global, slab_dims(split, p), [split, keep, axis])
    })
}

fn slab_dims(split: usize, p: usize) -> [usize; 3] {
    let mut d = [1; 3];
    d[split] = p;
    d
}

/// One step of a plan as layouts: what [`Fft3d`] builds its reshapes and
/// 1D plans from, and what the device transform (`cuda`) executes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Planned {
    /// Move the data from one layout to another (real values before the
    /// real-to-complex step).
    Reshape {
        from: Layout,
        to: Layout,
        real: bool,
    },
    /// Complex 1D transforms along `axis` in `layout`.
    Fft { axis: usize, layout: Layout },
    /// Real-to-complex 1D transforms along the halved `axis`.
    Rfft {
        axis: usize,
        real: Layout,
        complex: Layout,
    },
}

/// The forward steps of the transform of `kind` from `input` on `p` ranks:
/// the axis order and the layout selection of [`Options::selection`].
pub(crate) fn plan_steps(
    input: &Layout,
    kind: Kind,
    options: Options,
    p: usize,
) -> Result<Vec<Planned>, FftError> {
    let g = input.global();
    let (axes, cglobal) = match kind {
        Kind::C2C => ([2, 1, 0], g),
        Kind::R2C { halved } => {
            if halved > 2 {
                return Err(FftError::Invalid(format!(
                    "halved axis {halved} is out of range (valid: 0, 1, 2)"
                )));
            }
            let (a, b) = others(halved);
            let mut cg = g;
            cg[halved] = g[halved] / 2 + 1;
            ([halved, b, a], cg)
        }
    };
    let mut steps = Vec::new();
    let mut cur = input.clone();
    let mut real_stage = matches!(kind, Kind::R2C { .. });
    for (i, &axis) in axes.iter().enumerate() {
        let next = axes.get(i + 1).copied();
        let gl = if real_stage { g } else { cglobal };
        if !cur.is_whole(axis) {
            let to = match options.selection {
                Selection::MinReshape => {
                    // When the spectrum must end in the input layout and
                    // that layout holds every remaining axis whole, go
                    // straight there: one reshape finishes the plan,
                    // while any other layout (a slab with another memory
                    // order included) would need a reshape back. The 1D
                    // transforms then run on strided lines where the
                    // axis is not contiguous: the same lines, the same
                    // 1D plan, the same bits.
                    let end = input.with_global(gl)?;
                    if options.output == Output::Input && axes[i..].iter().all(|&a| end.is_whole(a))
                    {
                        end
                    } else {
                        layout_for(gl, p, axis, next)?
                    }
                }
                Selection::Pencils => layout_for(gl, p, axis, None)?,
            };
            steps.push(Planned::Reshape {
                from: cur.clone(),
                to: to.clone(),
                real: real_stage,
            });
            cur = to;
        }
        if real_stage {
            let complex = cur.with_global(cglobal)?;
            steps.push(Planned::Rfft {
                axis,
                real: cur.clone(),
                complex: complex.clone(),
            });
            cur = complex;
            real_stage = false;
        } else {
            steps.push(Planned::Fft {
                axis,
                layout: cur.clone(),
            });
        }
    }
    let target = input.with_global(cglobal)?;
    if options.output == Output::Input && cur != target {
        steps.push(Planned::Reshape {
            from: cur,
            to: target,
            real: false,
        });
    }
    Ok(steps)
}

impl Fft3d<C2c> {
    /// Plans the complex-to-complex transform of data in `input`
    /// (collective).
    pub fn c2c(
        comm: &dyn Communicator,
        input: &Layout,
        options: Options,
    ) -> Result<Self, FftError> {
        Self::plan(comm, input, Kind::C2C, options)
    }

    /// Forward complex-to-complex transform.
    pub fn forward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        self.forward_from(comm, Src::C(input), input.len(), output, scratch)
    }

    /// Backward complex-to-complex transform.
    pub fn backward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let n = output.len();
        self.backward_into(comm, In::Read(Src::C(input)), Dst::C(output), n, scratch)
    }

    /// [`Fft3d::backward`], free to overwrite `input` (its values are
    /// unspecified afterwards): complex transforms that would read the
    /// input and write a work buffer run in place in the input instead.
    /// The result has the bits of [`Fft3d::backward`]'s.
    pub fn backward_overwriting(
        &mut self,
        comm: &dyn Communicator,
        input: &mut [Complex64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let n = output.len();
        self.backward_into(comm, In::Write(input), Dst::C(output), n, scratch)
    }
}

impl Fft3d<R2c> {
    /// Plans the real-to-complex transform of data in `input`
    /// (collective); axis `halved` of the spectrum keeps `n / 2 + 1`
    /// entries.
    pub fn r2c(
        comm: &dyn Communicator,
        input: &Layout,
        halved: usize,
        options: Options,
    ) -> Result<Self, FftError> {
        Self::plan(comm, input, Kind::R2C { halved }, options)
    }

    /// Forward real-to-complex transform.
    pub fn forward(
        &mut self,
        comm: &dyn Communicator,
        input: &[f64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        self.forward_from(comm, Src::R(input), input.len(), output, scratch)
    }

    /// Backward complex-to-real transform. The imaginary parts of the
    /// entries whose real transform must be real (zero and Nyquist
    /// frequencies of the halved axis) are ignored.
    pub fn backward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [f64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let n = output.len();
        self.backward_into(comm, In::Read(Src::C(input)), Dst::R(output), n, scratch)
    }

    /// [`Fft3d::backward`], free to overwrite `input` (its values are
    /// unspecified afterwards), as FFTW's multi-dimensional complex-to-real
    /// transforms always are: complex transforms that would read the input
    /// and write a work buffer run in place in the input instead (on one
    /// rank, the whole backward transform but the last, real, step), which
    /// spares a pass over memory. The result has the bits of
    /// [`Fft3d::backward`]'s.
    pub fn backward_overwriting(
        &mut self,
        comm: &dyn Communicator,
        input: &mut [Complex64],
        output: &mut [f64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let n = output.len();
        self.backward_into(comm, In::Write(input), Dst::R(output), n, scratch)
    }
}

impl<T: Transform> Fft3d<T> {
    /// What the plan transforms.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Plans the transform of data in `input` (collective).
    fn plan(
        comm: &dyn Communicator,
        input: &Layout,
        kind: Kind,
        options: Options,
    ) -> Result<Self, FftError> {
        let p = comm.size();
        if input.ranks() != p {
            return Err(FftError::Invalid(format!(
                "layout grid {:?} holds {} ranks but the communicator has {p}",
                input.dims(),
                input.ranks()
            )));
        }
        if options.batch == 0 {
            return Err(FftError::Invalid("batch must be at least 1, got 0".into()));
        }
        let batch = options.batch;
        let proto = options.protocol;
        let mut steps = Vec::new();
        let planned = plan_steps(input, kind, options, p)?;
        let mut cur = input.clone();
        for st in planned {
            match st {
                Planned::Reshape { from, to, real } => {
                    if real {
                        steps.push(Step::ReshapeReal {
                            fwd: Reshape::new(comm, &from, &to, batch, proto)?,
                            bwd: Reshape::new(comm, &to, &from, batch, proto)?,
                        });
                    } else {
                        steps.push(Step::Reshape {
                            fwd: Reshape::new(comm, &from, &to, batch, proto)?,
                            bwd: Reshape::new(comm, &to, &from, batch, proto)?,
                        });
                    }
                    cur = to;
                }
                Planned::Fft { axis, layout } => {
                    cur = layout.clone();
                    steps.push(Step::Fft { axis, layout });
                }
                Planned::Rfft {
                    axis,
                    real,
                    complex,
                } => {
                    cur = complex.clone();
                    steps.push(Step::Rfft {
                        axis,
                        real,
                        complex,
                    });
                }
            }
        }
        // 1D plans for every length used.
        let mut planner = FftPlanner::<f64>::new();
        let mut c2c = Vec::new();
        let mut r2c = None;
        let mut line_scratch = 0;
        let mut max_line = 0;
        for s in &steps {
            match s {
                Step::Fft { axis, layout } => {
                    let n = layout.global()[*axis];
                    if !c2c.iter().any(|p: &C2cPair| p.0 == n) {
                        let f = Plan1d::new(&mut planner, n, FftDirection::Forward);
                        let b = Plan1d::new(&mut planner, n, FftDirection::Inverse);
                        line_scratch = line_scratch.max(f.scratch_len()).max(b.scratch_len());
                        c2c.push((n, f, b));
                    }
                    max_line = max_line.max(n);
                }
                Step::Rfft { axis, real, .. } => {
                    let n = real.global()[*axis];
                    let p = RealPlan::new(n);
                    line_scratch = line_scratch.max(p.scratch_len());
                    max_line = max_line.max(n);
                    r2c = Some(p);
                }
                _ => {}
            }
        }
        let rank = comm.rank();
        let mut work_len = 0;
        for s in &steps {
            let len = match s {
                Step::Reshape { fwd, .. } => fwd.input_len().max(fwd.output_len()),
                // Real data is stored two values per complex element.
                Step::ReshapeReal { fwd, .. } => fwd.input_len().max(fwd.output_len()).div_ceil(2),
                Step::Fft { layout, .. } => layout.local_len(rank) * batch,
                Step::Rfft { real, complex, .. } => (real.local_len(rank) * batch)
                    .div_ceil(2)
                    .max(complex.local_len(rank) * batch),
            };
            work_len = work_len.max(len);
        }
        work_len = work_len
            .max(input.local_len(rank) * batch)
            .max(cur.local_len(rank) * batch)
            .next_multiple_of(LINE_VALUES);
        let mut plan = Fft3d {
            transform: std::marker::PhantomData,
            kind,
            options,
            input: input.clone(),
            output: cur,
            steps,
            plans: Plans { c2c, r2c },
            rank,
            work_len,
            line_scratch,
            max_line,
            schedule: [Vec::new(), Vec::new(), Vec::new()],
        };
        plan.schedule = [
            plan.schedule(true, false),
            plan.schedule(false, false),
            plan.schedule(false, true),
        ];
        Ok(plan)
    }

    /// The layout of the input (real data for R2C).
    pub fn input_layout(&self) -> &Layout {
        &self.input
    }

    /// The layout of the spectral data.
    pub fn output_layout(&self) -> &Layout {
        &self.output
    }

    /// Number of reshapes (all-to-all rounds) of one forward transform.
    pub fn reshapes(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Reshape { .. } | Step::ReshapeReal { .. }))
            .count()
    }

    /// The protocol of each reshape (winners of `Auto`), with the times
    /// `Auto` measured for each candidate.
    pub fn protocols(&self) -> Vec<(Protocol, Vec<(Protocol, f64)>)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Reshape { fwd, .. } => Some((fwd.protocol(), fwd.timings().to_vec())),
                Step::ReshapeReal { fwd, .. } => Some((fwd.protocol(), fwd.timings().to_vec())),
                _ => None,
            })
            .collect()
    }

    /// The options the plan was built with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Elements of the forward input (f64 for R2C, complex for C2C): `batch`
    /// local blocks one after another.
    pub fn input_len(&self) -> usize {
        self.input.local_len(self.rank) * self.options.batch
    }

    /// Complex elements of the forward output.
    pub fn output_len(&self) -> usize {
        self.output.local_len(self.rank) * self.options.batch
    }

    /// Complex elements of the scratch buffer both directions need
    /// (including up to three elements of slack, by which the plan moves
    /// its buffers onto a 64-byte boundary).
    pub fn scratch_len(&self) -> usize {
        self.used_scratch() + LINE_VALUES - 1
    }

    /// The part of the scratch the buffers take (its start aligned).
    fn used_scratch(&self) -> usize {
        2 * self.work_len + self.line_scratch + 2 * BLOCK * (self.max_line.max(1) + PAD)
    }

    fn global_len(&self) -> usize {
        self.input.global_len()
    }

    fn check(&self, what: &'static str, expected: usize, got: usize) -> Result<(), FftError> {
        if expected != got {
            return Err(FftError::LengthMismatch {
                what,
                expected,
                got,
            });
        }
        Ok(())
    }

    /// The forward transform of `input` (`len` values).
    fn forward_from(
        &mut self,
        comm: &dyn Communicator,
        input: Src<'_>,
        len: usize,
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        self.check("forward input", self.input_len(), len)?;
        self.check("forward output", self.output_len(), output.len())?;
        let s = self.scale(true);
        self.execute(comm, true, In::Read(input), Dst::C(output), scratch, s)
    }

    /// The backward transform into `output` (`len` values).
    fn backward_into(
        &mut self,
        comm: &dyn Communicator,
        input: In<'_>,
        output: Dst<'_>,
        len: usize,
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let got = match &input {
            In::Read(Src::C(x)) => x.len(),
            In::Read(Src::R(x)) => x.len(),
            In::Write(x) => x.len(),
        };
        self.check("backward input", self.output_len(), got)?;
        self.check("backward output", self.input_len(), len)?;
        let s = self.scale(false);
        self.execute(comm, false, input, output, scratch, s)
    }

    /// The factor the result of one direction is scaled by.
    fn scale(&self, forward: bool) -> f64 {
        let n = self.global_len() as f64;
        match (self.options.normalization, forward) {
            (Normalization::Symmetric, _) => 1.0 / n.sqrt(),
            (Normalization::Full, false) => 1.0 / n,
            _ => 1.0,
        }
    }

    /// Runs the steps in order (`forward`) or in reverse with the inverse of
    /// each, from `input` into `output`, and scales the result by `scale`.
    ///
    /// The first step reads the caller's input and the last one writes the
    /// caller's output (no copies in or out); transforms between reshapes
    /// run in place in a work buffer where they can. Consecutive transforms
    /// along axes that are not the outermost in memory run plane by plane
    /// of that axis (every transform of the group on one plane while it is
    /// in cache), which changes the order in which lines are transformed,
    /// never a line's arithmetic.
    fn execute(
        &mut self,
        comm: &dyn Communicator,
        forward: bool,
        input: In<'_>,
        output: Dst<'_>,
        scratch: &mut [Complex64],
        scale: f64,
    ) -> Result<(), FftError> {
        let which = match (forward, &input) {
            (true, _) => 0,
            (false, In::Read(_)) => 1,
            (false, In::Write(_)) => 2,
        };
        self.check("scratch", self.scratch_len(), scratch.len())?;
        let used = self.used_scratch();
        let scratch = aligned(scratch, used);
        // Both work buffers and the line scratch start on 64-byte
        // boundaries where the scratch does (`work_len` is a multiple of
        // `LINE_VALUES`).
        let w = self.work_len;
        let (bufs, line) = scratch[..used].split_at_mut(2 * w);
        let (a, b) = bufs.split_at_mut(w);
        let mut io = Io {
            input,
            work: [a, b],
            output,
        };
        let batch = self.options.batch;
        let Fft3d {
            steps,
            plans,
            schedule,
            ..
        } = self;
        let mut scaled = false;
        for task in &schedule[which] {
            match task {
                Task::Reshape { step, from, to } => {
                    let (src, mut dst) = io.pair(*from, *to);
                    let src = src.expect("a reshape is out of place");
                    match &mut steps[*step] {
                        Step::Reshape { fwd, bwd } => {
                            let r = if forward { fwd } else { bwd };
                            let (n_in, n_out) = (r.input_len(), r.output_len());
                            r.execute(comm, &src.c()[..n_in], &mut dst.c()[..n_out])?;
                        }
                        Step::ReshapeReal { fwd, bwd } => {
                            let r = if forward { fwd } else { bwd };
                            let (n_in, n_out) = (r.input_len(), r.output_len());
                            r.execute(comm, &src.r()[..n_in], &mut dst.r()[..n_out])?;
                        }
                        _ => unreachable!("a transform is not a reshape"),
                    }
                }
                Task::Transforms { ops, last } => {
                    let s = if *last { scale } else { 1.0 };
                    scaled |= *last;
                    if let [(op, from, to)] = &ops[..] {
                        op.run(plans, None, batch, &mut io, *from, *to, s, line)?;
                    } else {
                        for f in 0..batch {
                            for p in 0..ops[0].0.planes() {
                                for (k, (op, from, to)) in ops.iter().enumerate() {
                                    let sc = if k + 1 == ops.len() { s } else { 1.0 };
                                    op.run(
                                        plans,
                                        Some((f, p)),
                                        batch,
                                        &mut io,
                                        *from,
                                        *to,
                                        sc,
                                        line,
                                    )?;
                                }
                            }
                        }
                    }
                }
            }
        }
        if !scaled && scale != 1.0 {
            match &mut io.output {
                Dst::C(o) => o.iter_mut().for_each(|v| *v *= scale),
                Dst::R(o) => o.iter_mut().for_each(|v| *v *= scale),
            }
        }
        Ok(())
    }

    /// The order in which one direction runs the steps: reshapes, and
    /// groups of transforms that run plane by plane, each with the buffers
    /// it reads and writes.
    ///
    /// The first task reads the caller's input and the last one writes the
    /// caller's output. A group is a transform and those after it (no
    /// reshape between) along axes other than the outermost axis in memory
    /// of its layout; a group of complex transforms runs in place in a work
    /// buffer where it can, and in the output once only complex transforms
    /// in the output's layout remain (the first of them reading the input
    /// or a work buffer).
    fn schedule(&self, forward: bool, writable: bool) -> Vec<Task> {
        let count = self.steps.len();
        let at = |i: usize| if forward { i } else { count - 1 - i };
        let mut tasks = Vec::new();
        let mut cur = Loc::Input;
        let mut i = 0;
        while i < count {
            if self.steps[at(i)].is_reshape() {
                let to = if i + 1 == count {
                    Loc::Output
                } else {
                    cur.other()
                };
                tasks.push(Task::Reshape {
                    step: at(i),
                    from: cur,
                    to,
                });
                cur = to;
                i += 1;
                continue;
            }
            let first = self.op(at(i), forward);
            let outer = first.outer();
            let mut ops = vec![first];
            let mut j = i + 1;
            while j < count && !self.steps[at(j)].is_reshape() {
                let op = self.op(at(j), forward);
                let fusable = op.outer() == outer
                    && ops.iter().chain([&op]).all(|o| o.axis() != outer)
                    && op.planes() == ops[0].planes();
                if !fusable {
                    break;
                }
                ops.push(op);
                j += 1;
            }
            let last = j == count;
            let is_real = |o: &Op| !matches!(o, Op::C2c { .. });
            // Only complex transforms left, in the output's layout: they
            // run in place in the output (its length is theirs).
            let rest_in_output = (j..count).all(|k| matches!(self.steps[at(k)], Step::Fft { .. }));
            let dest = if last || rest_in_output {
                Loc::Output
            } else if !ops.iter().any(is_real) && (cur != Loc::Input || writable) {
                cur
            } else {
                cur.other()
            };
            // A complex transform followed by a real one in the group stays
            // in a work buffer other than the group's destination.
            let real: Vec<bool> = ops.iter().map(is_real).collect();
            let mut placed = Vec::with_capacity(ops.len());
            let mut at_loc = cur;
            for (k, o) in ops.into_iter().enumerate() {
                let later_real = real[k + 1..].iter().any(|&r| r);
                let to = match (real[k] || !later_real, at_loc) {
                    (true, _) => dest,
                    (false, Loc::Input) if writable => Loc::Input,
                    (false, Loc::Input) => dest.other(),
                    (false, l) => l,
                };
                placed.push((o, at_loc, to));
                at_loc = to;
            }
            tasks.push(Task::Transforms { ops: placed, last });
            cur = dest;
            i = j;
        }
        debug_assert_eq!(cur, Loc::Output);
        tasks
    }

    /// The transform of step `i` in one direction.
    fn op(&self, i: usize, forward: bool) -> Op {
        let rank = self.rank;
        match &self.steps[i] {
            Step::Fft { axis, layout } => Op::C2c {
                g: Geom::of(layout, rank, *axis),
                dir: if forward {
                    FftDirection::Forward
                } else {
                    FftDirection::Inverse
                },
            },
            Step::Rfft {
                axis,
                real,
                complex,
            } => {
                let (real, complex) = (Geom::of(real, rank, *axis), Geom::of(complex, rank, *axis));
                if forward {
                    Op::R2c { real, complex }
                } else {
                    Op::C2r { real, complex }
                }
            }
            _ => unreachable!("a reshape is not a transform"),
        }
    }
}

/// One task of a direction's schedule.
#[derive(Debug)]
enum Task {
    /// The reshape of step `step`.
    Reshape { step: usize, from: Loc, to: Loc },
    /// Transforms that run plane by plane (one transform: over the whole
    /// block), each from and to the given buffers; `last` when the group
    /// ends the direction (its last transform applies the final scale).
    Transforms {
        ops: Vec<(Op, Loc, Loc)>,
        last: bool,
    },
}

impl Step {
    fn is_reshape(&self) -> bool {
        matches!(self, Step::Reshape { .. } | Step::ReshapeReal { .. })
    }
}

/// Where data lives during a transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    /// The caller's input (read only).
    Input,
    /// One of the two work buffers in the scratch.
    Work(usize),
    /// The caller's output.
    Output,
}

impl Loc {
    /// A work buffer other than `self`.
    fn other(self) -> Loc {
        match self {
            Loc::Work(0) => Loc::Work(1),
            _ => Loc::Work(0),
        }
    }
}

/// Read-only data, complex or real.
#[derive(Clone, Copy)]
enum Src<'a> {
    C(&'a [Complex64]),
    R(&'a [f64]),
}

impl<'a> Src<'a> {
    fn c(self) -> &'a [Complex64] {
        match self {
            Src::C(c) => c,
            Src::R(_) => unreachable!("complex data expected"),
        }
    }

    fn r(self) -> &'a [f64] {
        match self {
            Src::R(r) => r,
            Src::C(c) => flat(c),
        }
    }
}

/// Writable data, complex or real.
enum Dst<'a> {
    C(&'a mut [Complex64]),
    R(&'a mut [f64]),
}

impl Dst<'_> {
    fn c(&mut self) -> &mut [Complex64] {
        match self {
            Dst::C(c) => c,
            Dst::R(_) => unreachable!("complex data expected"),
        }
    }

    fn r(&mut self) -> &mut [f64] {
        match self {
            Dst::R(r) => r,
            Dst::C(c) => flat_mut(c),
        }
    }
}

/// The caller's buffers and the two work buffers of one execution.
struct Io<'a> {
    input: In<'a>,
    work: [&'a mut [Complex64]; 2],
    output: Dst<'a>,
}

/// The caller's input: read only, or free to be overwritten (complex).
enum In<'a> {
    Read(Src<'a>),
    Write(&'a mut [Complex64]),
}

impl In<'_> {
    fn src(&self) -> Src<'_> {
        match self {
            In::Read(s) => *s,
            In::Write(c) => Src::C(c),
        }
    }
}

impl Io<'_> {
    /// The source and destination of a step from `from` to `to`; no source
    /// when the step runs in place.
    fn pair(&mut self, from: Loc, to: Loc) -> (Option<Src<'_>>, Dst<'_>) {
        let [w0, w1] = &mut self.work;
        match (from, to) {
            (Loc::Input, Loc::Input) => match &mut self.input {
                In::Write(c) => (None, Dst::C(c)),
                In::Read(_) => unreachable!("a read-only input is never written"),
            },
            (Loc::Work(0), Loc::Work(0)) => (None, Dst::C(w0)),
            (Loc::Work(_), Loc::Work(1)) if from == to => (None, Dst::C(w1)),
            (Loc::Output, Loc::Output) => (None, reborrow(&mut self.output)),
            (Loc::Input, Loc::Work(0)) => (Some(self.input.src()), Dst::C(w0)),
            (Loc::Input, Loc::Work(_)) => (Some(self.input.src()), Dst::C(w1)),
            (Loc::Input, Loc::Output) => (Some(self.input.src()), reborrow(&mut self.output)),
            (Loc::Work(0), Loc::Work(_)) => (Some(Src::C(w0)), Dst::C(w1)),
            (Loc::Work(_), Loc::Work(_)) => (Some(Src::C(w1)), Dst::C(w0)),
            (Loc::Work(0), Loc::Output) => (Some(Src::C(w0)), reborrow(&mut self.output)),
            (Loc::Work(_), Loc::Output) => (Some(Src::C(w1)), reborrow(&mut self.output)),
            (from, to) => unreachable!("no step moves data from {from:?} to {to:?}"),
        }
    }
}

fn reborrow<'b>(d: &'b mut Dst<'_>) -> Dst<'b> {
    match d {
        Dst::C(c) => Dst::C(c),
        Dst::R(r) => Dst::R(r),
    }
}

/// Padding (complex values, one cache line) between the lines of a block,
/// so that lines of a power-of-two length do not all map to the same cache
/// sets.
const PAD: usize = 4;

/// Complex values in a 64-byte cache line.
const LINE_VALUES: usize = 4;

/// `s` from its first element on a 64-byte boundary, if that leaves at
/// least `need` elements and the slice's elements can reach one (they are
/// 16 bytes long, so only a slice at an address that is a multiple of 16
/// can); else `s` itself. Vector loads and stores that straddle two cache
/// lines cost about twice those within one, and a large allocation
/// usually starts 16 bytes past a page.
fn aligned(s: &mut [Complex64], need: usize) -> &mut [Complex64] {
    let skip = to_line_boundary(s.as_ptr());
    if s.len() >= skip + need {
        &mut s[skip..]
    } else {
        s
    }
}

/// Fields of this many bytes or more are taken to be cold in the caches
/// when a real step writes them: its next group of output lines is then
/// prefetched for writing (on the 2 MiB-L2 Xeon of the README, r2c 256^3
/// forward 109 -> 80 ms, 128^3 backward 9.4 -> 7.5 ms, while 64^3 lost
/// 5-10 % to the prefetches).
const COLD_FROM: usize = 8 << 20;

/// Lines of one strided transform gathered into one block.
const BLOCK: usize = 64;

/// One field's local block as the lines along `axis` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geom {
    shape: [usize; 3],
    strides: [usize; 3],
    axis: usize,
    /// The outermost axis in memory.
    outer: usize,
}

impl Geom {
    fn of(layout: &Layout, rank: usize, axis: usize) -> Geom {
        Geom {
            shape: layout.local_shape(rank),
            strides: layout.strides(rank),
            axis,
            outer: layout.order()[0],
        }
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// One plane of the outer axis: the geometry and its offset and length
    /// within one field.
    fn plane(&self, p: usize) -> (Geom, usize, usize) {
        let mut g = *self;
        g.shape[self.outer] = 1;
        let st = self.strides[self.outer];
        (g, p * st, g.len())
    }
}

/// One transform step in one direction.
#[derive(Debug)]
enum Op {
    C2c { g: Geom, dir: FftDirection },
    R2c { real: Geom, complex: Geom },
    C2r { real: Geom, complex: Geom },
}

impl Op {
    fn geom(&self) -> &Geom {
        match self {
            Op::C2c { g, .. } => g,
            Op::R2c { real, .. } | Op::C2r { real, .. } => real,
        }
    }

    fn outer(&self) -> usize {
        self.geom().outer
    }

    fn axis(&self) -> usize {
        self.geom().axis
    }

    fn planes(&self) -> usize {
        let g = self.geom();
        g.shape[g.outer]
    }

    /// Runs the transform on every field (`plane` None) or on plane `p` of
    /// field `f` (`plane` `Some((f, p))`), from `from` to `to`, scaling the
    /// result by `scale`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        plans: &Plans,
        plane: Option<(usize, usize)>,
        batch: usize,
        io: &mut Io<'_>,
        from: Loc,
        to: Loc,
        scale: f64,
        line: &mut [Complex64],
    ) -> Result<(), FftError> {
        let (src, mut dst) = io.pair(from, to);
        let fields = if plane.is_some() { 1 } else { batch };
        match self {
            Op::C2c { g, dir } => {
                let plan = plans.c2c(g.shape[g.axis], *dir);
                for f in 0..fields {
                    let (pg, o, n) = select(g, plane, f);
                    let s = src.map(|s| &s.c()[o..o + n]);
                    c2c_lines(plan, &pg, s, &mut dst.c()[o..o + n], scale, line, BLOCK);
                }
            }
            Op::R2c { real, complex } => {
                let plan = plans.r2c.as_ref().expect("planned");
                let src = src.expect("a real-to-complex step is out of place");
                for f in 0..fields {
                    let (rg, ro, rn) = select(real, plane, f);
                    let (cg, co, cn) = select(complex, plane, f);
                    r2c_lines(
                        plan,
                        (&rg, &src.r()[ro..ro + rn]),
                        (&cg, &mut dst.c()[co..co + cn]),
                        scale,
                        line,
                        complex.len() * size_of::<Complex64>() >= COLD_FROM,
                    )?;
                }
            }
            Op::C2r { real, complex } => {
                let plan = plans.r2c.as_ref().expect("planned");
                let src = src.expect("a complex-to-real step is out of place");
                for f in 0..fields {
                    let (rg, ro, rn) = select(real, plane, f);
                    let (cg, co, cn) = select(complex, plane, f);
                    c2r_lines(
                        plan,
                        (&cg, &src.c()[co..co + cn]),
                        (&rg, &mut dst.r()[ro..ro + rn]),
                        scale,
                        line,
                        real.len() * size_of::<f64>() >= COLD_FROM,
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Field `f` whole (`plane` None) or the plane `Some((field, p))` names:
/// geometry, offset, length.
fn select(g: &Geom, plane: Option<(usize, usize)>, f: usize) -> (Geom, usize, usize) {
    match plane {
        Some((f, p)) => {
            let (pg, o, n) = g.plane(p);
            (pg, f * g.len() + o, n)
        }
        None => (*g, f * g.len(), g.len()),
    }
}

fn scale_all<T: Copy + std::ops::Mul<f64, Output = T>>(v: &mut [T], scale: f64) {
    if scale != 1.0 {
        v.iter_mut().for_each(|x| *x = *x * scale);
    }
}

/// Visits the blocks of a strided transform: `f(i, t0, bl)` for each run
/// of `bl <= block` lines (the runs of one `i` as equal as they can be)
/// that neighbour each other in memory, starting at index `t0` of the
/// contiguous axis and `i` of the third; where the third axis follows the
/// contiguous one in memory, `i` is 0 and `t0` counts lines of the whole
/// run ([`line_at`] gives the offset either way).
fn for_blocks(
    g: &Geom,
    block: usize,
    mut f: impl FnMut(usize, usize, usize) -> Result<(), FftError>,
) -> Result<(), FftError> {
    let (c, o) = block_axes(g);
    // When the third axis follows the contiguous one in memory, the lines of
    // both form one run: blocks go across it (`i` is then always 0 and `t0`
    // counts lines of the run), so rows stay long when the contiguous axis
    // is short or not a multiple of the block.
    let (len, outer) = if g.strides[o] == g.shape[c] * g.strides[c] {
        (g.shape[c] * g.shape[o], 1)
    } else {
        (g.shape[c], g.shape[o])
    };
    // Blocks of nearly equal size (no short last block).
    let count = len.div_ceil(block.max(1));
    for i in 0..outer {
        let mut t0 = 0;
        for b in 0..count {
            let bl = len / count + usize::from(b < len % count);
            f(i, t0, bl)?;
            t0 += bl;
        }
    }
    Ok(())
}

/// The contiguous axis other than `g.axis`, then the third axis.
fn block_axes(g: &Geom) -> (usize, usize) {
    let (a, b) = others(g.axis);
    if g.strides[b] == 1 {
        (b, a)
    } else {
        (a, b)
    }
}

/// Offset of the line at index `i` of the third axis and `t` of the
/// contiguous one (`t` may run past that axis into the third where the two
/// form one run, see [`for_blocks`]).
fn line_at(g: &Geom, i: usize, t: usize) -> usize {
    let (c, o) = block_axes(g);
    i * g.strides[o] + t * g.strides[c]
}

/// Applies `plan` to every line along `g.axis` of one field or plane: from
/// `src` into `dst`, or in place in `dst`, each result scaled by `scale`.
/// The column transform goes to [`c2c_columns`]; with rustfft's plan,
/// contiguous lines are transformed in runs of `block` and strided lines
/// gathered `block` at a time (neighbours along the contiguous axis) into
/// consecutive lines, transformed together and scattered back. Each line
/// gets the same 1D plan whatever the grouping, so the bits do not depend
/// on it.
fn c2c_lines(
    plan: &Plan1d,
    g: &Geom,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    scale: f64,
    line: &mut [Complex64],
    block: usize,
) {
    let n = g.shape[g.axis];
    if n == 0 || g.len() == 0 {
        return;
    }
    let plan = match plan {
        Plan1d::Col(c) => return c2c_columns(c, g, src, dst, scale, line),
        Plan1d::Rust(p) => &**p,
    };
    let (fft_scratch, rest) = line.split_at_mut(plan.get_inplace_scratch_len());
    let rest = aligned(rest, n);
    let stride = g.strides[g.axis];
    if stride == 1 || g.len() == n {
        let block = block.min(rest.len() / n).max(1);
        for (k, d) in dst.chunks_mut(block * n).enumerate() {
            if let Some(s) = src {
                d.copy_from_slice(&s[k * block * n..][..d.len()]);
            }
            plan.process_with_scratch(d, fft_scratch);
            scale_all(d, scale);
        }
        return;
    }
    // Lines one cache line apart when the scratch has room.
    let pitch = if rest.len() >= n + PAD { n + PAD } else { n };
    let block = block.min(rest.len() / pitch).max(1);
    let buf = &mut rest[..block * pitch];
    let _ = for_blocks(g, block, |i, t0, bl| {
        let base = line_at(g, i, t0);
        Complex64::gather(src.unwrap_or(dst), base, stride, (n, pitch), bl, buf);
        for l in buf.chunks_exact_mut(pitch).take(bl) {
            plan.process_with_scratch(&mut l[..n], fft_scratch);
        }
        Complex64::scatter(buf, (n, pitch), bl, dst, base, stride, scale);
        Ok(())
    });
}

/// [`c2c_lines`] with the column transform: strided lines are transformed
/// where they lie, from `src` into `dst`, a whole run of neighbours (a row
/// of the contiguous axis, or of it and the third axis where they follow
/// each other in memory) a call, which the transform cuts into chunks
/// from the run's first cache-line boundary; contiguous lines as
/// [`contiguous_lines`] takes them.
fn c2c_columns(
    plan: &ColFft,
    g: &Geom,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    scale: f64,
    line: &mut [Complex64],
) {
    let n = g.shape[g.axis];
    let stride = g.strides[g.axis];
    if stride == 1 || g.len() == n {
        contiguous_lines(plan, src, dst, scale, line);
        return;
    }
    let _ = for_blocks(g, usize::MAX, |i, t0, bl| {
        let base = line_at(g, i, t0);
        plan.columns(
            src.map(|s| (s, base, stride)),
            (dst, base, stride),
            bl,
            scale,
            line,
        );
        Ok(())
    });
}

/// Scratch (complex values) that [`contiguous_lines`] and the strided
/// columns of [`c2c_columns`] need: the column transform's buffers and a
/// transposed block of `WIDTH` lines, with slack to align it.
fn contiguous_scratch(plan: &ColFft) -> usize {
    plan.scratch_len() + WIDTH * plan.len() + LINE_VALUES
}

/// The lines of `dst` (back to back, of the plan's length), from the same
/// places in `src` or in place, each result times `scale`: in the line
/// form where the plan has one, else transposed `WIDTH` at a time into a
/// block whose columns they are, and back.
fn contiguous_lines(
    plan: &ColFft,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    scale: f64,
    line: &mut [Complex64],
) {
    let n = plan.len();
    if plan.line_form() {
        plan.lines(src, dst, scale, line);
        return;
    }
    let line = aligned(line, n * WIDTH);
    let (blk, rest) = line.split_at_mut(n * WIDTH);
    for (k, d) in dst.chunks_mut(WIDTH * n).enumerate() {
        let bl = d.len() / n;
        match src {
            Some(s) => Complex64::scatter(
                &s[k * WIDTH * n..][..d.len()],
                (n, n),
                bl,
                blk,
                0,
                WIDTH,
                1.0,
            ),
            None => Complex64::scatter(d, (n, n), bl, blk, 0, WIDTH, 1.0),
        }
        plan.columns(None, (blk, 0, WIDTH), bl, scale, rest);
        Complex64::gather(blk, 0, WIDTH, (n, n), bl, d);
    }
}

/// The half spectra of `count` real lines (`rp` apart in `src`) into
/// lines `cp` apart in `dst`, each times `scale`: `WIDTH` lines at a time
/// read as complex lines of half the length, transformed together into a
/// block and untangled from it. Lines back to back go through the line
/// form straight from the input (which asks for each next line while one
/// is transformed); others are copied into the block first. Where the
/// output is `cold` (a field larger than the caches hold), each output
/// line of the next group is asked for with intent to write while one of
/// this group is untangled.
fn real_forward(
    plan: &RealCol,
    (src, rp): (&[f64], usize),
    (dst, cp): (&mut [Complex64], usize),
    count: usize,
    scale: f64,
    scratch: &mut [Complex64],
    cold: bool,
) {
    let h = plan.half();
    let scratch = aligned(scratch, WIDTH * h);
    let (blk, rest) = scratch.split_at_mut(WIDTH * h);
    let direct = rp == 2 * h && plan.fwd.line_form();
    for g0 in (0..count).step_by(WIDTH) {
        let gl = WIDTH.min(count - g0);
        if direct {
            // The next group's first line, which the line form's own look
            // ahead (within the group) does not reach.
            if g0 + gl < count {
                let next = src[(g0 + gl) * rp..].as_ptr();
                for c in (0..2 * h).step_by(2 * LINE_VALUES) {
                    prefetch_r(next.wrapping_add(c).cast::<Complex64>());
                }
            }
            let lines = as_complex(&src[g0 * rp..][..gl * 2 * h]);
            plan.fwd.lines(Some(lines), &mut blk[..gl * h], 1.0, rest);
        } else {
            for (t, b) in blk.chunks_exact_mut(h).take(gl).enumerate() {
                flat_mut(b).copy_from_slice(&src[(g0 + t) * rp..][..2 * h]);
            }
            contiguous_lines(&plan.fwd, None, &mut blk[..gl * h], 1.0, rest);
        }
        for (t, b) in blk.chunks_exact(h).take(gl).enumerate() {
            let ahead = g0 + WIDTH + t;
            if cold && ahead < count {
                let next = dst[ahead * cp..].as_ptr();
                for c in (0..=h).step_by(LINE_VALUES) {
                    prefetch_w(next.wrapping_add(c));
                }
            }
            plan.untangle(b, &mut dst[(g0 + t) * cp..][..=h], scale);
        }
    }
}

/// The reverse of [`real_forward`]: `count` half spectra (`cp` apart in
/// `src`) into real lines `rp` apart in `dst`, each times `scale`. Real
/// lines back to back are written as complex lines of half the length:
/// with the line form, tangled into a block and transformed from it into
/// the output; without, tangled into the output and transformed where
/// they lie (where the output is `cold`, the next group's lines asked for
/// with intent to write first). Other lines go through a block.
fn real_backward(
    plan: &RealCol,
    (src, cp): (&[Complex64], usize),
    (dst, rp): (&mut [f64], usize),
    count: usize,
    scale: f64,
    scratch: &mut [Complex64],
    cold: bool,
) {
    let h = plan.half();
    if rp == 2 * h {
        // Lines back to back: each read as complex values in place.
        let dst = as_complex_mut(&mut dst[..count * rp]);
        if plan.bwd.line_form() {
            // Tangled into a block and transformed from it into the
            // output lines (the line form asks for each next one).
            let scratch = aligned(scratch, WIDTH * h);
            let (blk, rest) = scratch.split_at_mut(WIDTH * h);
            for (g, d) in dst.chunks_mut(WIDTH * h).enumerate() {
                let gl = d.len() / h;
                for (t, b) in blk.chunks_exact_mut(h).take(gl).enumerate() {
                    plan.tangle(&src[(g * WIDTH + t) * cp..][..=h], b);
                }
                plan.bwd.lines(Some(&blk[..gl * h]), d, scale, rest);
            }
            return;
        }
        let len = dst.len();
        for (g, d) in dst.chunks_mut(WIDTH * h).enumerate() {
            if cold {
                let next = d.as_ptr().wrapping_add(WIDTH * h);
                let ahead = (WIDTH * h).min(len.saturating_sub((g + 1) * WIDTH * h));
                for c in (0..ahead).step_by(4) {
                    prefetch_w(next.wrapping_add(c));
                }
            }
            for (t, b) in d.chunks_exact_mut(h).enumerate() {
                plan.tangle(&src[(g * WIDTH + t) * cp..][..=h], b);
            }
            contiguous_lines(&plan.bwd, None, d, scale, scratch);
        }
        return;
    }
    let scratch = aligned(scratch, WIDTH * h);
    let (blk, rest) = scratch.split_at_mut(WIDTH * h);
    for g0 in (0..count).step_by(WIDTH) {
        let gl = WIDTH.min(count - g0);
        for (t, b) in blk.chunks_exact_mut(h).take(gl).enumerate() {
            plan.tangle(&src[(g0 + t) * cp..][..=h], b);
        }
        contiguous_lines(&plan.bwd, None, &mut blk[..gl * h], scale, rest);
        for (t, b) in blk.chunks_exact(h).take(gl).enumerate() {
            dst[(g0 + t) * rp..][..2 * h].copy_from_slice(flat(b));
        }
    }
}

/// Splits the line scratch of a real step into the plan's scratch, a real
/// block of `BLOCK` lines of `n` (`n + 2 PAD` apart) and a complex block of
/// `BLOCK` lines of `m` (`m + PAD` apart).
fn real_split(
    line: &mut [Complex64],
    need: usize,
    n: usize,
    m: usize,
) -> (&mut [Complex64], &mut [f64], &mut [Complex64]) {
    let (sh, rest) = line.split_at_mut(need);
    // Each block on a 64-byte boundary where the room allows.
    let r_len = (BLOCK * (n + 2 * PAD)).div_ceil(2);
    let c_len = BLOCK * (m + PAD);
    let rest = aligned(rest, r_len.next_multiple_of(LINE_VALUES) + c_len);
    let r_len = if rest.len() >= r_len.next_multiple_of(LINE_VALUES) + c_len {
        r_len.next_multiple_of(LINE_VALUES)
    } else {
        r_len
    };
    let (r, c) = rest.split_at_mut(r_len);
    (
        sh,
        &mut flat_mut(r)[..BLOCK * (n + 2 * PAD)],
        &mut c[..c_len],
    )
}

fn realfft_error(e: realfft::FftError) -> FftError {
    FftError::Invalid(e.to_string())
}

/// Real-to-complex transform of every line along the halved axis of one
/// field or plane, from `src` (real geometry) into `dst` (complex
/// geometry), each result scaled by `scale`; strided lines go through
/// blocks as in [`c2c_lines`].
#[allow(clippy::too_many_arguments)]
fn r2c_lines(
    plan: &RealPlan,
    (rg, src): (&Geom, &[f64]),
    (cg, dst): (&Geom, &mut [Complex64]),
    scale: f64,
    line: &mut [Complex64],
    cold: bool,
) -> Result<(), FftError> {
    let (n, m) = (rg.shape[rg.axis], cg.shape[cg.axis]);
    if n == 0 || rg.len() == 0 {
        return Ok(());
    }
    let plan = match plan {
        RealPlan::Col(c) => {
            let (sh, rblock, cblock) = real_split(line, plan.scratch_len(), n, m);
            let (rs, cs) = (rg.strides[rg.axis], cg.strides[cg.axis]);
            if rs == 1 || rg.len() == n {
                real_forward(c, (src, n), (dst, m), rg.len() / n, scale, sh, cold);
                return Ok(());
            }
            return for_blocks(rg, BLOCK, |i, t0, bl| {
                let (rbase, cbase) = (line_at(rg, i, t0), line_at(cg, i, t0));
                f64::gather(src, rbase, rs, (n, n + 2 * PAD), bl, rblock);
                real_forward(
                    c,
                    (rblock, n + 2 * PAD),
                    (cblock, m + PAD),
                    bl,
                    1.0,
                    sh,
                    false,
                );
                Complex64::scatter(cblock, (m, m + PAD), bl, dst, cbase, cs, scale);
                Ok(())
            });
        }
        RealPlan::Real(f, _) => &**f,
    };
    let (sh, rblock, cblock) = real_split(line, plan.get_scratch_len(), n, m);
    let (rs, cs) = (rg.strides[rg.axis], cg.strides[cg.axis]);
    if rs == 1 || rg.len() == n {
        // Lines are back to back in both geometries.
        for (r, c) in src.chunks_exact(n).zip(dst.chunks_exact_mut(m)) {
            rblock[..n].copy_from_slice(r);
            plan.process_with_scratch(&mut rblock[..n], c, sh)
                .map_err(realfft_error)?;
            scale_all(c, scale);
        }
        return Ok(());
    }
    // The real and complex geometries differ only along the halved axis:
    // a line has the same indices in both.
    for_blocks(rg, BLOCK, |i, t0, bl| {
        let (rbase, cbase) = (line_at(rg, i, t0), line_at(cg, i, t0));
        f64::gather(src, rbase, rs, (n, n + 2 * PAD), bl, rblock);
        let pairs = rblock
            .chunks_exact_mut(n + 2 * PAD)
            .zip(cblock.chunks_exact_mut(m + PAD));
        for (r, c) in pairs.take(bl) {
            plan.process_with_scratch(&mut r[..n], &mut c[..m], sh)
                .map_err(realfft_error)?;
        }
        Complex64::scatter(cblock, (m, m + PAD), bl, dst, cbase, cs, scale);
        Ok(())
    })
}

/// Complex-to-real transform of every line along the halved axis of one
/// field or plane, from `src` (complex geometry) into `dst` (real
/// geometry), each result scaled by `scale`; the imaginary parts that must
/// vanish (zero and Nyquist frequencies) are ignored.
#[allow(clippy::too_many_arguments)]
fn c2r_lines(
    plan: &RealPlan,
    (cg, src): (&Geom, &[Complex64]),
    (rg, dst): (&Geom, &mut [f64]),
    scale: f64,
    line: &mut [Complex64],
    cold: bool,
) -> Result<(), FftError> {
    let (n, m) = (rg.shape[rg.axis], cg.shape[cg.axis]);
    if n == 0 || rg.len() == 0 {
        return Ok(());
    }
    let plan = match plan {
        RealPlan::Col(c) => {
            let (sh, rblock, cblock) = real_split(line, plan.scratch_len(), n, m);
            let (rs, cs) = (rg.strides[rg.axis], cg.strides[cg.axis]);
            if rs == 1 || rg.len() == n {
                real_backward(c, (src, m), (dst, n), rg.len() / n, scale, sh, cold);
                return Ok(());
            }
            return for_blocks(rg, BLOCK, |i, t0, bl| {
                let (rbase, cbase) = (line_at(rg, i, t0), line_at(cg, i, t0));
                Complex64::gather(src, cbase, cs, (m, m + PAD), bl, cblock);
                real_backward(
                    c,
                    (cblock, m + PAD),
                    (rblock, n + 2 * PAD),
                    bl,
                    1.0,
                    sh,
                    false,
                );
                f64::scatter(rblock, (n, n + 2 * PAD), bl, dst, rbase, rs, scale);
                Ok(())
            });
        }
        RealPlan::Real(_, b) => &**b,
    };
    let (sh, rblock, cblock) = real_split(line, plan.get_scratch_len(), n, m);
    let fix = |c: &mut [Complex64]| {
        c[0].im = 0.0;
        if n % 2 == 0 {
            c[m - 1].im = 0.0;
        }
    };
    let (rs, cs) = (rg.strides[rg.axis], cg.strides[cg.axis]);
    if rs == 1 || rg.len() == n {
        for (c, r) in src.chunks_exact(m).zip(dst.chunks_exact_mut(n)) {
            let cl = &mut cblock[..m];
            cl.copy_from_slice(c);
            fix(cl);
            plan.process_with_scratch(cl, r, sh)
                .map_err(realfft_error)?;
            scale_all(r, scale);
        }
        return Ok(());
    }
    for_blocks(rg, BLOCK, |i, t0, bl| {
        let (rbase, cbase) = (line_at(rg, i, t0), line_at(cg, i, t0));
        Complex64::gather(src, cbase, cs, (m, m + PAD), bl, cblock);
        let pairs = cblock
            .chunks_exact_mut(m + PAD)
            .zip(rblock.chunks_exact_mut(n + 2 * PAD));
        for (c, r) in pairs.take(bl) {
            let c = &mut c[..m];
            fix(c);
            plan.process_with_scratch(c, &mut r[..n], sh)
                .map_err(realfft_error)?;
        }
        f64::scatter(rblock, (n, n + 2 * PAD), bl, dst, rbase, rs, scale);
        Ok(())
    })
}

/// Applies `plan` to every line along `axis` of `batch` fields in
/// `layout` (for the derivative plans); `scratch` holds the plan's scratch
/// and at least one line, and as many lines as fit (up to a block) are
/// transformed together.
pub(crate) fn fft_lines_pub(
    plan: &Plan1d,
    layout: &Layout,
    rank: usize,
    axis: usize,
    batch: usize,
    data: &mut [Complex64],
    scratch: &mut [Complex64],
) {
    let g = Geom::of(layout, rank, axis);
    let len = g.len();
    if len == 0 {
        return;
    }
    for field in data.chunks_exact_mut(len).take(batch) {
        c2c_lines(plan, &g, None, field, 1.0, scratch, BLOCK);
    }
}

/// A layout with `axis` whole and contiguous (a pencil, or a slab when no
/// pencil fits).
pub(crate) fn layout_for_axis(
    global: [usize; 3],
    p: usize,
    axis: usize,
) -> Result<Layout, FftError> {
    layout_for(global, p, axis, None)
}

#[cfg(test)]
mod tests {
    //! The blocked, plane-fused execution against a plain one: every line
    //! gathered alone and transformed by a fresh 1D plan, axis after axis,
    //! on a row-major copy. The bits must be the same.
    use super::*;
    use comm::local;

    /// Row-major index of global point `p`.
    fn rm(g: [usize; 3], p: [usize; 3]) -> usize {
        (p[0] * g[1] + p[1]) * g[2] + p[2]
    }

    /// Memory offset of `p` in a one-rank layout.
    fn mem(l: &Layout, p: [usize; 3]) -> usize {
        let st = l.strides(0);
        p[0] * st[0] + p[1] * st[1] + p[2] * st[2]
    }

    fn points(g: [usize; 3]) -> impl Iterator<Item = [usize; 3]> {
        (0..g[0]).flat_map(move |i| (0..g[1]).flat_map(move |j| (0..g[2]).map(move |k| [i, j, k])))
    }

    fn value(i: usize) -> Complex64 {
        let h = |x: usize| ((x.wrapping_mul(2_654_435_761) >> 7) % 1999) as f64 / 999.5 - 1.0;
        Complex64::new(h(i), h(i ^ 0x5bd1))
    }

    /// Every line along `axis` of a row-major array through `f`.
    fn each_line(
        g: [usize; 3],
        axis: usize,
        data: &mut [Complex64],
        mut f: impl FnMut(&mut Vec<Complex64>),
    ) {
        let (a, b) = others(axis);
        let st = [g[1] * g[2], g[2], 1];
        for i in 0..g[a] {
            for j in 0..g[b] {
                let o = i * st[a] + j * st[b];
                let mut line: Vec<Complex64> =
                    (0..g[axis]).map(|k| data[o + k * st[axis]]).collect();
                f(&mut line);
                for (k, v) in line.into_iter().enumerate() {
                    data[o + k * st[axis]] = v;
                }
            }
        }
    }

    fn c2c_reference(
        g: [usize; 3],
        x: &[Complex64],
        dir: FftDirection,
        scale: f64,
    ) -> Vec<Complex64> {
        let mut d = x.to_vec();
        let axes = if dir == FftDirection::Forward {
            [2, 1, 0]
        } else {
            [0, 1, 2]
        };
        for axis in axes {
            let plan = line_plan(g[axis], dir);
            each_line(g, axis, &mut d, plan);
        }
        if scale != 1.0 {
            d.iter_mut().for_each(|v| *v *= scale);
        }
        d
    }

    /// One line's transform as the plans apply it, a line at a time: the
    /// column transform on a single column for powers of two, rustfft's
    /// plan otherwise.
    fn line_plan(n: usize, dir: FftDirection) -> impl FnMut(&mut Vec<Complex64>) {
        let p = Plan1d::new(&mut FftPlanner::new(), n, dir);
        move |l| match &p {
            Plan1d::Col(c) => c.line(l, 1.0),
            Plan1d::Rust(r) => r.process(l),
        }
    }

    /// One real line's forward and (unnormalised) backward transforms as
    /// the plans apply them, a line at a time: through the column
    /// transform of half the length for powers of two from 4, realfft's
    /// plans otherwise.
    #[allow(clippy::type_complexity)]
    fn real_line_plans(
        n: usize,
    ) -> (
        Box<dyn Fn(Vec<f64>) -> Vec<Complex64>>,
        Box<dyn Fn(Vec<Complex64>) -> Vec<f64>>,
    ) {
        match RealPlan::new(n) {
            RealPlan::Col(c) => {
                let c2 = c.clone();
                let h = c.half();
                (
                    Box::new(move |x| {
                        let mut z: Vec<Complex64> =
                            x.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
                        c.fwd.line(&mut z, 1.0);
                        let mut out = vec![Complex64::default(); h + 1];
                        c.untangle(&z, &mut out, 1.0);
                        out
                    }),
                    Box::new(move |s| {
                        let mut z = vec![Complex64::default(); h];
                        c2.tangle(&s, &mut z);
                        c2.bwd.line(&mut z, 1.0);
                        z.iter().flat_map(|v| [v.re, v.im]).collect()
                    }),
                )
            }
            RealPlan::Real(f, b) => (
                Box::new(move |mut x| {
                    let mut out = f.make_output_vec();
                    f.process(&mut x, &mut out).unwrap();
                    out
                }),
                Box::new(move |mut s| {
                    let mut out = b.make_output_vec();
                    b.process(&mut s, &mut out).unwrap();
                    out
                }),
            ),
        }
    }

    /// Contiguous lines take the line form with AVX-512F and are
    /// transposed into columns elsewhere: both paths, in and out of place,
    /// give every line the bits of its own transform.
    #[test]
    fn contiguous_lines_have_their_own_bits_on_either_path() {
        for n in [2, 16, 32, 64, 128] {
            for isa in [
                simd::Isa::Portable,
                ColFft::new(n, true).map_or(simd::Isa::Portable, |c| c.isa()),
            ] {
                let plan = ColFft::with_isa(n, true, isa);
                let count = 11;
                let x: Vec<Complex64> = (0..n * count).map(value).collect();
                let mut line = vec![
                    Complex64::default();
                    Plan1d::Col(Arc::new(ColFft::with_isa(n, true, isa)))
                        .scratch_len()
                ];
                let mut inplace = x.clone();
                contiguous_lines(&plan, None, &mut inplace, 0.5, &mut line);
                let mut out = vec![Complex64::default(); n * count];
                contiguous_lines(&plan, Some(&x), &mut out, 0.5, &mut line);
                for (i, l) in x.chunks_exact(n).enumerate() {
                    let mut want = l.to_vec();
                    plan.line(&mut want, 0.5);
                    assert_eq!(
                        bits(&inplace[i * n..][..n]),
                        bits(&want),
                        "n {n} {isa:?} line {i}"
                    );
                    assert_eq!(
                        bits(&out[i * n..][..n]),
                        bits(&want),
                        "n {n} {isa:?} line {i}"
                    );
                }
            }
        }
    }

    fn bits(v: &[Complex64]) -> Vec<(u64, u64)> {
        v.iter().map(|c| (c.re.to_bits(), c.im.to_bits())).collect()
    }

    #[test]
    fn c2c_has_the_bits_of_line_by_line_transforms() {
        // Lengths along the contiguous axis that rustfft runs through its
        // AVX kernels (64, 128, 256), mixed radices (60) and a prime (97)
        // besides the small ones.
        let cases: [([usize; 3], [usize; 3], usize); 11] = [
            ([3, 4, 128], [0, 1, 2], 1),
            ([2, 3, 256], [0, 1, 2], 1),
            ([64, 2, 3], [1, 2, 0], 1),
            ([3, 60, 97], [0, 1, 2], 1),
            ([8, 6, 10], [0, 1, 2], 1),
            ([5, 6, 130], [0, 1, 2], 1),
            ([5, 70, 9], [0, 1, 2], 2),
            ([12, 7, 130], [2, 0, 1], 1),
            ([9, 66, 4], [1, 2, 0], 2),
            ([3, 4, 5], [2, 1, 0], 1),
            ([16, 16, 16], [1, 0, 2], 3),
        ];
        for (g, order, batch) in cases {
            let layout = Layout::new(g, [1, 1, 1], order).unwrap();
            for norm in [
                Normalization::Full,
                Normalization::Symmetric,
                Normalization::None,
            ] {
                let opts = Options {
                    batch,
                    normalization: norm,
                    ..Options::default()
                };
                let res = local::run(1, |c| {
                    let mut p = Fft3d::c2c(c, &layout, opts)?;
                    let len = layout.local_len(0);
                    let x: Vec<Complex64> = (0..len * batch).map(value).collect();
                    let mut y = vec![Complex64::default(); p.output_len()];
                    let mut z = vec![Complex64::default(); p.input_len()];
                    let mut s = vec![Complex64::default(); p.scratch_len()];
                    p.forward(c, &x, &mut y, &mut s)?;
                    p.backward(c, &y, &mut z, &mut s)?;
                    // Free to overwrite its input: the same bits.
                    let mut w = y.clone();
                    let mut z2 = vec![Complex64::default(); p.input_len()];
                    p.backward_overwriting(c, &mut w, &mut z2, &mut s)?;
                    assert_eq!(bits(&z2), bits(&z), "{g:?} overwriting");
                    Ok::<_, FftError>((x, y, z))
                })
                .unwrap();
                let (x, y, z) = &res[0];
                let n = (g[0] * g[1] * g[2]) as f64;
                let (sf, sb) = match norm {
                    Normalization::None => (1.0, 1.0),
                    Normalization::Full => (1.0, 1.0 / n),
                    Normalization::Symmetric => (1.0 / n.sqrt(), 1.0 / n.sqrt()),
                };
                let len = layout.local_len(0);
                for f in 0..batch {
                    let field = |v: &[Complex64]| -> Vec<Complex64> {
                        let mut out = vec![Complex64::default(); len];
                        for p in points(g) {
                            out[rm(g, p)] = v[f * len + mem(&layout, p)];
                        }
                        out
                    };
                    let want = c2c_reference(g, &field(x), FftDirection::Forward, sf);
                    assert_eq!(
                        bits(&field(y)),
                        bits(&want),
                        "forward {g:?} {order:?} {norm:?} field {f}"
                    );
                    let back = c2c_reference(g, &field(y), FftDirection::Inverse, sb);
                    assert_eq!(
                        bits(&field(z)),
                        bits(&back),
                        "backward {g:?} {order:?} {norm:?} field {f}"
                    );
                }
            }
        }
    }

    #[test]
    fn backward_calls_of_the_wrong_length_are_errors_that_touch_nothing() {
        // (A call of the wrong kind does not compile: `Fft3d<C2c>` and
        // `Fft3d<R2c>` take complex and real values by type.)
        let layout = Layout::new([8, 4, 6], [1, 1, 1], [0, 1, 2]).unwrap();
        local::run(1, |c| {
            let mut cp = Fft3d::c2c(c, &layout, Options::default())?;
            let mut rp = Fft3d::r2c(c, &layout, 2, Options::default())?;
            let mut s = vec![Complex64::default(); cp.scratch_len().max(rp.scratch_len())];
            let spec: Vec<Complex64> = (0..cp.output_len()).map(value).collect();
            let mut w = spec.clone();
            let mut real = vec![0.0; rp.input_len()];
            let mut cplx = vec![Complex64::default(); cp.input_len()];
            let mut rw: Vec<Complex64> = (0..rp.output_len()).map(value).collect();
            let rspec = rw.clone();
            // A short input or output: the buffer is named, nothing written.
            let short = &mut w[1..];
            let r = cp.backward_overwriting(c, short, &mut cplx, &mut s);
            assert!(matches!(
                r,
                Err(FftError::LengthMismatch {
                    what: "backward input",
                    ..
                })
            ));
            let r = rp.backward_overwriting(c, &mut rw, &mut real[1..], &mut s);
            assert!(matches!(
                r,
                Err(FftError::LengthMismatch {
                    what: "backward output",
                    ..
                })
            ));
            assert_eq!(w, spec, "the c2c input was written");
            assert_eq!(rw, rspec, "the r2c input was written");
            assert!(cplx.iter().all(|v| *v == Complex64::default()));
            assert!(real.iter().all(|v| *v == 0.0));
            Ok::<_, FftError>(())
        })
        .unwrap();
    }

    #[test]
    fn r2c_has_the_bits_of_line_by_line_transforms() {
        // Halved lengths realfft takes (10, 130, 70, 66, 11) and powers of
        // two the column transform takes (16, 64, 32, 4, and 128 and 64
        // contiguous, which the line form reads in place), contiguous and
        // strided.
        let cases: [([usize; 3], [usize; 3], usize); 12] = [
            ([5, 3, 128], [0, 1, 2], 2),
            ([3, 7, 64], [0, 1, 2], 2),
            ([8, 6, 10], [0, 1, 2], 2),
            ([5, 6, 130], [0, 1, 2], 0),
            ([6, 70, 9], [0, 1, 2], 1),
            ([12, 7, 130], [2, 0, 1], 0),
            ([9, 66, 4], [1, 2, 0], 1),
            ([7, 5, 11], [2, 1, 0], 2),
            ([8, 6, 16], [0, 1, 2], 2),
            ([6, 64, 5], [0, 1, 2], 1),
            ([32, 7, 9], [2, 0, 1], 0),
            ([3, 5, 4], [1, 2, 0], 2),
        ];
        for (g, order, halved) in cases {
            let layout = Layout::new(g, [1, 1, 1], order).unwrap();
            let batch = 2;
            let opts = Options {
                batch,
                ..Options::default()
            };
            let mut cg = g;
            cg[halved] = g[halved] / 2 + 1;
            let clayout = layout.with_global(cg).unwrap();
            let res = local::run(1, |c| {
                let mut p = Fft3d::r2c(c, &layout, halved, opts)?;
                let x: Vec<f64> = (0..p.input_len()).map(|i| value(i).re).collect();
                let mut y = vec![Complex64::default(); p.output_len()];
                let mut z = vec![0.0; p.input_len()];
                let mut s = vec![Complex64::default(); p.scratch_len()];
                p.forward(c, &x, &mut y, &mut s)?;
                p.backward(c, &y, &mut z, &mut s)?;
                // Free to overwrite its input: the same bits.
                let mut w = y.clone();
                let mut z2 = vec![0.0; p.input_len()];
                p.backward_overwriting(c, &mut w, &mut z2, &mut s)?;
                let zb = |v: &[f64]| v.iter().map(|a| a.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    zb(&z2),
                    zb(&z),
                    "{g:?} {order:?} halved {halved} overwriting"
                );
                // Every case here starts backward with a complex transform
                // in the input's layout, which then runs in the input.
                assert_ne!(bits(&w), bits(&y), "{g:?} {order:?}: the input was kept");
                Ok::<_, FftError>((x, y, z))
            })
            .unwrap();
            let (x, y, z) = &res[0];
            let (a, b) = others(halved);
            let (rlen, clen) = (layout.local_len(0), clayout.local_len(0));
            for f in 0..batch {
                // Forward: real lines along the halved axis, then complex
                // lines along b and a.
                let mut want = vec![Complex64::default(); clen];
                let (r2c, c2r) = real_line_plans(g[halved]);
                for p in points(g).filter(|p| p[halved] == 0) {
                    let line: Vec<f64> = (0..g[halved])
                        .map(|k| {
                            let mut q = p;
                            q[halved] = k;
                            x[f * rlen + mem(&layout, q)]
                        })
                        .collect();
                    for (k, v) in r2c(line).into_iter().enumerate() {
                        let mut q = p;
                        q[halved] = k;
                        want[rm(cg, q)] = v;
                    }
                }
                for axis in [b, a] {
                    each_line(
                        cg,
                        axis,
                        &mut want,
                        line_plan(g[axis], FftDirection::Forward),
                    );
                }
                let got: Vec<Complex64> =
                    points(cg).map(|p| y[f * clen + mem(&clayout, p)]).collect();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "forward {g:?} {order:?} halved {halved}"
                );
                // Backward from the same spectrum, scaled by 1/N.
                let mut spec = got;
                for axis in [a, b] {
                    each_line(
                        cg,
                        axis,
                        &mut spec,
                        line_plan(g[axis], FftDirection::Inverse),
                    );
                }
                let s = 1.0 / (g[0] * g[1] * g[2]) as f64;
                for p in points(cg).filter(|p| p[halved] == 0) {
                    let mut line: Vec<Complex64> = (0..cg[halved])
                        .map(|k| {
                            let mut q = p;
                            q[halved] = k;
                            spec[rm(cg, q)]
                        })
                        .collect();
                    line[0].im = 0.0;
                    if g[halved] % 2 == 0 {
                        line[cg[halved] - 1].im = 0.0;
                    }
                    for (k, v) in c2r(line).into_iter().enumerate() {
                        let mut q = p;
                        q[halved] = k;
                        let got = z[f * rlen + mem(&layout, q)];
                        assert_eq!(
                            got.to_bits(),
                            (v * s).to_bits(),
                            "backward {g:?} {order:?} halved {halved} at {q:?}"
                        );
                    }
                }
            }
        }
    }

    /// `len` values of `v` from `off` on (`off < 8`); the eight other
    /// values of `v`, before and after them, left at a sentinel.
    fn placed<T: Copy>(v: &mut Vec<T>, len: usize, off: usize, sentinel: T) -> &mut [T] {
        *v = vec![sentinel; len + 8];
        &mut v[off..off + len]
    }

    /// The plan aligns its buffers inside the scratch and its tiles to the
    /// caller's rows: the bits must not depend on where the caller's input,
    /// output and scratch start within a cache line, and nothing outside
    /// them may be written.
    #[test]
    fn buffers_at_any_offset_give_the_same_bits() {
        const SENTINEL: f64 = 1.0e300;
        let c_sentinel = Complex64::new(SENTINEL, SENTINEL);
        let intact = |v: &[Complex64], off: usize, len: usize| {
            v[..off]
                .iter()
                .chain(&v[off + len..])
                .all(|c| *c == c_sentinel)
        };
        for (g, order) in [([12, 16, 20], [0, 1, 2]), ([16, 9, 12], [1, 2, 0])] {
            let layout = Layout::new(g, [1, 1, 1], order).unwrap();
            let mut want_c: Option<Vec<(u64, u64)>> = None;
            // The spectrum's bits and the real round trip's.
            type RealBits = (Vec<(u64, u64)>, Vec<u64>);
            let mut want_r: Option<RealBits> = None;
            for (io, so) in (0..4).flat_map(|a| (0..4).map(move |b| (a, b))) {
                let res = local::run(1, |c| {
                    let mut p = Fft3d::c2c(c, &layout, Options::default())?;
                    let (ni, no, ns) = (p.input_len(), p.output_len(), p.scratch_len());
                    let (mut xv, mut yv, mut zv, mut sv) = (vec![], vec![], vec![], vec![]);
                    let x = placed(&mut xv, ni, io, c_sentinel);
                    x.iter_mut().enumerate().for_each(|(i, v)| *v = value(i));
                    let x = &*x;
                    let y = placed(&mut yv, no, io, c_sentinel);
                    let z = placed(&mut zv, ni, io, c_sentinel);
                    let s = placed(&mut sv, ns, so, c_sentinel);
                    p.forward(c, x, y, s)?;
                    p.backward(c, y, z, s)?;
                    let mut out = bits(y);
                    out.extend(bits(z));
                    let ok = intact(&yv, io, no) && intact(&zv, io, ni) && intact(&sv, so, ns);
                    Ok::<_, FftError>((out, ok))
                })
                .unwrap();
                let (got, ok) = &res[0];
                assert!(ok, "{g:?} c2c offsets {io}, {so}: written outside a buffer");
                match &want_c {
                    Some(w) => assert!(w == got, "{g:?} c2c offsets {io}, {so}: other bits"),
                    None => want_c = Some(got.clone()),
                }
                // Real input and output at every offset of a double.
                let ro = 2 * io + so % 2;
                let res = local::run(1, |c| {
                    let mut p = Fft3d::r2c(c, &layout, 1, Options::default())?;
                    let (ni, no, ns) = (p.input_len(), p.output_len(), p.scratch_len());
                    let (mut xv, mut yv, mut zv, mut sv) = (vec![], vec![], vec![], vec![]);
                    let x = placed(&mut xv, ni, ro, SENTINEL);
                    x.iter_mut().enumerate().for_each(|(i, v)| *v = value(i).re);
                    let x = &*x;
                    let y = placed(&mut yv, no, io, c_sentinel);
                    let z = placed(&mut zv, ni, ro, SENTINEL);
                    let s = placed(&mut sv, ns, so, c_sentinel);
                    p.forward(c, x, y, s)?;
                    p.backward(c, y, z, s)?;
                    let zb: Vec<u64> = z.iter().map(|v| v.to_bits()).collect();
                    let yb = bits(y);
                    let ok = intact(&yv, io, no)
                        && intact(&sv, so, ns)
                        && zv[..ro]
                            .iter()
                            .chain(&zv[ro + ni..])
                            .all(|v| *v == SENTINEL);
                    Ok::<_, FftError>(((yb, zb), ok))
                })
                .unwrap();
                let (got, ok) = &res[0];
                assert!(
                    ok,
                    "{g:?} r2c offsets {ro}, {io}, {so}: written outside a buffer"
                );
                match &want_r {
                    Some(w) => assert!(w == got, "{g:?} r2c offsets {ro}, {io}, {so}: other bits"),
                    None => want_r = Some(got.clone()),
                }
            }
        }
    }

    #[test]
    fn strided_blocks_cover_every_line_once() {
        // A counting "transform" through the block machinery: each value
        // must be visited exactly once, whatever the block size.
        for (shape, order, axis) in [
            ([5, 70, 9], [0, 1, 2], 1),
            ([9, 3, 130], [1, 0, 2], 0),
            ([4, 6, 200], [0, 1, 2], 0),
        ] {
            let layout = Layout::new(shape, [1, 1, 1], order).unwrap();
            let g = Geom::of(&layout, 0, axis);
            for block in [1, 3, 64, 1000] {
                let mut seen = vec![0u32; g.len()];
                for_blocks(&g, block, |i, t0, bl| {
                    assert!(bl >= 1 && bl <= block);
                    for t in 0..bl {
                        for k in 0..g.shape[axis] {
                            seen[line_at(&g, i, t0 + t) + k * g.strides[axis]] += 1;
                        }
                    }
                    Ok(())
                })
                .unwrap();
                assert!(
                    seen.iter().all(|&c| c == 1),
                    "{shape:?} {order:?} axis {axis} block {block}"
                );
            }
        }
    }
}
