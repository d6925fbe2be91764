//! The stepper: per-degree operators, factor cache, history, and the stage machine.

use std::fmt;
use std::num::NonZeroUsize;

use num_complex::Complex64;
use rayon::prelude::*;

use crate::kernels::matvec_columns;
use crate::scheme::{SchemeRef, StepWeights};
mod checkpoint;

pub use checkpoint::StepperMeta;

use crate::{
    DirkTableau, FaerLu, ImexError, LuBackend, LuFactors, Matrix, ModeBlock, ModeLayout, Scheme,
    SchemeKind,
};

/// One row of `M_l` replaced by a boundary condition: row `row` of the implicit matrix (and of
/// the assembly matrix) becomes `coeffs`, and the matching right-hand-side entry of every
/// column becomes the boundary value set with [`Stepper::set_boundary_value`] (zero by default).
#[derive(Clone, Debug, PartialEq)]
pub struct BoundaryRow {
    /// The replaced row, `0 <= row < nr`.
    pub row: usize,
    /// The `nr` coefficients of the condition.
    pub coeffs: Vec<f64>,
}

/// The dense operators of one spherical harmonic degree `l`: the problem is
/// `A_l du/dt = L_l u + N(u, t)` for every order `m` of that degree.
#[derive(Clone, Debug, PartialEq)]
pub struct DegreeOperator {
    /// The degree.
    pub l: usize,
    /// `A_l`, `nr x nr` (the identity for a collocation method in physical space; the
    /// Chebyshev evaluation matrix for a method in coefficient space).
    pub mass: Matrix,
    /// `L_l`, `nr x nr`, the implicitly treated linear operator.
    pub linear: Matrix,
    /// Rows replaced by boundary conditions.
    pub boundary_rows: Vec<BoundaryRow>,
}

impl DegreeOperator {
    /// Operators without boundary rows.
    pub fn new(l: usize, mass: Matrix, linear: Matrix) -> Self {
        Self {
            l,
            mass,
            linear,
            boundary_rows: Vec::new(),
        }
    }

    /// Adds a boundary row (validated by [`Stepper::new`]).
    pub fn with_boundary_row(mut self, row: usize, coeffs: Vec<f64>) -> Self {
        self.boundary_rows.push(BoundaryRow { row, coeffs });
        self
    }
}

/// How the implicit systems are solved once factored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SolveMode {
    /// The crate's column-wise forward/back substitution ([`LuFactors::solve_columns`]):
    /// every column's bits are independent of the batch, so results do not depend on which
    /// other modes a rank holds. The default.
    #[default]
    ColumnWise,
    /// The backend's own multi-right-hand-side solve (faer's blocked triangular solve or
    /// LAPACK's `dgetrs`). An explicit opt-out of the distribution invariance: a column's bits
    /// may depend on how many columns are solved with it.
    Native,
}

/// How the degrees of one stepper are spread over threads: on the calling
/// thread, or on a thread pool the stepper owns (unlike `chebyshev` and
/// `sht`, whose `Parallelism` runs on rayon's current pool, which the caller
/// owns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DegreeThreads {
    /// One thread.
    #[default]
    Sequential,
    /// A rayon pool of this many threads, built and owned by the stepper, one
    /// degree per task. Results are bit-identical to
    /// [`DegreeThreads::Sequential`]: degrees are independent.
    OwnPool(NonZeroUsize),
}

/// Options of a [`Stepper`].
#[derive(Clone, Debug, PartialEq)]
pub struct StepperOptions {
    /// How systems are solved.
    pub solve: SolveMode,
    /// Threads over degrees.
    pub threads: DegreeThreads,
    /// The time of the initial state.
    pub start_time: f64,
}

impl Default for StepperOptions {
    fn default() -> Self {
        Self {
            solve: SolveMode::ColumnWise,
            threads: DegreeThreads::Sequential,
            start_time: 0.0,
        }
    }
}

/// What [`Stepper::advance`] needs next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepProgress {
    /// Evaluate the explicit terms of the state now held in the state block, at this time,
    /// and call [`Stepper::advance`] again.
    NeedExplicit {
        /// The stage time `t^n + c_i dt`.
        time: f64,
    },
    /// The step is complete: the state block holds `u^{n+1}`.
    Done {
        /// The new time `t^{n+1}`.
        time: f64,
    },
}

#[derive(Clone, Copy, Debug)]
enum Plan {
    Multistep(StepWeights),
    Dirk { startup: bool },
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    dt: f64,
    t0: f64,
    plan: Plan,
    stage: usize,
}

struct DegreeWork<S> {
    l: usize,
    nr: usize,
    ncols: usize,
    mass: Vec<f64>,
    /// `A_l` is exactly the identity: `A u` is a copy.
    mass_identity: bool,
    linear: Vec<f64>,
    bc_rows: Vec<usize>,
    bc_coeffs: Vec<Vec<f64>>,
    /// Boundary values, `bc_values[col * nbc + b]`.
    bc_values: Vec<f64>,
    factors: Option<(f64, LuFactors)>,
    assembly: Option<LuFactors>,
    factorizations: usize,
    assembly_factorizations: usize,
    hist_au: Vec<Vec<f64>>,
    hist_n: Vec<Vec<f64>>,
    hist_lu: Vec<Vec<f64>>,
    /// Per held order: the history of this mode is awaited by an import
    /// ([`Stepper::import_meta`] sets them, [`Stepper::import_mode`] clears them).
    missing: Vec<bool>,
    au0: Vec<f64>,
    stage_n: Vec<Vec<f64>>,
    stage_lu: Vec<Vec<f64>>,
    rhs: Vec<f64>,
    scratch: Vec<f64>,
    native: Option<S>,
}

impl<S> fmt::Debug for DegreeWork<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DegreeWork")
            .field("l", &self.l)
            .field("nr", &self.nr)
            .field("ncols", &self.ncols)
            .field("factorizations", &self.factorizations)
            .finish_non_exhaustive()
    }
}

/// `dst += c * src`.
fn axpy(dst: &mut [f64], c: f64, src: &[f64]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d += c * s;
    }
}

/// `dst = base + dt * dst`.
fn finish_rhs(dst: &mut [f64], base: &[f64], dt: f64) {
    for (d, &b) in dst.iter_mut().zip(base) {
        *d = b + dt * *d;
    }
}

fn resize(v: &mut Vec<f64>, len: usize) {
    if v.len() != len {
        v.clear();
        v.resize(len, 0.0);
    }
}

/// Pushes a new newest entry into a history ring of `depth` entries and returns it.
fn push_front(ring: &mut Vec<Vec<f64>>, depth: usize, len: usize) -> &mut Vec<f64> {
    if ring.len() < depth {
        ring.insert(0, vec![0.0; len]);
    } else {
        ring.rotate_right(1);
    }
    &mut ring[0]
}

impl<S: Send + fmt::Debug> DegreeWork<S> {
    fn size(&self) -> usize {
        self.nr * self.ncols
    }

    /// `out = A_l u` for all columns.
    fn apply_mass(
        mass: &[f64],
        identity: bool,
        nr: usize,
        ncols: usize,
        u: &[f64],
        out: &mut [f64],
    ) {
        if identity {
            out.copy_from_slice(u);
        } else {
            matvec_columns(mass, nr, u, out, ncols);
        }
    }

    fn with_boundary_rows(&self, mut m: Matrix) -> Matrix {
        for (&row, coeffs) in self.bc_rows.iter().zip(&self.bc_coeffs) {
            for (j, &c) in coeffs.iter().enumerate() {
                m[(row, j)] = c;
            }
        }
        m
    }

    fn ensure_factors<B: LuBackend<Scratch = S>>(
        &mut self,
        backend: &B,
        coefficient: f64,
    ) -> Result<(), ImexError> {
        if let Some((c, _)) = &self.factors {
            if c.to_bits() == coefficient.to_bits() {
                return Ok(());
            }
        }
        self.factors = None;
        let n = self.nr;
        let data: Vec<f64> = self
            .mass
            .iter()
            .zip(&self.linear)
            .map(|(&a, &l)| a - coefficient * l)
            .collect();
        let m = self.with_boundary_rows(Matrix::from_col_major(n, n, data)?);
        let f = backend.factor(m).map_err(|e| match e {
            ImexError::Singular { pivot } => ImexError::SingularOperator {
                l: self.l,
                coefficient,
                pivot,
            },
            other => other,
        })?;
        self.factorizations += 1;
        self.factors = Some((coefficient, f));
        Ok(())
    }

    fn ensure_assembly<B: LuBackend<Scratch = S>>(&mut self, backend: &B) -> Result<(), ImexError> {
        if self.assembly.is_some() {
            return Ok(());
        }
        let n = self.nr;
        let m = self.with_boundary_rows(Matrix::from_col_major(n, n, self.mass.clone())?);
        let f = backend.factor(m).map_err(|e| match e {
            ImexError::Singular { pivot } => ImexError::SingularOperator {
                l: self.l,
                coefficient: 0.0,
                pivot,
            },
            other => other,
        })?;
        self.assembly_factorizations += 1;
        self.assembly = Some(f);
        Ok(())
    }

    /// Sets the boundary rows of `rhs`, solves in place with the implicit (or assembly)
    /// factors and copies the solution into `u`.
    fn solve_into<B: LuBackend<Scratch = S>>(
        &mut self,
        backend: &B,
        mode: SolveMode,
        assembly: bool,
        u: &mut [f64],
    ) -> Result<(), ImexError> {
        let nbc = self.bc_rows.len();
        for c in 0..self.ncols {
            for (b, &row) in self.bc_rows.iter().enumerate() {
                self.rhs[c * self.nr + row] = self.bc_values[c * nbc + b];
            }
        }
        let f = if assembly {
            self.assembly.as_ref()
        } else {
            self.factors.as_ref().map(|(_, f)| f)
        }
        .ok_or(ImexError::NoStepInProgress)?;
        match mode {
            SolveMode::ColumnWise => {
                f.solve_columns(&mut self.rhs, self.ncols, &mut self.scratch)?
            }
            SolveMode::Native => {
                let (nr, ncols) = (self.nr, self.ncols);
                let s = self
                    .native
                    .get_or_insert_with(|| backend.native_scratch(nr, ncols));
                backend.solve_native(f, &mut self.rhs, ncols, s)?;
            }
        }
        u.copy_from_slice(&self.rhs);
        Ok(())
    }

    /// Records `A u^n`, `N^n` (and `L u^n`) as the newest multistep history entry.
    fn push_history(&mut self, depth: usize, need_lu: bool, u: &[f64], n: &[f64]) {
        let (nr, ncols, size) = (self.nr, self.ncols, self.size());
        let au = push_front(&mut self.hist_au, depth, size);
        Self::apply_mass(&self.mass, self.mass_identity, nr, ncols, u, au);
        push_front(&mut self.hist_n, depth, size).copy_from_slice(n);
        if need_lu {
            let lu = push_front(&mut self.hist_lu, depth, size);
            matvec_columns(&self.linear, nr, u, lu, ncols);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn multistep_step<B: LuBackend<Scratch = S>>(
        &mut self,
        backend: &B,
        mode: SolveMode,
        w: &StepWeights,
        dt: f64,
        depth: usize,
        need_lu: bool,
        u: &mut [f64],
        n: &[f64],
    ) -> Result<(), ImexError> {
        if !self.stage_n.is_empty() || !self.stage_lu.is_empty() {
            // The DIRK start-up is over: release its stage storage.
            self.stage_n = Vec::new();
            self.stage_lu = Vec::new();
            self.au0 = Vec::new();
        }
        self.push_history(depth, need_lu, u, n);
        let size = self.size();
        resize(&mut self.rhs, size);
        self.rhs.fill(0.0);
        for j in 0..w.k {
            if w.b_exp[j] != 0.0 {
                axpy(&mut self.rhs, w.b_exp[j], &self.hist_n[j]);
            }
        }
        for j in 1..=w.k {
            if w.b_imp[j] != 0.0 {
                axpy(&mut self.rhs, w.b_imp[j], &self.hist_lu[j - 1]);
            }
        }
        for r in self.rhs.iter_mut() {
            *r *= dt;
        }
        for j in 0..w.k {
            if w.a[j] != 0.0 {
                axpy(&mut self.rhs, w.a[j], &self.hist_au[j]);
            }
        }
        self.solve_into(backend, mode, false, u)
    }

    /// Receives stage `i` (its value in `u`, its explicit terms in `n` when they are read),
    /// then computes stage `i + 1` into `u`, or `u^{n+1}` when `i` is the last stage.
    #[allow(clippy::too_many_arguments)]
    fn dirk_stage<B: LuBackend<Scratch = S>>(
        &mut self,
        backend: &B,
        mode: SolveMode,
        tab: &DirkTableau,
        dt: f64,
        i: usize,
        u: &mut [f64],
        n: Option<&[f64]>,
        record: Option<(usize, bool)>,
    ) -> Result<(), ImexError> {
        let (nr, ncols, size, s) = (self.nr, self.ncols, self.size(), tab.stages());
        if i == 0 {
            if self.stage_n.len() != s {
                self.stage_n = vec![Vec::new(); s];
                self.stage_lu = vec![Vec::new(); s];
            }
            resize(&mut self.au0, size);
            Self::apply_mass(&self.mass, self.mass_identity, nr, ncols, u, &mut self.au0);
            if let (Some((depth, need_lu)), Some(n)) = (record, n) {
                self.push_history(depth, need_lu, u, n);
            }
        }
        if let Some(n) = n {
            if tab.needs_explicit(i) {
                resize(&mut self.stage_n[i], size);
                self.stage_n[i].copy_from_slice(n);
            }
        }
        if tab.needs_implicit(i) {
            resize(&mut self.stage_lu[i], size);
            matvec_columns(&self.linear, nr, u, &mut self.stage_lu[i], ncols);
        }
        resize(&mut self.rhs, size);
        self.rhs.fill(0.0);
        let next = i + 1;
        let last = next == s;
        for j in 0..=i.min(s - 1) {
            let (ce, ci) = if last {
                (tab.b_exp()[j], tab.b_imp()[j])
            } else {
                (tab.a_exp(next, j), tab.a_imp(next, j))
            };
            if ce != 0.0 {
                axpy(&mut self.rhs, ce, &self.stage_n[j]);
            }
            if ci != 0.0 {
                axpy(&mut self.rhs, ci, &self.stage_lu[j]);
            }
        }
        finish_rhs(&mut self.rhs, &self.au0, dt);
        self.solve_into(backend, mode, last, u)
    }
}

/// Runs `f` on every degree with its state block and explicit block, on the pool if any.
fn for_each_degree<S, F>(
    pool: Option<&rayon::ThreadPool>,
    degrees: &mut [DegreeWork<S>],
    layout: &ModeLayout,
    state: Option<&mut [f64]>,
    explicit: Option<&[f64]>,
    f: F,
) -> Result<(), ImexError>
where
    S: Send + fmt::Debug,
    F: Fn(&mut DegreeWork<S>, &mut [f64], Option<&[f64]>) -> Result<(), ImexError> + Sync,
{
    let mut rest_u: &mut [f64] = state.unwrap_or(&mut []);
    let has_u = !rest_u.is_empty();
    let mut rest_n: &[f64] = explicit.unwrap_or(&[]);
    let has_n = !rest_n.is_empty();
    let mut split = move |i: usize| {
        let len = if has_u || has_n {
            layout.block_range(i).len()
        } else {
            0
        };
        let (u, tail) = std::mem::take(&mut rest_u).split_at_mut(if has_u { len } else { 0 });
        rest_u = tail;
        let n = if has_n {
            let (n, tail) = rest_n.split_at(len);
            rest_n = tail;
            Some(n)
        } else {
            None
        };
        (u, n)
    };
    match pool {
        None => {
            for (i, d) in degrees.iter_mut().enumerate() {
                let (u, n) = split(i);
                f(d, u, n)?;
            }
            Ok(())
        }
        Some(pool) => {
            let mut work: Vec<_> = degrees
                .iter_mut()
                .enumerate()
                .map(|(i, d)| {
                    let (u, n) = split(i);
                    (d, u, n)
                })
                .collect();
            pool.install(|| {
                work.par_iter_mut()
                    .map(|(d, u, n)| f(d, u, *n))
                    .collect::<Result<Vec<()>, ImexError>>()
            })?;
            Ok(())
        }
    }
}

/// Advances `A_l du/dt = L_l u + N(u, t)` for every held mode (l, m), one implicit solve per
/// degree per stage with cached LU factors.
///
/// The stepper owns, per degree: the operators, the LU factors of `M_l = A_l - dt b0 L_l`
/// (with boundary rows) for the current `dt b0` and a count of factorisations; the multistep
/// history (`A u`, `N` and, for CNAB2, `L u` of past steps) or the DIRK stage terms; and the
/// work buffers, so stepping allocates nothing once the history is full.
///
/// Drive it with [`Stepper::step`] and a closure for the explicit terms, or, when the explicit
/// terms of several fields are computed together, with [`Stepper::begin_step`] and
/// [`Stepper::advance`].
///
/// For checkpoint/restart, [`Stepper::export_meta`] and [`Stepper::export_mode`] give
/// everything besides the operators and the boundary values that determines the future steps,
/// and [`Stepper::import_meta`] and [`Stepper::import_mode`] put it into a fresh stepper, which
/// then continues bit-identically (see [`StepperMeta`]).
pub struct Stepper<B: LuBackend = FaerLu> {
    scheme: Scheme,
    startup: Option<DirkTableau>,
    backend: B,
    layout: ModeLayout,
    options: StepperOptions,
    pool: Option<rayon::ThreadPool>,
    degrees: Vec<DegreeWork<B::Scratch>>,
    time: f64,
    steps: u64,
    dt_hist: [f64; 2],
    filled: usize,
    pending: Option<Pending>,
    /// Held modes whose history an import still awaits (see `DegreeWork::missing`).
    missing_modes: usize,
    explicit_buf: Option<ModeBlock>,
}

impl<B: LuBackend> fmt::Debug for Stepper<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stepper")
            .field("scheme", &self.scheme.name())
            .field("backend", &self.backend)
            .field("layout", &self.layout)
            .field("options", &self.options)
            .field("time", &self.time)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl Stepper<FaerLu> {
    /// A stepper with the faer backend and default options.
    pub fn new(
        scheme: Scheme,
        layout: ModeLayout,
        operators: Vec<DegreeOperator>,
    ) -> Result<Self, ImexError> {
        Self::with_backend(scheme, layout, operators, FaerLu, StepperOptions::default())
    }
}

impl<B: LuBackend> Stepper<B> {
    /// A stepper for the modes of `layout`, with one operator per held degree (in any order).
    ///
    /// Validates everything up front: every held degree has exactly one operator and no
    /// operator is for a degree the layout does not hold; `A_l` and `L_l` are `nr x nr` and
    /// finite; boundary rows are in range, distinct, `nr` long and finite; the start time is
    /// finite. Factorisations happen at the first step.
    pub fn with_backend(
        scheme: Scheme,
        layout: ModeLayout,
        operators: Vec<DegreeOperator>,
        backend: B,
        options: StepperOptions,
    ) -> Result<Self, ImexError> {
        if !options.start_time.is_finite() {
            return Err(ImexError::InvalidTime {
                got: options.start_time,
            });
        }
        let nr = layout.nr();
        let held = || {
            layout
                .degrees()
                .map(|(l, _)| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut slots: Vec<Option<DegreeOperator>> = vec![None; layout.num_degrees()];
        for op in operators {
            let Some(i) = layout.index_of(op.l) else {
                return Err(ImexError::UnexpectedOperator {
                    l: op.l,
                    held: held(),
                });
            };
            if slots[i].is_some() {
                return Err(ImexError::DuplicateDegree {
                    l: op.l,
                    what: "operators",
                });
            }
            validate_operator(&op, nr)?;
            slots[i] = Some(op);
        }
        let mut degrees = Vec::with_capacity(slots.len());
        for (i, slot) in slots.into_iter().enumerate() {
            let (l, _) = layout.degree(i).unwrap_or((0, &[]));
            let op = slot.ok_or(ImexError::MissingOperator { l })?;
            let ncols = layout.columns(i);
            let nbc = op.boundary_rows.len();
            let native = None;
            let mass_identity = op.mass == Matrix::identity(nr);
            degrees.push(DegreeWork {
                l,
                nr,
                ncols,
                mass_identity,
                mass: op.mass.into_vec(),
                linear: op.linear.into_vec(),
                bc_rows: op.boundary_rows.iter().map(|b| b.row).collect(),
                bc_coeffs: op.boundary_rows.into_iter().map(|b| b.coeffs).collect(),
                bc_values: vec![0.0; nbc * ncols],
                factors: None,
                assembly: None,
                factorizations: 0,
                assembly_factorizations: 0,
                hist_au: Vec::new(),
                hist_n: Vec::new(),
                hist_lu: Vec::new(),
                missing: Vec::new(),
                au0: Vec::new(),
                stage_n: Vec::new(),
                stage_lu: Vec::new(),
                rhs: vec![0.0; nr * ncols],
                scratch: vec![0.0; crate::kernels::solve_scratch_len(nr)],
                native,
            });
        }
        let pool = match options.threads {
            DegreeThreads::Sequential => None,
            DegreeThreads::OwnPool(t) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t.get())
                    // Room for backends that use a lot of stack (OpenBLAS's threaded dgetrf).
                    .stack_size(16 << 20)
                    .build()
                    .map_err(|e| ImexError::ThreadPool {
                        threads: t.get(),
                        reason: e.to_string(),
                    })?,
            ),
        };
        Ok(Self {
            startup: scheme.startup_tableau(),
            scheme,
            backend,
            layout,
            time: options.start_time,
            options,
            pool,
            degrees,
            steps: 0,
            dt_hist: [0.0; 2],
            filled: 0,
            pending: None,
            missing_modes: 0,
            explicit_buf: None,
        })
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The layout of the state and explicit blocks.
    pub fn layout(&self) -> &ModeLayout {
        &self.layout
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The options.
    pub fn options(&self) -> &StepperOptions {
        &self.options
    }

    /// The time of the current state.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Number of completed steps.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The last completed step size, if any.
    pub fn last_dt(&self) -> Option<f64> {
        (self.steps > 0).then_some(self.dt_hist[0])
    }

    /// Whether a step begun with [`Stepper::begin_step`] is waiting for [`Stepper::advance`].
    pub fn step_in_progress(&self) -> bool {
        self.pending.is_some()
    }

    /// Abandons a step in progress (the state block may hold a stage value).
    pub fn cancel_step(&mut self) {
        self.pending = None;
    }

    /// Forgets the multistep history (the next step starts the scheme again) and sets the
    /// time; the LU factors stay cached. Also abandons an incomplete import
    /// ([`Stepper::import_meta`]).
    pub fn restart(&mut self, time: f64) -> Result<(), ImexError> {
        if !time.is_finite() {
            return Err(ImexError::InvalidTime { got: time });
        }
        self.pending = None;
        self.time = time;
        self.filled = 0;
        self.missing_modes = 0;
        for d in &mut self.degrees {
            d.hist_au.clear();
            d.hist_n.clear();
            d.hist_lu.clear();
            d.missing.clear();
        }
        Ok(())
    }

    fn degree(&self, l: usize) -> Option<&DegreeWork<B::Scratch>> {
        self.layout.index_of(l).map(|i| &self.degrees[i])
    }

    /// How many times the implicit matrix of degree `l` has been factored.
    pub fn factorizations(&self, l: usize) -> Option<usize> {
        self.degree(l).map(|d| d.factorizations)
    }

    /// `(l, factorisations)` for every held degree, in storage order.
    pub fn factorization_counts(&self) -> Vec<(usize, usize)> {
        self.degrees
            .iter()
            .map(|d| (d.l, d.factorizations))
            .collect()
    }

    /// How many times the assembly matrix (`A_l` with boundary rows, for DIRK schemes that are
    /// not stiffly accurate) of degree `l` has been factored: at most once.
    pub fn assembly_factorizations(&self, l: usize) -> Option<usize> {
        self.degree(l).map(|d| d.assembly_factorizations)
    }

    /// The cached factors of degree `l` and the coefficient `dt b0` they were built for.
    pub fn factors(&self, l: usize) -> Option<(f64, &LuFactors)> {
        self.degree(l)
            .and_then(|d| d.factors.as_ref().map(|(c, f)| (*c, f)))
    }

    /// Sets the value of boundary condition `index` of degree `l` for order `m` (real part for
    /// the real column, imaginary part for the imaginary column). It applies to every solve
    /// from the next one on.
    pub fn set_boundary_value(
        &mut self,
        l: usize,
        m: usize,
        index: usize,
        value: Complex64,
    ) -> Result<(), ImexError> {
        let (d, k, nbc, nm) = self.locate_bc(l, m, index)?;
        let d = &mut self.degrees[d];
        d.bc_values[k * nbc + index] = value.re;
        d.bc_values[(nm + k) * nbc + index] = value.im;
        Ok(())
    }

    /// The value of boundary condition `index` of degree `l` for order `m`.
    pub fn boundary_value(&self, l: usize, m: usize, index: usize) -> Result<Complex64, ImexError> {
        let (d, k, nbc, nm) = self.locate_bc(l, m, index)?;
        let d = &self.degrees[d];
        Ok(Complex64::new(
            d.bc_values[k * nbc + index],
            d.bc_values[(nm + k) * nbc + index],
        ))
    }

    fn locate_bc(
        &self,
        l: usize,
        m: usize,
        index: usize,
    ) -> Result<(usize, usize, usize, usize), ImexError> {
        let d = self
            .layout
            .index_of(l)
            .ok_or(ImexError::ModeNotHeld { l, m })?;
        let ms = self.layout.orders(l).unwrap_or(&[]);
        let k = ms
            .binary_search(&m)
            .map_err(|_| ImexError::ModeNotHeld { l, m })?;
        let nbc = self.degrees[d].bc_rows.len();
        if index >= nbc {
            return Err(ImexError::BoundaryIndex {
                l,
                index,
                count: nbc,
            });
        }
        Ok((d, k, nbc, ms.len()))
    }

    fn check_layout(&self, what: &'static str, block: &ModeBlock) -> Result<(), ImexError> {
        if block.layout() != &self.layout {
            return Err(ImexError::LayoutMismatch {
                what,
                expected: self.layout.summary(),
                got: block.layout().summary(),
            });
        }
        Ok(())
    }

    /// Takes one step of size `dt` from the current state: calls `explicit(t, u, out)` for each
    /// explicit evaluation the scheme needs (`out` arrives zeroed; rows replaced by boundary
    /// conditions are ignored) and leaves `u^{n+1}` in `state`. Returns the new time.
    ///
    /// Refactors `M_l` for every degree when `dt b0` differs from the cached value.
    pub fn step<F>(
        &mut self,
        dt: f64,
        state: &mut ModeBlock,
        mut explicit: F,
    ) -> Result<f64, ImexError>
    where
        F: FnMut(f64, &ModeBlock, &mut ModeBlock),
    {
        self.check_layout("state", state)?;
        let mut t = self.begin_step(dt)?;
        let mut buf = match self.explicit_buf.take() {
            Some(b) => b,
            None => ModeBlock::zeros(&self.layout),
        };
        let result = loop {
            buf.fill(0.0);
            explicit(t, state, &mut buf);
            match self.advance(state, &buf) {
                Ok(StepProgress::NeedExplicit { time }) => t = time,
                Ok(StepProgress::Done { time }) => break Ok(time),
                Err(e) => {
                    self.pending = None;
                    break Err(e);
                }
            }
        };
        if buf.layout() == &self.layout {
            self.explicit_buf = Some(buf);
        }
        result
    }

    /// Begins a step of size `dt`: chooses the weights (start-up, variable step), refactors
    /// where `dt b0` changed, and returns the time at which the explicit terms of the current
    /// state are needed (the current time). Follow with [`Stepper::advance`].
    pub fn begin_step(&mut self, dt: f64) -> Result<f64, ImexError> {
        if let Some(p) = &self.pending {
            return Err(ImexError::StepInProgress { stage: p.stage });
        }
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(ImexError::InvalidTimeStep { got: dt });
        }
        self.check_import_complete()?;
        let steps = [dt, self.dt_hist[0], self.dt_hist[1]];
        let (plan, coefficient, assembly) = match self.scheme.view() {
            SchemeRef::Multistep(ms) => match &self.startup {
                Some(tab) if self.filled + 1 < ms.steps() => (
                    Plan::Dirk { startup: true },
                    dt * tab.gamma(),
                    !tab.stiffly_accurate(),
                ),
                _ => {
                    let w = ms.step_weights(self.filled, &steps);
                    (Plan::Multistep(w), dt * w.b_imp[0], false)
                }
            },
            SchemeRef::Dirk(tab) => (
                Plan::Dirk { startup: false },
                dt * tab.gamma(),
                !tab.stiffly_accurate(),
            ),
        };
        let backend = &self.backend;
        for_each_degree(
            self.pool.as_ref(),
            &mut self.degrees,
            &self.layout,
            None,
            None,
            |d, _, _| {
                d.ensure_factors(backend, coefficient)?;
                if assembly {
                    d.ensure_assembly(backend)?;
                }
                Ok(())
            },
        )?;
        self.pending = Some(Pending {
            dt,
            t0: self.time,
            plan,
            stage: 0,
        });
        Ok(self.time)
    }

    /// Feeds the explicit terms of the state block (the stage requested last) and advances:
    /// the state block then holds the next stage value ([`StepProgress::NeedExplicit`]) or
    /// `u^{n+1}` ([`StepProgress::Done`]).
    pub fn advance(
        &mut self,
        state: &mut ModeBlock,
        explicit: &ModeBlock,
    ) -> Result<StepProgress, ImexError> {
        let Some(p) = self.pending else {
            return Err(ImexError::NoStepInProgress);
        };
        self.check_layout("state", state)?;
        self.check_layout("explicit terms", explicit)?;
        let backend = &self.backend;
        let mode = self.options.solve;
        let pool = self.pool.as_ref();
        match p.plan {
            Plan::Multistep(w) => {
                let ms = self.scheme.multistep().ok_or(ImexError::NoStepInProgress)?;
                let (depth, need_lu) = (ms.steps(), ms.uses_implicit_history());
                for_each_degree(
                    pool,
                    &mut self.degrees,
                    &self.layout,
                    Some(state.as_mut_slice()),
                    Some(explicit.as_slice()),
                    |d, u, n| {
                        let n = n.unwrap_or(&[]);
                        d.multistep_step(backend, mode, &w, p.dt, depth, need_lu, u, n)
                    },
                )?;
                Ok(self.finish_step(p))
            }
            Plan::Dirk { startup } => {
                let tab = if startup {
                    self.startup.as_ref()
                } else {
                    self.scheme.tableau()
                }
                .ok_or(ImexError::NoStepInProgress)?;
                let record = if startup {
                    self.scheme
                        .multistep()
                        .map(|ms| (ms.steps(), ms.uses_implicit_history()))
                } else {
                    None
                };
                let s = tab.stages();
                let mut i = p.stage;
                let mut n = Some(explicit.as_slice());
                loop {
                    for_each_degree(
                        pool,
                        &mut self.degrees,
                        &self.layout,
                        Some(state.as_mut_slice()),
                        n,
                        |d, u, n| d.dirk_stage(backend, mode, tab, p.dt, i, u, n, record),
                    )?;
                    i += 1;
                    if i == s || (i == s - 1 && tab.stiffly_accurate()) {
                        return Ok(self.finish_step(p));
                    }
                    if tab.needs_explicit(i) {
                        let time = p.t0 + tab.c()[i] * p.dt;
                        if let Some(q) = &mut self.pending {
                            q.stage = i;
                        }
                        return Ok(StepProgress::NeedExplicit { time });
                    }
                    n = None;
                }
            }
        }
    }

    fn finish_step(&mut self, p: Pending) -> StepProgress {
        self.pending = None;
        self.time = p.t0 + p.dt;
        self.steps += 1;
        self.dt_hist = [p.dt, self.dt_hist[0]];
        if let Some(ms) = self.scheme.multistep() {
            self.filled = (self.filled + 1).min(ms.steps());
        }
        StepProgress::Done { time: self.time }
    }

    /// The kind of the scheme (shortcut).
    pub fn kind(&self) -> SchemeKind {
        self.scheme.kind()
    }

    /// Whether the next step uses the start-up procedure of a multistep scheme.
    pub fn starting(&self) -> bool {
        self.scheme
            .multistep()
            .is_some_and(|ms| self.filled + 1 < ms.steps())
    }
}

fn validate_operator(op: &DegreeOperator, nr: usize) -> Result<(), ImexError> {
    for (what, m) in [
        ("mass matrix A_l", &op.mass),
        ("linear operator L_l", &op.linear),
    ] {
        if m.nrows() != nr || m.ncols() != nr {
            return Err(ImexError::MatrixShape {
                what,
                l: op.l,
                expected_rows: nr,
                expected_cols: nr,
                got_rows: m.nrows(),
                got_cols: m.ncols(),
            });
        }
        if let Some(k) = m.as_slice().iter().position(|v| !v.is_finite()) {
            return Err(ImexError::NonFinite {
                what,
                l: op.l,
                row: k % nr,
                col: k / nr,
            });
        }
    }
    for (b, row) in op.boundary_rows.iter().enumerate() {
        if row.row >= nr {
            return Err(ImexError::BoundaryRowIndex {
                l: op.l,
                row: row.row,
                nr,
            });
        }
        if op.boundary_rows[..b].iter().any(|o| o.row == row.row) {
            return Err(ImexError::DuplicateBoundaryRow {
                l: op.l,
                row: row.row,
            });
        }
        if row.coeffs.len() != nr {
            return Err(ImexError::MatrixShape {
                what: "boundary row",
                l: op.l,
                expected_rows: 1,
                expected_cols: nr,
                got_rows: 1,
                got_cols: row.coeffs.len(),
            });
        }
        if let Some(k) = row.coeffs.iter().position(|v| !v.is_finite()) {
            return Err(ImexError::NonFinite {
                what: "boundary row",
                l: op.l,
                row: row.row,
                col: k,
            });
        }
    }
    Ok(())
}
