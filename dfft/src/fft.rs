//! Distributed 3D FFT plans: a fixed sequence of 1D transforms along whole
//! axes, with reshapes in between.

use crate::layout::{others, Layout};
use crate::reshape::{Protocol, Reshape};
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

/// Forward and inverse complex plans of one length.
pub(crate) type C2cPair = (usize, Arc<dyn Fft<f64>>, Arc<dyn Fft<f64>>);
/// Forward and inverse real plans of the halved axis.
type R2cPair = (Arc<dyn RealToComplex<f64>>, Arc<dyn ComplexToReal<f64>>);

struct Plans {
    c2c: Vec<C2cPair>,
    r2c: Option<R2cPair>,
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plans")
            .field("lengths", &self.c2c.iter().map(|p| p.0).collect::<Vec<_>>())
            .finish()
    }
}

impl Plans {
    fn c2c(&self, n: usize, dir: FftDirection) -> &Arc<dyn Fft<f64>> {
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
#[derive(Debug)]
pub struct Fft3d {
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
}

fn as_real(c: &mut [Complex64]) -> &mut [f64] {
    // SAFETY: Complex<f64> is repr(C) with two f64 fields and no padding.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<f64>(), c.len() * 2) }
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

impl Fft3d {
    /// Plans the transform of data in `input` (collective).
    pub fn new(
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
        let batch = options.batch;
        let proto = options.protocol;
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
                        if options.output == Output::Input
                            && axes[i..].iter().all(|&a| end.is_whole(a))
                        {
                            end
                        } else {
                            layout_for(gl, p, axis, next)?
                        }
                    }
                    Selection::Pencils => layout_for(gl, p, axis, None)?,
                };
                if real_stage {
                    steps.push(Step::ReshapeReal {
                        fwd: Reshape::new(comm, &cur, &to, batch, proto)?,
                        bwd: Reshape::new(comm, &to, &cur, batch, proto)?,
                    });
                } else {
                    steps.push(Step::Reshape {
                        fwd: Reshape::new(comm, &cur, &to, batch, proto)?,
                        bwd: Reshape::new(comm, &to, &cur, batch, proto)?,
                    });
                }
                cur = to;
            }
            if real_stage {
                let complex = cur.with_global(cglobal)?;
                steps.push(Step::Rfft {
                    axis,
                    real: cur.clone(),
                    complex: complex.clone(),
                });
                cur = complex;
                real_stage = false;
            } else {
                steps.push(Step::Fft {
                    axis,
                    layout: cur.clone(),
                });
            }
        }
        let target = input.with_global(cglobal)?;
        if options.output == Output::Input && cur != target {
            steps.push(Step::Reshape {
                fwd: Reshape::new(comm, &cur, &target, batch, proto)?,
                bwd: Reshape::new(comm, &target, &cur, batch, proto)?,
            });
            cur = target;
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
                        let f = planner.plan_fft_forward(n);
                        let b = planner.plan_fft_inverse(n);
                        line_scratch = line_scratch
                            .max(f.get_inplace_scratch_len())
                            .max(b.get_inplace_scratch_len());
                        c2c.push((n, f, b));
                    }
                    max_line = max_line.max(n);
                }
                Step::Rfft { axis, real, .. } => {
                    let n = real.global()[*axis];
                    let mut rp = RealFftPlanner::<f64>::new();
                    let f = rp.plan_fft_forward(n);
                    let b = rp.plan_fft_inverse(n);
                    line_scratch = line_scratch
                        .max(f.get_scratch_len())
                        .max(b.get_scratch_len());
                    max_line = max_line.max(n);
                    r2c = Some((f, b));
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
            .max(cur.local_len(rank) * batch);
        Ok(Fft3d {
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
        })
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

    /// Complex elements of the scratch buffer both directions need.
    pub fn scratch_len(&self) -> usize {
        2 * self.work_len + self.line_scratch + 2 * self.max_line + 2
    }

    fn global_len(&self) -> usize {
        self.input.global_len()
    }

    fn check(&self, what: &'static str, expected: usize, got: usize) -> Result<(), FftError> {
        if expected != got {
            return Err(FftError::Buffer {
                what,
                expected,
                got,
            });
        }
        Ok(())
    }

    /// Forward complex-to-complex transform.
    pub fn forward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        if self.kind != Kind::C2C {
            return Err(FftError::Invalid(
                "this plan is real-to-complex: use forward_r2c".into(),
            ));
        }
        self.check("forward input", self.input_len(), input.len())?;
        self.run_forward(comm, Source::Complex(input), output, scratch)
    }

    /// Forward real-to-complex transform.
    pub fn forward_r2c(
        &mut self,
        comm: &dyn Communicator,
        input: &[f64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        if !matches!(self.kind, Kind::R2C { .. }) {
            return Err(FftError::Invalid(
                "this plan is complex-to-complex: use forward".into(),
            ));
        }
        self.check("forward input", self.input_len(), input.len())?;
        self.run_forward(comm, Source::Real(input), output, scratch)
    }

    /// Backward complex-to-complex transform.
    pub fn backward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        if self.kind != Kind::C2C {
            return Err(FftError::Invalid(
                "this plan is real-to-complex: use backward_c2r".into(),
            ));
        }
        self.check("backward output", self.input_len(), output.len())?;
        let out = self.run_backward(comm, input, scratch)?;
        let n = output.len();
        output.copy_from_slice(&scratch[out..out + n]);
        Ok(())
    }

    /// Backward complex-to-real transform. The imaginary parts of the
    /// entries whose real transform must be real (zero and Nyquist
    /// frequencies of the halved axis) are ignored.
    pub fn backward_c2r(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        output: &mut [f64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        if !matches!(self.kind, Kind::R2C { .. }) {
            return Err(FftError::Invalid(
                "this plan is complex-to-complex: use backward".into(),
            ));
        }
        self.check("backward output", self.input_len(), output.len())?;
        let out = self.run_backward(comm, input, scratch)?;
        let n = output.len();
        let w = self.work_len;
        let (a, b) = scratch.split_at_mut(w);
        let region = if out == 0 { a } else { &mut b[..w] };
        output.copy_from_slice(&as_real(region)[..n]);
        Ok(())
    }

    fn run_forward(
        &mut self,
        comm: &dyn Communicator,
        src: Source<'_>,
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        self.check("forward output", self.output_len(), output.len())?;
        self.check("scratch", self.scratch_len(), scratch.len())?;
        let w = self.work_len;
        let (bufs, line) = scratch.split_at_mut(2 * w);
        let (a, b) = bufs.split_at_mut(w);
        let mut work = [a, b];
        match src {
            Source::Complex(x) => work[0][..x.len()].copy_from_slice(x),
            Source::Real(x) => as_real(work[0])[..x.len()].copy_from_slice(x),
        }
        let cur = self.run_steps(comm, true, &mut work, line)?;
        let n = output.len();
        output.copy_from_slice(&work[cur][..n]);
        let s = match self.options.normalization {
            Normalization::Symmetric => 1.0 / (self.global_len() as f64).sqrt(),
            _ => 1.0,
        };
        if s != 1.0 {
            output.iter_mut().for_each(|v| *v *= s);
        }
        Ok(())
    }

    /// Runs the steps backward; returns the offset in `scratch` of the
    /// result (0 or work_len).
    fn run_backward(
        &mut self,
        comm: &dyn Communicator,
        input: &[Complex64],
        scratch: &mut [Complex64],
    ) -> Result<usize, FftError> {
        self.check("backward input", self.output_len(), input.len())?;
        self.check("scratch", self.scratch_len(), scratch.len())?;
        let w = self.work_len;
        let (bufs, line) = scratch.split_at_mut(2 * w);
        let (a, b) = bufs.split_at_mut(w);
        let mut work = [a, b];
        work[0][..input.len()].copy_from_slice(input);
        let cur = self.run_steps(comm, false, &mut work, line)?;
        let s = match self.options.normalization {
            Normalization::None => 1.0,
            Normalization::Full => 1.0 / self.global_len() as f64,
            Normalization::Symmetric => 1.0 / (self.global_len() as f64).sqrt(),
        };
        if s != 1.0 {
            let n = self.input_len();
            match self.kind {
                Kind::C2C => work[cur][..n].iter_mut().for_each(|v| *v *= s),
                Kind::R2C { .. } => as_real(work[cur])[..n].iter_mut().for_each(|v| *v *= s),
            }
        }
        Ok(cur * w)
    }

    /// Runs the steps in order (`forward`) or in reverse with the inverse of
    /// each, starting from `work[0]`; returns the index of the work buffer
    /// that holds the result.
    fn run_steps(
        &mut self,
        comm: &dyn Communicator,
        forward: bool,
        work: &mut [&mut [Complex64]; 2],
        line: &mut [Complex64],
    ) -> Result<usize, FftError> {
        let batch = self.options.batch;
        let rank = self.rank;
        let dir = if forward {
            FftDirection::Forward
        } else {
            FftDirection::Inverse
        };
        let mut cur = 0;
        let count = self.steps.len();
        for i in 0..count {
            let step = &mut self.steps[if forward { i } else { count - 1 - i }];
            let [x, y] = &mut *work;
            let (from, to) = if cur == 0 {
                (&mut **x, &mut **y)
            } else {
                (&mut **y, &mut **x)
            };
            match step {
                Step::Reshape { fwd, bwd } => {
                    let r = if forward { fwd } else { bwd };
                    let (n_in, n_out) = (r.input_len(), r.output_len());
                    r.execute(comm, &from[..n_in], &mut to[..n_out])?;
                    cur = 1 - cur;
                }
                Step::ReshapeReal { fwd, bwd } => {
                    let r = if forward { fwd } else { bwd };
                    let (n_in, n_out) = (r.input_len(), r.output_len());
                    r.execute(comm, &as_real(from)[..n_in], &mut as_real(to)[..n_out])?;
                    cur = 1 - cur;
                }
                Step::Fft { axis, layout } => {
                    let plan = self.plans.c2c(layout.global()[*axis], dir).clone();
                    let n = layout.local_len(rank) * batch;
                    fft_lines(&*plan, layout, rank, *axis, batch, &mut from[..n], line);
                }
                Step::Rfft {
                    axis,
                    real,
                    complex,
                } => {
                    let (f, b) = self.plans.r2c.as_ref().expect("planned");
                    let lines = RealLines {
                        real,
                        complex,
                        rank,
                        axis: *axis,
                        batch,
                    };
                    if forward {
                        lines.forward(&**f, as_real(from), to, line)?;
                    } else {
                        lines.backward(&**b, from, as_real(to), line)?;
                    }
                    cur = 1 - cur;
                }
            }
        }
        Ok(cur)
    }
}

enum Source<'a> {
    Complex(&'a [Complex64]),
    Real(&'a [f64]),
}

/// Visits the start offset of every line along `axis` of one field.
fn for_lines(layout: &Layout, rank: usize, axis: usize, mut f: impl FnMut(usize)) {
    let s = layout.local_shape(rank);
    let st = layout.strides(rank);
    let (a, b) = others(axis);
    for i in 0..s[a] {
        for j in 0..s[b] {
            f(i * st[a] + j * st[b]);
        }
    }
}

/// Applies `plan` to every line along `axis` of `batch` fields (for the
/// derivative plans).
pub(crate) fn fft_lines_pub(
    plan: &dyn Fft<f64>,
    layout: &Layout,
    rank: usize,
    axis: usize,
    batch: usize,
    data: &mut [Complex64],
    scratch: &mut [Complex64],
) {
    fft_lines(plan, layout, rank, axis, batch, data, scratch)
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

/// Applies `plan` to every line along `axis` (whole in `layout`).
fn fft_lines(
    plan: &dyn Fft<f64>,
    layout: &Layout,
    rank: usize,
    axis: usize,
    batch: usize,
    data: &mut [Complex64],
    scratch: &mut [Complex64],
) {
    let n = layout.global()[axis];
    let stride = layout.strides(rank)[axis];
    let len = layout.local_len(rank);
    let (fft_scratch, line) = scratch.split_at_mut(scratch.len() - n.max(1));
    let fft_scratch = &mut fft_scratch[..plan.get_inplace_scratch_len()];
    for f in 0..batch {
        let field = &mut data[f * len..(f + 1) * len];
        if stride == 1 {
            // Lines are contiguous and back to back.
            if len > 0 {
                plan.process_with_scratch(field, fft_scratch);
            }
            continue;
        }
        for_lines(layout, rank, axis, |o| {
            for (k, v) in line.iter_mut().enumerate().take(n) {
                *v = field[o + k * stride];
            }
            plan.process_with_scratch(&mut line[..n], fft_scratch);
            for k in 0..n {
                field[o + k * stride] = line[k];
            }
        });
    }
}

/// The lines along the halved axis of a real-to-complex step: the same
/// line in the real and in the complex layout.
struct RealLines<'a> {
    real: &'a Layout,
    complex: &'a Layout,
    rank: usize,
    axis: usize,
    batch: usize,
}

impl RealLines<'_> {
    /// Calls `f(real_offset, real_stride, complex_offset, complex_stride)`
    /// for every line of every field.
    fn each(
        &self,
        mut f: impl FnMut(usize, usize, usize, usize) -> Result<(), FftError>,
    ) -> Result<(), FftError> {
        let (rs, cs) = (
            self.real.strides(self.rank),
            self.complex.strides(self.rank),
        );
        let (rlen, clen) = (
            self.real.local_len(self.rank),
            self.complex.local_len(self.rank),
        );
        let s = self.real.local_shape(self.rank);
        let (a, b) = others(self.axis);
        for fld in 0..self.batch {
            for i in 0..s[a] {
                for j in 0..s[b] {
                    let ro = fld * rlen + i * rs[a] + j * rs[b];
                    let co = fld * clen + i * cs[a] + j * cs[b];
                    f(ro, rs[self.axis], co, cs[self.axis])?;
                }
            }
        }
        Ok(())
    }

    /// Splits the line scratch into the plan's scratch, a complex line and
    /// a real line.
    fn split<'s>(
        &self,
        need: usize,
        scratch: &'s mut [Complex64],
    ) -> (&'s mut [Complex64], &'s mut [Complex64], &'s mut [f64]) {
        let n = self.real.global()[self.axis];
        let m = self.complex.global()[self.axis];
        let (sh, rest) = scratch.split_at_mut(need);
        let (cline, rest) = rest.split_at_mut(m);
        (sh, cline, &mut as_real(rest)[..n])
    }

    /// Real-to-complex transform of every line of `input` into `output`.
    fn forward(
        &self,
        plan: &dyn RealToComplex<f64>,
        input: &mut [f64],
        output: &mut [Complex64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let (sh, cline, rline) = self.split(plan.get_scratch_len(), scratch);
        self.each(|ro, rst, co, cst| {
            for (k, v) in rline.iter_mut().enumerate() {
                *v = input[ro + k * rst];
            }
            plan.process_with_scratch(rline, cline, sh)
                .map_err(|e| FftError::Invalid(e.to_string()))?;
            for (k, v) in cline.iter().enumerate() {
                output[co + k * cst] = *v;
            }
            Ok(())
        })
    }

    /// Complex-to-real transform of every line of `input` into `output`; the
    /// imaginary parts that must vanish (zero and Nyquist frequencies) are
    /// ignored.
    fn backward(
        &self,
        plan: &dyn ComplexToReal<f64>,
        input: &mut [Complex64],
        output: &mut [f64],
        scratch: &mut [Complex64],
    ) -> Result<(), FftError> {
        let n = self.real.global()[self.axis];
        let (sh, cline, rline) = self.split(plan.get_scratch_len(), scratch);
        self.each(|ro, rst, co, cst| {
            for (k, v) in cline.iter_mut().enumerate() {
                *v = input[co + k * cst];
            }
            let m = cline.len();
            cline[0].im = 0.0;
            if n % 2 == 0 {
                cline[m - 1].im = 0.0;
            }
            plan.process_with_scratch(cline, rline, sh)
                .map_err(|e| FftError::Invalid(e.to_string()))?;
            for (k, v) in rline.iter().enumerate() {
                output[ro + k * rst] = *v;
            }
            Ok(())
        })
    }
}
