//! Distributed transforms on a `Pi_r x Pi_theta` process grid: the 1d
//! scheme (`Pi_theta = 1`, radial levels distributed, whole spheres per
//! rank) and the 2d scheme (radial levels x latitudes), with the theta
//! transposition between the Legendre and the phi steps and the `l`
//! transposition between the level layout and the lm layout.
//!
//! # Layouts (per rank `(ir, it)`, see [`Decomposition`])
//!
//! - **grid**: field after field, for each own level, for each own latitude
//!   (contiguous block), `nphi` reals: index `((f * nr_loc + r) * ntheta_loc
//!   + j) * nphi + k`.
//! - **level layout**: field after field, for each own level, the
//!   coefficients of the tuples [`DistSht::level_tuples`] (all `(l, m)` with
//!   `m` one of the rank's orders): index `(f * nr_loc + r) * n_tuples + i`.
//! - **lm layout**: field after field, for each tuple of
//!   [`DistSht::lm_tuples`], all `nr` radial points: index
//!   `(f * n_lm + i) * nr + r`.
//!
//! With one rank the grid and the level layout are the serial [`Sht`]
//! layouts of a batch of `nfields * nr` fields (field-major, level minor).
//!
//! Scalar ([`DistSht::synthesis`], [`DistSht::analysis`]) and vector
//! ([`DistSht::vector_synthesis`], [`DistSht::vector_analysis`], spheroidal
//! and toroidal potentials to `u_theta`, `u_phi`) transforms take a batch
//! of fields; the queue length is the number of scalar components per
//! theta transposition (two per vector field).
//!
//! # Bit-identity
//!
//! Each output is computed by the same floating-point operations as in the
//! serial transform: the Legendre step for order `m` is
//! [`Sht::legendre_synthesis_m`] / [`Sht::legendre_analysis_m`] (whose
//! fields do not interact) or its vector counterpart, the 1d scheme calls
//! [`Sht::synthesis`] / [`Sht::analysis`] (or the vector ones) on whole spheres, and the phi step of the 2d scheme
//! runs the same real FFT of `nphi` points on the same row values as
//! [`Sht::phi_synthesis`] / [`Sht::phi_analysis`] (zero-padded orders, the
//! imaginary part of `m = 0` cleared; scaled by `1/nphi` after the forward
//! transform). Transpositions only move values.

use std::sync::Arc;
use std::time::Instant;

use comm::{
    CommError, CommExt, Communicator, ProcessGrid, Protocol, Redistribution, ReduceOp, Strided,
};
use num_complex::Complex64;
use rayon::prelude::*;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::fft;
use crate::snake::Decomposition;
use crate::{batch, check_len, Parallelism, Sht, ShtError};

const ZERO: Complex64 = Complex64::new(0.0, 0.0);
const TAG_THETA: u32 = 0x5A1;
const TAG_L: u32 = 0x5A2;

/// Errors of the distributed transforms.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// An error of the serial plan (grid parameters, buffer lengths).
    #[error(transparent)]
    Sht(#[from] ShtError),
    /// An error of the communicator.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// More ranks along one grid axis than the problem can give work to.
    #[error("{what} = {value} is out of range: {reason} allow 1 <= {what} <= {max}")]
    TooManyRanks {
        /// Which grid dimension (`pi_r`, `pi_theta`).
        what: &'static str,
        /// The value given.
        value: usize,
        /// The largest value allowed.
        max: usize,
        /// What limits it.
        reason: String,
    },
    /// The process grid does not hold the communicator's ranks.
    #[error("process grid pi_r x pi_theta = {pi_r} x {pi_theta} holds {} ranks but the communicator has {size}", pi_r * pi_theta)]
    GridMismatch {
        /// Radial ranks.
        pi_r: usize,
        /// Theta ranks.
        pi_theta: usize,
        /// Ranks of the communicator.
        size: usize,
    },
    /// Any other invalid argument.
    #[error("{0}")]
    Invalid(String),
}

/// Which transposition a timing belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transposition {
    /// Between the Legendre step (all latitudes, own orders) and the phi
    /// step (own latitudes, all orders), among the theta ranks of one level block.
    Theta,
    /// Between the level layout and the lm layout, among the radial ranks
    /// of one theta block.
    L,
}

/// One measurement of a transposition algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// The transposition.
    pub transposition: Transposition,
    /// The algorithm.
    pub algorithm: Protocol,
    /// Median seconds of one round trip (there and back) of the measured
    /// fields, the slowest rank's.
    pub seconds: f64,
}

/// Parameters of a distributed transform; all ranks must pass the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistConfig {
    /// Gauss latitudes.
    pub ntheta: usize,
    /// Longitudes (even, at least `2 (lmax + 1)`).
    pub nphi: usize,
    /// Truncation; `None` for the default of [`Sht::new`].
    pub lmax: Option<usize>,
    /// Radial levels.
    pub nr: usize,
    /// Ranks along the radial levels.
    pub pi_r: usize,
    /// Ranks along the latitudes (1: the 1d scheme).
    pub pi_theta: usize,
    /// Scalar components moved per transposition call (a tangent vector
    /// field counts two, `u_theta` and `u_phi`; a radial component is one
    /// more scalar field, so a full 3-vector counts three); a batch of more
    /// is transposed in chunks of this many.
    pub queue: usize,
    /// Protocol of the theta transposition.
    pub theta_protocol: Protocol,
    /// Protocol of the `l` transposition.
    pub l_protocol: Protocol,
    /// Threads for the Legendre and phi steps (bit-identical either way).
    pub parallelism: Parallelism,
}

impl DistConfig {
    /// `nphi = 2 ntheta`, default `lmax`, queue length 1, both algorithms
    /// [`Protocol::Auto`], no threads.
    pub fn new(ntheta: usize, nr: usize, pi_r: usize, pi_theta: usize) -> Self {
        Self {
            ntheta,
            nphi: 2 * ntheta,
            lmax: None,
            nr,
            pi_r,
            pi_theta,
            queue: 1,
            theta_protocol: Protocol::Auto,
            l_protocol: Protocol::Auto,
            parallelism: Parallelism::None,
        }
    }

    fn encode(&self) -> Vec<i64> {
        let alg = |a: Protocol| {
            Protocol::ALL
                .iter()
                .position(|&x| x == a)
                .map_or(Protocol::ALL.len() as i64, |i| i as i64)
        };
        vec![
            self.ntheta as i64,
            self.nphi as i64,
            self.lmax.map_or(-1, |l| l as i64),
            self.nr as i64,
            self.pi_r as i64,
            self.pi_theta as i64,
            self.queue as i64,
            alg(self.theta_protocol),
            alg(self.l_protocol),
        ]
    }
}

/// A distributed spherical harmonic transform plan for one rank of a
/// `Pi_r x Pi_theta` grid (rank `ir * pi_theta + it` at grid position
/// `(ir, it)`). Built collectively by [`DistSht::new`]; holds its
/// sub-communicators, index tables and buffers.
pub struct DistSht {
    sht: Sht,
    dec: Decomposition,
    ir: usize,
    it: usize,
    theta_comm: Box<dyn Communicator>,
    radial_comm: Box<dyn Communicator>,
    queue: usize,
    theta_alg: Protocol,
    l_alg: Protocol,
    par: Parallelism,
    timings: Vec<Timing>,
    nrl: usize,
    ntl: usize,
    ntup: usize,
    nlm: usize,
    /// Per own order index: level-layout position of `(l, m)`, `l = m..=lmax`.
    lvl_pos: Vec<Vec<usize>>,
    /// Level-layout position of each serial m-major index (1d scheme).
    serial_pos: Vec<usize>,
    serial_identity: bool,
    /// Slot of each order in the phi-side buffer (grouped by theta rank).
    slot: Vec<usize>,
    /// Per theta rank: first slot and number of its orders.
    slot0: Vec<usize>,
    nm: Vec<usize>,
    /// Per theta rank: its latitude block.
    lat: Vec<(usize, usize)>,
    /// Per radial rank: its level block, and its tuple group `(start, len)`.
    lev: Vec<(usize, usize)>,
    group: Vec<(usize, usize)>,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
    /// The working space of the plan's eight-row phi FFTs (one thread).
    lane_work: fft::Work,
    a: Vec<Complex64>,
    b: Vec<Complex64>,
    cm: Vec<Complex64>,
    ser: Vec<Complex64>,
    ser2: Vec<Complex64>,
    rows: Vec<Complex64>,
    /// Phi-step buffers of the one-thread path: a grid row, its spectrum,
    /// the forward and the inverse FFT's scratch.
    phi_scratch: (Vec<f64>, Vec<Complex64>, Vec<Complex64>, Vec<Complex64>),
    /// Redistributions already planned, per transposition and batch size
    /// (the queue length and the remainder of a batch): no allocation once
    /// warm.
    plans: Vec<Plans>,
}

/// The two directions of one transposition for one batch size.
#[derive(Debug)]
struct Plans {
    which: Transposition,
    n: usize,
    /// Theta: Legendre side to phi side; l: level side to lm side.
    fwd: Redistribution<Complex64>,
    /// The way back.
    bwd: Redistribution<Complex64>,
}

impl std::fmt::Debug for DistSht {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistSht")
            .field("sht", &self.sht)
            .field("grid", &[self.dec.pi_r(), self.dec.pi_theta()])
            .field("coords", &[self.ir, self.it])
            .field("queue", &self.queue)
            .field("theta_protocol", &self.theta_alg)
            .field("l_protocol", &self.l_alg)
            .finish_non_exhaustive()
    }
}

impl DistSht {
    /// Builds the plan (collective over `comm`, which must hold
    /// `pi_r * pi_theta` ranks). With [`Protocol::Auto`] the algorithms
    /// are timed here on `queue` fields and the fastest kept.
    ///
    /// Errors, the same on every rank: ranks passing different
    /// configurations; the serial plan's (`lmax >= ntheta`, odd `nphi`,
    /// ...); a grid that does not match the communicator; more theta ranks
    /// than latitudes or orders; more radial ranks than levels or than the
    /// degrees holding tuples on a theta rank; `queue = 0`.
    pub fn new(comm: &dyn Communicator, cfg: &DistConfig) -> Result<Self, DistError> {
        comm.check_agree("the distributed SHT configuration", &cfg.encode())?;
        let sht = Sht::with_nphi(cfg.ntheta, cfg.nphi, cfg.lmax)?;
        if cfg.queue == 0 {
            return Err(DistError::Invalid(
                "queue = 0 is out of range: at least 1 field per transposition".into(),
            ));
        }
        if cfg.pi_r * cfg.pi_theta != comm.size() {
            return Err(DistError::GridMismatch {
                pi_r: cfg.pi_r,
                pi_theta: cfg.pi_theta,
                size: comm.size(),
            });
        }
        let lmax = sht.lmax();
        let dec = Decomposition::new(lmax, cfg.ntheta, cfg.nr, cfg.pi_r, cfg.pi_theta)?;
        let grid = ProcessGrid::new([cfg.pi_r, cfg.pi_theta, 1], [false; 3])?;
        let [ir, it, _] = grid.coords(comm.rank());
        let theta_comm = grid.sub_comm(comm, [false, true, false])?;
        let radial_comm = grid.sub_comm(comm, [true, false, false])?;
        let (pr, pt) = (cfg.pi_r, cfg.pi_theta);

        let tuples = dec.level_tuples(it);
        let orders = dec.orders(it).to_vec();
        let mut lvl_pos: Vec<Vec<usize>> = orders.iter().map(|&m| vec![0; lmax - m + 1]).collect();
        let mut oi = vec![usize::MAX; lmax + 1];
        for (i, &m) in orders.iter().enumerate() {
            oi[m] = i;
        }
        for (p, &(l, m)) in tuples.iter().enumerate() {
            lvl_pos[oi[m]][l - m] = p;
        }
        let serial_pos: Vec<usize> = if pt == 1 {
            (0..=lmax)
                .flat_map(|m| (m..=lmax).map(move |l| (l, m)))
                .map(|(l, m)| lvl_pos[m][l - m])
                .collect()
        } else {
            vec![]
        };
        let serial_identity = serial_pos.iter().enumerate().all(|(k, &p)| k == p);
        let mut slot = vec![0; lmax + 1];
        let (mut slot0, mut nm) = (vec![0; pt], vec![0; pt]);
        let mut s = 0;
        for t in 0..pt {
            slot0[t] = s;
            nm[t] = dec.orders(t).len();
            for &m in dec.orders(t) {
                slot[m] = s;
                s += 1;
            }
        }
        let lat: Vec<(usize, usize)> = (0..pt).map(|t| dec.latitudes(t)).collect();
        let lev: Vec<(usize, usize)> = (0..pr).map(|r| dec.levels(r)).collect();
        let group: Vec<(usize, usize)> = (0..pr)
            .map(|r| (dec.group_start(r, it), dec.lm_tuples(r, it).len()))
            .collect();
        let nrl = lev[ir].1;
        let ntl = lat[it].1;
        let nt = cfg.ntheta;
        let mut planner = RealFftPlanner::<f64>::new();
        let r2c = planner.plan_fft_forward(cfg.nphi);
        let c2r = planner.plan_fft_inverse(cfg.nphi);
        let (fwd_scratch, inv_scratch) = (r2c.get_scratch_len(), c2r.get_scratch_len());
        let q = cfg.queue;
        // A vector field moves two components: room for at least two.
        let qb = q.max(2);
        let mut plan = Self {
            ntup: tuples.len(),
            nlm: group[ir].1,
            a: vec![ZERO; nm[it] * qb * nrl * nt],
            b: vec![ZERO; (lmax + 1) * qb * nrl * ntl],
            cm: vec![ZERO; qb * nrl * (lmax + 1)],
            ser: vec![],
            ser2: vec![],
            rows: vec![ZERO; (lmax + 1) * q * nrl * ntl],
            sht,
            dec,
            ir,
            it,
            theta_comm,
            radial_comm,
            queue: q,
            theta_alg: cfg.theta_protocol,
            l_alg: cfg.l_protocol,
            par: cfg.parallelism,
            timings: vec![],
            nrl,
            ntl,
            lvl_pos,
            serial_pos,
            serial_identity,
            slot,
            slot0,
            nm,
            lat,
            lev,
            group,
            r2c,
            c2r,
            lane_work: fft::Work::default(),
            phi_scratch: (
                vec![0.0; cfg.nphi],
                vec![ZERO; cfg.nphi / 2 + 1],
                vec![ZERO; fwd_scratch],
                vec![ZERO; inv_scratch],
            ),
            plans: vec![],
        };
        if plan.theta_alg == Protocol::Auto {
            plan.theta_alg = if pt == 1 {
                // The 1d scheme has no theta transposition.
                Protocol::Alltoallw
            } else {
                plan.tune(Transposition::Theta)?
            };
        }
        if plan.l_alg == Protocol::Auto {
            plan.l_alg = plan.tune(Transposition::L)?;
        }
        Ok(plan)
    }

    fn tune(&mut self, which: Transposition) -> Result<Protocol, DistError> {
        let mut best = (f64::INFINITY, Protocol::Alltoallw);
        for alg in Protocol::ALL {
            let t = self.measure(which, alg, self.queue, 3)?;
            self.timings.push(Timing {
                transposition: which,
                algorithm: alg,
                seconds: t,
            });
            if t < best.0 {
                best = (t, alg);
            }
        }
        Ok(best.1)
    }

    /// Collective: times `nfields` fields (in chunks of the queue length)
    /// through one transposition and back with `alg`, `reps` times after
    /// one warm-up; returns the median, the largest over all ranks (so
    /// every rank gets the same number). The data are zeros in the plan's
    /// own buffers; the layouts are the plan's.
    pub fn measure(
        &mut self,
        which: Transposition,
        alg: Protocol,
        nfields: usize,
        reps: usize,
    ) -> Result<f64, DistError> {
        if alg == Protocol::Auto {
            return Err(DistError::Invalid(
                "measure needs a concrete algorithm, not auto".into(),
            ));
        }
        let mut level = vec![ZERO; nfields * self.level_len()];
        let mut lm = vec![ZERO; nfields * self.lm_len()];
        let mut times = Vec::with_capacity(reps);
        let mut once = |s: &mut Self| -> Result<(), DistError> {
            match which {
                Transposition::Theta => {
                    for f0 in (0..nfields).step_by(s.queue) {
                        let nb = s.queue.min(nfields - f0) * s.nrl;
                        s.theta_move(alg, nb, true)?;
                        s.theta_move(alg, nb, false)?;
                    }
                }
                Transposition::L => {
                    s.l_move(alg, &level, &mut lm, nfields)?;
                    s.l_back(alg, &lm, &mut level, nfields)?;
                }
            }
            Ok(())
        };
        once(self)?;
        for _ in 0..reps.max(1) {
            self.theta_comm.barrier()?;
            self.radial_comm.barrier()?;
            let t = Instant::now();
            once(self)?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let t = self.theta_comm.allreduce_scalar(t, ReduceOp::Max)?;
        Ok(self.radial_comm.allreduce_scalar(t, ReduceOp::Max)?)
    }

    /// The serial plan (grid, truncation, coefficient indexing).
    pub fn sht(&self) -> &Sht {
        &self.sht
    }
    /// The decomposition over all ranks.
    pub fn decomposition(&self) -> &Decomposition {
        &self.dec
    }
    /// This rank's grid position `(ir, it)`.
    pub fn coords(&self) -> (usize, usize) {
        (self.ir, self.it)
    }
    /// Own radial levels `(start, count)`.
    pub fn levels(&self) -> (usize, usize) {
        self.lev[self.ir]
    }
    /// Own latitudes `(start, count)`.
    pub fn latitudes(&self) -> (usize, usize) {
        self.lat[self.it]
    }
    /// Own orders `m`, ascending.
    pub fn orders(&self) -> &[usize] {
        self.dec.orders(self.it)
    }
    /// Tuples `(l, m)` of one level in the level layout, in order.
    pub fn level_tuples(&self) -> &[(usize, usize)] {
        self.dec.level_tuples(self.it)
    }
    /// Tuples `(l, m)` of the lm layout, in order.
    pub fn lm_tuples(&self) -> &[(usize, usize)] {
        self.dec.lm_tuples(self.ir, self.it)
    }
    /// Grid values of one field on this rank: `nr_loc * ntheta_loc * nphi`.
    pub fn grid_len(&self) -> usize {
        self.nrl * self.ntl * self.sht.nphi()
    }
    /// Level-layout coefficients of one field: `nr_loc * level_tuples().len()`.
    pub fn level_len(&self) -> usize {
        self.nrl * self.ntup
    }
    /// Lm-layout coefficients of one field: `lm_tuples().len() * nr`.
    pub fn lm_len(&self) -> usize {
        self.nlm * self.dec.nr()
    }
    /// Queue length (fields per transposition call).
    pub fn queue(&self) -> usize {
        self.queue
    }
    /// The theta transposition's algorithm (the winner under `Auto`; with
    /// one theta rank there is no theta transposition, and `Auto` leaves
    /// [`Protocol::Alltoallw`] unmeasured).
    pub fn theta_protocol(&self) -> Protocol {
        self.theta_alg
    }
    /// The `l` transposition's algorithm (the winner under `Auto`).
    pub fn l_protocol(&self) -> Protocol {
        self.l_alg
    }
    /// The times measured by `Auto` (empty without it).
    pub fn timings(&self) -> &[Timing] {
        &self.timings
    }

    /// Theta-transposition layouts for `nb` batch entries (fields x own
    /// levels): the Legendre side `[order][b][ntheta]` and the phi side
    /// `[slot][b][ntheta_loc]`.
    fn theta_layouts(&self, nb: usize) -> (Vec<Strided>, Vec<Strided>) {
        let nt = self.sht.ntheta();
        let nm_me = self.nm[self.it];
        let legendre = self
            .lat
            .iter()
            .map(|&(t0, tl)| Strided::nested(t0, [nm_me, nb, tl], [nb * nt, nt, 1]))
            .collect();
        let phi = (0..self.lat.len())
            .map(|t| Strided::contiguous(self.slot0[t] * nb * self.ntl, self.nm[t] * nb * self.ntl))
            .collect();
        (legendre, phi)
    }

    /// Moves `a` (Legendre side) to `b` (phi side) when `forward`, else back.
    fn theta_move(&mut self, alg: Protocol, nb: usize, forward: bool) -> Result<(), DistError> {
        let i = self.plan_for(Transposition::Theta, nb, alg)?;
        let (a_len, b_len) = (
            self.nm[self.it] * nb * self.sht.ntheta(),
            (self.sht.lmax() + 1) * nb * self.ntl,
        );
        let plans = &mut self.plans[i];
        let comm = &*self.theta_comm;
        if forward {
            plans
                .fwd
                .execute(comm, &self.a[..a_len], &mut self.b[..b_len])?;
        } else {
            plans
                .bwd
                .execute(comm, &self.b[..b_len], &mut self.a[..a_len])?;
        }
        Ok(())
    }

    /// Index of the planned redistributions of `which` for batch size `n`
    /// (batch entries for theta, fields for l), planned on first use
    /// (collective over the transposition's communicator) and switched to
    /// `alg`.
    fn plan_for(
        &mut self,
        which: Transposition,
        n: usize,
        alg: Protocol,
    ) -> Result<usize, DistError> {
        if let Some(i) = self.plans.iter().position(|l| l.which == which && l.n == n) {
            let p = &mut self.plans[i];
            if p.fwd.protocol() != alg {
                p.fwd.set_protocol(alg)?;
                p.bwd.set_protocol(alg)?;
            }
            return Ok(i);
        }
        let (first, second, comm, tag) = match which {
            Transposition::Theta => {
                let (a, b) = self.theta_layouts(n);
                (a, b, &*self.theta_comm, TAG_THETA)
            }
            Transposition::L => {
                let (a, b) = self.l_layouts(n);
                (a, b, &*self.radial_comm, TAG_L)
            }
        };
        let mut fwd = Redistribution::new(comm, first.clone(), second.clone(), alg)?;
        let mut bwd = Redistribution::new(comm, second, first, alg)?;
        fwd.set_tag(tag)?;
        bwd.set_tag(tag)?;
        self.plans.push(Plans { which, n, fwd, bwd });
        Ok(self.plans.len() - 1)
    }

    /// `l`-transposition layouts for `nf` fields: the level side and the lm side.
    fn l_layouts(&self, nf: usize) -> (Vec<Strided>, Vec<Strided>) {
        let (nrl, ntup, nlm, nr) = (self.nrl, self.ntup, self.nlm, self.dec.nr());
        let level = self
            .group
            .iter()
            .map(|&(g0, gl)| Strided::nested(g0, [nf, nrl, gl], [nrl * ntup, ntup, 1]))
            .collect();
        let lm = self
            .lev
            .iter()
            .map(|&(r0, rl)| Strided::nested(r0, [nf, rl, nlm], [nlm * nr, 1, nr]))
            .collect();
        (level, lm)
    }

    fn l_move(
        &mut self,
        alg: Protocol,
        level: &[Complex64],
        lm: &mut [Complex64],
        nf: usize,
    ) -> Result<(), DistError> {
        let (ll, ml) = (self.level_len(), self.lm_len());
        for f0 in (0..nf).step_by(self.queue) {
            let q = self.queue.min(nf - f0);
            let i = self.plan_for(Transposition::L, q, alg)?;
            self.plans[i].fwd.execute(
                &*self.radial_comm,
                &level[f0 * ll..(f0 + q) * ll],
                &mut lm[f0 * ml..(f0 + q) * ml],
            )?;
        }
        Ok(())
    }

    fn l_back(
        &mut self,
        alg: Protocol,
        lm: &[Complex64],
        level: &mut [Complex64],
        nf: usize,
    ) -> Result<(), DistError> {
        let (ll, ml) = (self.level_len(), self.lm_len());
        for f0 in (0..nf).step_by(self.queue) {
            let q = self.queue.min(nf - f0);
            let i = self.plan_for(Transposition::L, q, alg)?;
            self.plans[i].bwd.execute(
                &*self.radial_comm,
                &lm[f0 * ml..(f0 + q) * ml],
                &mut level[f0 * ll..(f0 + q) * ll],
            )?;
        }
        Ok(())
    }

    /// `l` transposition: the level layout (`nfields * level_len()`) to the
    /// lm layout (`nfields * lm_len()`). Collective over the radial ranks
    /// of this rank's theta block, which must all pass the same number of fields.
    pub fn to_lm(&mut self, level: &[Complex64], lm: &mut [Complex64]) -> Result<(), DistError> {
        let nf = batch("level", level.len(), self.level_len())?;
        check_len("lm", lm.len(), nf * self.lm_len())?;
        self.l_move(self.l_alg, level, lm, nf)
    }

    /// `l` transposition back: the lm layout to the level layout (collective
    /// as [`to_lm`](Self::to_lm)).
    pub fn from_lm(&mut self, lm: &[Complex64], level: &mut [Complex64]) -> Result<(), DistError> {
        let nf = batch("lm", lm.len(), self.lm_len())?;
        check_len("level", level.len(), nf * self.level_len())?;
        self.l_back(self.l_alg, lm, level, nf)
    }

    /// Scalar synthesis of a batch: `coeffs` in the level layout
    /// (`nfields * level_len()`) to `grid` (`nfields * grid_len()`).
    /// Collective over the theta ranks of this rank's level block, which
    /// must all pass the same number of fields.
    pub fn synthesis(&mut self, coeffs: &[Complex64], grid: &mut [f64]) -> Result<(), DistError> {
        let nf = batch("coeffs", coeffs.len(), self.level_len())?;
        check_len("grid", grid.len(), nf * self.grid_len())?;
        if self.dec.pi_theta() == 1 {
            if self.serial_identity {
                return Ok(self.sht.synthesis(coeffs, grid, self.par)?);
            }
            let (nlm, ntup) = (self.sht.nlm(), self.ntup);
            let nbt = nf * self.nrl;
            self.ser.resize(nbt * nlm, ZERO);
            for b in 0..nbt {
                for (k, &p) in self.serial_pos.iter().enumerate() {
                    self.ser[b * nlm + k] = coeffs[b * ntup + p];
                }
            }
            return Ok(self.sht.synthesis(&self.ser, grid, self.par)?);
        }
        let (ll, gl) = (self.level_len(), self.grid_len());
        for f0 in (0..nf).step_by(self.queue) {
            let q = self.queue.min(nf - f0);
            let nb = q * self.nrl;
            self.legendre_synth_chunk(&coeffs[f0 * ll..(f0 + q) * ll], nb)?;
            self.theta_move(self.theta_alg, nb, true)?;
            self.phi_synth_chunk(&mut grid[f0 * gl..(f0 + q) * gl], nb, 0)?;
        }
        Ok(())
    }

    /// Scalar analysis of a batch: `grid` (`nfields * grid_len()`) to
    /// `coeffs` in the level layout (`nfields * level_len()`).
    /// Collective over the theta ranks of this rank's level block, which
    /// must all pass the same number of fields.
    pub fn analysis(&mut self, grid: &[f64], coeffs: &mut [Complex64]) -> Result<(), DistError> {
        let nf = batch("grid", grid.len(), self.grid_len())?;
        check_len("coeffs", coeffs.len(), nf * self.level_len())?;
        if self.dec.pi_theta() == 1 {
            if self.serial_identity {
                return Ok(self.sht.analysis(grid, coeffs, self.par)?);
            }
            let (nlm, ntup) = (self.sht.nlm(), self.ntup);
            let nbt = nf * self.nrl;
            self.ser.resize(nbt * nlm, ZERO);
            self.sht.analysis(grid, &mut self.ser, self.par)?;
            for b in 0..nbt {
                for (k, &p) in self.serial_pos.iter().enumerate() {
                    coeffs[b * ntup + p] = self.ser[b * nlm + k];
                }
            }
            return Ok(());
        }
        let (ll, gl) = (self.level_len(), self.grid_len());
        for f0 in (0..nf).step_by(self.queue) {
            let q = self.queue.min(nf - f0);
            let nb = q * self.nrl;
            self.phi_anal_chunk(&grid[f0 * gl..(f0 + q) * gl], nb, 0)?;
            self.theta_move(self.theta_alg, nb, false)?;
            self.legendre_anal_chunk(&mut coeffs[f0 * ll..(f0 + q) * ll], nb)?;
        }
        Ok(())
    }

    /// Fields per transposition call of a vector transform: the queue
    /// length counts scalar components, two per vector field (at least one
    /// field per call).
    fn vector_queue(&self) -> usize {
        (self.queue / 2).max(1)
    }

    /// Gathers a level-layout batch (`nb` entries) into the serial m-major
    /// layout in `out` (the 1d scheme).
    fn level_to_serial(&self, level: &[Complex64], nb: usize, out: &mut Vec<Complex64>) {
        let (nlm, ntup) = (self.sht.nlm(), self.ntup);
        out.resize(nb * nlm, ZERO);
        for b in 0..nb {
            for (k, &p) in self.serial_pos.iter().enumerate() {
                out[b * nlm + k] = level[b * ntup + p];
            }
        }
    }

    /// Scatters a serial m-major batch back to the level layout.
    fn serial_to_level(&self, ser: &[Complex64], level: &mut [Complex64]) {
        let (nlm, ntup) = (self.sht.nlm(), self.ntup);
        for b in 0..level.len() / ntup {
            for (k, &p) in self.serial_pos.iter().enumerate() {
                level[b * ntup + p] = ser[b * nlm + k];
            }
        }
    }

    /// Vector synthesis of a batch: the spheroidal and toroidal potentials
    /// `sph`, `tor` in the level layout (`nfields * level_len()` each) to
    /// `vt = u_theta`, `vp = u_phi` (`nfields * grid_len()` each), as
    /// [`Sht::vector_synthesis`] and bit-identical to it. Each theta
    /// transposition moves both components of up to `queue / 2` fields (at
    /// least one). Collective as [`synthesis`](Self::synthesis).
    pub fn vector_synthesis(
        &mut self,
        sph: &[Complex64],
        tor: &[Complex64],
        vt: &mut [f64],
        vp: &mut [f64],
    ) -> Result<(), DistError> {
        let nf = batch("sph", sph.len(), self.level_len())?;
        check_len("tor", tor.len(), nf * self.level_len())?;
        check_len("vt", vt.len(), nf * self.grid_len())?;
        check_len("vp", vp.len(), nf * self.grid_len())?;
        if self.dec.pi_theta() == 1 {
            if self.serial_identity {
                return Ok(self.sht.vector_synthesis(sph, tor, vt, vp, self.par)?);
            }
            let nb = nf * self.nrl;
            let (mut s1, mut s2) = (
                std::mem::take(&mut self.ser),
                std::mem::take(&mut self.ser2),
            );
            self.level_to_serial(sph, nb, &mut s1);
            self.level_to_serial(tor, nb, &mut s2);
            let r = self.sht.vector_synthesis(&s1, &s2, vt, vp, self.par);
            (self.ser, self.ser2) = (s1, s2);
            return Ok(r?);
        }
        let (ll, gl, qv) = (self.level_len(), self.grid_len(), self.vector_queue());
        for f0 in (0..nf).step_by(qv) {
            let q = qv.min(nf - f0);
            let nb = q * self.nrl;
            self.vector_legendre_synth_chunk(
                &sph[f0 * ll..(f0 + q) * ll],
                &tor[f0 * ll..(f0 + q) * ll],
                nb,
            )?;
            self.theta_move(self.theta_alg, 2 * nb, true)?;
            self.phi_synth_chunk(&mut vt[f0 * gl..(f0 + q) * gl], 2 * nb, 0)?;
            self.phi_synth_chunk(&mut vp[f0 * gl..(f0 + q) * gl], 2 * nb, nb)?;
        }
        Ok(())
    }

    /// Vector analysis of a batch: `vt = u_theta`, `vp = u_phi`
    /// (`nfields * grid_len()` each) to the potentials `sph`, `tor` in the
    /// level layout (`nfields * level_len()` each), as
    /// [`Sht::vector_analysis`] and bit-identical to it. Collective as
    /// [`analysis`](Self::analysis).
    pub fn vector_analysis(
        &mut self,
        vt: &[f64],
        vp: &[f64],
        sph: &mut [Complex64],
        tor: &mut [Complex64],
    ) -> Result<(), DistError> {
        let nf = batch("vt", vt.len(), self.grid_len())?;
        check_len("vp", vp.len(), nf * self.grid_len())?;
        check_len("sph", sph.len(), nf * self.level_len())?;
        check_len("tor", tor.len(), nf * self.level_len())?;
        if self.dec.pi_theta() == 1 {
            if self.serial_identity {
                return Ok(self.sht.vector_analysis(vt, vp, sph, tor, self.par)?);
            }
            let nbt = nf * self.nrl * self.sht.nlm();
            let (mut s1, mut s2) = (
                std::mem::take(&mut self.ser),
                std::mem::take(&mut self.ser2),
            );
            s1.resize(nbt, ZERO);
            s2.resize(nbt, ZERO);
            let r = self.sht.vector_analysis(vt, vp, &mut s1, &mut s2, self.par);
            if r.is_ok() {
                self.serial_to_level(&s1, sph);
                self.serial_to_level(&s2, tor);
            }
            (self.ser, self.ser2) = (s1, s2);
            return Ok(r?);
        }
        let (ll, gl, qv) = (self.level_len(), self.grid_len(), self.vector_queue());
        for f0 in (0..nf).step_by(qv) {
            let q = qv.min(nf - f0);
            let nb = q * self.nrl;
            self.phi_anal_chunk(&vt[f0 * gl..(f0 + q) * gl], 2 * nb, 0)?;
            self.phi_anal_chunk(&vp[f0 * gl..(f0 + q) * gl], 2 * nb, nb)?;
            self.theta_move(self.theta_alg, 2 * nb, false)?;
            self.vector_legendre_anal_chunk(
                &mut sph[f0 * ll..(f0 + q) * ll],
                &mut tor[f0 * ll..(f0 + q) * ll],
                nb,
            )?;
        }
        Ok(())
    }

    /// Vector Legendre synthesis of the own orders for `nb` batch entries
    /// into `a`: per order, `u_theta` of the `nb` entries, then `u_phi`.
    fn vector_legendre_synth_chunk(
        &mut self,
        sph: &[Complex64],
        tor: &[Complex64],
        nb: usize,
    ) -> Result<(), DistError> {
        let (nt, ntup, lmax) = (self.sht.ntheta(), self.ntup, self.sht.lmax());
        let orders = self.dec.orders(self.it);
        let (sht, lvl_pos) = (&self.sht, &self.lvl_pos);
        let one = |cm: &mut Vec<Complex64>, (i, out): (usize, &mut [Complex64])| {
            let m = orders[i];
            cm.clear();
            for src in [sph, tor] {
                for b in 0..nb {
                    cm.extend(lvl_pos[i].iter().map(|&p| src[b * ntup + p]));
                }
            }
            let (s, t) = cm.split_at(cm.len() / 2);
            let (ot, op) = out.split_at_mut(nb * nt);
            sht.vector_legendre_synthesis_m(m, s, t, ot, op)
        };
        let a = &mut self.a[..orders.len() * 2 * nb * nt];
        match self.par {
            Parallelism::None => {
                let cm = &mut self.cm;
                a.chunks_mut(2 * nb * nt)
                    .enumerate()
                    .try_for_each(|x| one(cm, x))?;
            }
            Parallelism::Rayon => a
                .par_chunks_mut(2 * nb * nt)
                .enumerate()
                .with_max_len(1)
                .try_for_each_init(
                    || Vec::with_capacity(2 * nb * (lmax + 1)),
                    |cm, x| one(cm, x),
                )?,
        }
        Ok(())
    }

    /// Vector Legendre analysis of the own orders from `a` (`nb` batch
    /// entries of `u_theta`, then of `u_phi`, per order).
    fn vector_legendre_anal_chunk(
        &mut self,
        sph: &mut [Complex64],
        tor: &mut [Complex64],
        nb: usize,
    ) -> Result<(), DistError> {
        let (nt, ntup, lmax) = (self.sht.ntheta(), self.ntup, self.sht.lmax());
        // The synthesis steps leave `cm` cleared; give it its full length.
        self.cm.resize(2 * nb * (lmax + 1), ZERO);
        let orders = self.dec.orders(self.it);
        let a = &self.a[..orders.len() * 2 * nb * nt];
        let (sht, lvl_pos) = (&self.sht, &self.lvl_pos);
        // Per order: S_lm of the nb entries, then T_lm, from u_theta, u_phi.
        let one = |i: usize, input: &[Complex64], st: &mut [Complex64]| {
            let nl = lmax - orders[i] + 1;
            let (s, t) = st[..2 * nb * nl].split_at_mut(nb * nl);
            let (it, ip) = input.split_at(nb * nt);
            sht.vector_legendre_analysis_m(orders[i], it, ip, s, t)
        };
        let put = |sph: &mut [Complex64], tor: &mut [Complex64], i: usize, st: &[Complex64]| {
            let nl = lvl_pos[i].len();
            for b in 0..nb {
                for (k, &p) in lvl_pos[i].iter().enumerate() {
                    sph[b * ntup + p] = st[b * nl + k];
                    tor[b * ntup + p] = st[(nb + b) * nl + k];
                }
            }
        };
        match self.par {
            Parallelism::None => {
                for (i, input) in a.chunks(2 * nb * nt).enumerate() {
                    one(i, input, &mut self.cm)?;
                    put(sph, tor, i, &self.cm);
                }
            }
            Parallelism::Rayon => {
                let per: Vec<Vec<Complex64>> = a
                    .par_chunks(2 * nb * nt)
                    .enumerate()
                    .with_max_len(1)
                    .map(|(i, input)| {
                        let mut st = vec![ZERO; 2 * nb * (lmax - orders[i] + 1)];
                        one(i, input, &mut st).map(|()| st)
                    })
                    .collect::<Result<_, _>>()?;
                for (i, st) in per.iter().enumerate() {
                    put(sph, tor, i, st);
                }
            }
        }
        Ok(())
    }

    /// Legendre synthesis of the own orders for `nb` batch entries into `a`.
    fn legendre_synth_chunk(&mut self, coeffs: &[Complex64], nb: usize) -> Result<(), DistError> {
        let (nt, ntup, lmax) = (self.sht.ntheta(), self.ntup, self.sht.lmax());
        let orders = self.dec.orders(self.it);
        let (sht, lvl_pos) = (&self.sht, &self.lvl_pos);
        let one = |cm: &mut Vec<Complex64>, (i, out): (usize, &mut [Complex64])| {
            let m = orders[i];
            cm.clear();
            for b in 0..nb {
                cm.extend(lvl_pos[i].iter().map(|&p| coeffs[b * ntup + p]));
            }
            sht.legendre_synthesis_m(m, cm, out)
        };
        let a = &mut self.a[..orders.len() * nb * nt];
        match self.par {
            Parallelism::None => {
                let cm = &mut self.cm;
                a.chunks_mut(nb * nt)
                    .enumerate()
                    .try_for_each(|x| one(cm, x))?;
            }
            Parallelism::Rayon => a
                .par_chunks_mut(nb * nt)
                .enumerate()
                .with_max_len(1)
                .try_for_each_init(|| Vec::with_capacity(nb * (lmax + 1)), |cm, x| one(cm, x))?,
        }
        Ok(())
    }

    /// Legendre analysis of the own orders from `a` for `nb` batch entries.
    fn legendre_anal_chunk(
        &mut self,
        coeffs: &mut [Complex64],
        nb: usize,
    ) -> Result<(), DistError> {
        let (nt, ntup, lmax) = (self.sht.ntheta(), self.ntup, self.sht.lmax());
        // The synthesis step leaves `cm` cleared; give it its full length.
        self.cm.resize(nb * (lmax + 1), ZERO);
        let orders = self.dec.orders(self.it);
        let a = &self.a[..orders.len() * nb * nt];
        let (sht, lvl_pos) = (&self.sht, &self.lvl_pos);
        let put = |coeffs: &mut [Complex64], i: usize, cm: &[Complex64]| {
            let nl = lvl_pos[i].len();
            for b in 0..nb {
                for (k, &p) in lvl_pos[i].iter().enumerate() {
                    coeffs[b * ntup + p] = cm[b * nl + k];
                }
            }
        };
        match self.par {
            Parallelism::None => {
                for (i, &m) in orders.iter().enumerate() {
                    let cm = &mut self.cm[..nb * (lmax - m + 1)];
                    sht.legendre_analysis_m(m, &a[i * nb * nt..(i + 1) * nb * nt], cm)?;
                    put(coeffs, i, cm);
                }
            }
            Parallelism::Rayon => {
                let per: Vec<Vec<Complex64>> = a
                    .par_chunks(nb * nt)
                    .zip(orders.par_iter())
                    .with_max_len(1)
                    .map(|(input, &m)| {
                        let mut cm = vec![ZERO; nb * (lmax - m + 1)];
                        sht.legendre_analysis_m(m, input, &mut cm).map(|()| cm)
                    })
                    .collect::<Result<_, _>>()?;
                for (i, cm) in per.iter().enumerate() {
                    put(coeffs, i, cm);
                }
            }
        }
        Ok(())
    }

    /// Phi synthesis of the own latitudes from `b` (`nb` batch entries).
    /// `nb` is the batch stride of `b`; the rows of `grid` are batch
    /// entries `b0..` of it.
    fn phi_synth_chunk(&mut self, grid: &mut [f64], nb: usize, b0: usize) -> Result<(), DistError> {
        let (ntl, nphi, lmax) = (self.ntl, self.sht.nphi(), self.sht.lmax());
        if let Some(lanes) = self.sht.lanes() {
            // As `Sht::phi_synthesis`: eight rows at a time, whose values
            // of one order are neighbours in `b`.
            let (b, slot, simd) = (&self.b, &self.slot, self.sht.simd());
            let block = |work: &mut fft::Work, (blk, out): (usize, &mut [f64])| {
                let (row0, rows) = (blk * fft::LANES, out.len() / nphi);
                let orders = |m: usize| {
                    let at = (slot[m] * nb + b0) * ntl + row0;
                    &b[at..at + rows]
                };
                lanes.c2r(simd, work, lmax + 1, orders, out, rows);
            };
            match self.par {
                Parallelism::None => grid
                    .chunks_mut(fft::LANES * nphi)
                    .enumerate()
                    .for_each(|x| block(&mut self.lane_work, x)),
                Parallelism::Rayon => grid
                    .par_chunks_mut(fft::LANES * nphi)
                    .enumerate()
                    .for_each_init(fft::Work::default, block),
            }
            return Ok(());
        }
        let (b, slot, c2r) = (&self.b, &self.slot, &self.c2r);
        let init = || (vec![ZERO; nphi / 2 + 1], vec![ZERO; c2r.get_scratch_len()]);
        type Bufs = (Vec<Complex64>, Vec<Complex64>);
        let one = |s: &mut Bufs, (row, out): (usize, &mut [f64])| -> Result<(), ShtError> {
            let (bb, j) = (row / ntl, row % ntl);
            let (buf, scr) = s;
            buf.iter_mut().for_each(|x| *x = ZERO);
            for m in 0..=lmax {
                buf[m] = b[(slot[m] * nb + b0 + bb) * ntl + j];
            }
            buf[0].im = 0.0;
            c2r.process_with_scratch(buf, out, scr)
                .map_err(|e| ShtError::Fft(e.to_string()))
        };
        match self.par {
            Parallelism::None => {
                // The plan's buffers: one thread allocates nothing.
                let (_, buf, _, scr) = &mut self.phi_scratch;
                let mut s = (std::mem::take(buf), std::mem::take(scr));
                let res = grid
                    .chunks_mut(nphi)
                    .enumerate()
                    .try_for_each(|x| one(&mut s, x));
                (*buf, *scr) = s;
                res?
            }
            Parallelism::Rayon => grid
                .par_chunks_mut(nphi)
                .enumerate()
                .try_for_each_init(init, one)?,
        }
        Ok(())
    }

    /// Phi analysis of the own latitudes into `b` (`nb` batch entries).
    /// `nb` is the batch stride of `b`; the rows of `grid` go to batch
    /// entries `b0..` of it.
    fn phi_anal_chunk(&mut self, grid: &[f64], nb: usize, b0: usize) -> Result<(), DistError> {
        let (ntl, nphi, mm) = (self.ntl, self.sht.nphi(), self.sht.lmax() + 1);
        let scale = 1.0 / nphi as f64;
        if let (Some(lanes), Parallelism::None) = (self.sht.lanes(), self.par) {
            // As `Sht::phi_analysis`: eight rows at a time, each order's
            // values of the rows straight into their place in `b`.
            let simd = self.sht.simd();
            let (b, slot) = (&mut self.b, &self.slot);
            for (blk, block) in grid.chunks(fft::LANES * nphi).enumerate() {
                let (row0, rows) = (blk * fft::LANES, block.len() / nphi);
                let at = |m: usize| (slot[m] * nb + b0) * ntl + row0;
                lanes.r2c_to(simd, &mut self.lane_work, block, rows, scale, mm, b, at);
            }
            return Ok(());
        }
        let r2c = &self.r2c;
        let nrows = grid.len() / nphi;
        let rows = &mut self.rows[..nrows * mm];
        let init = || {
            (
                vec![0.0; nphi],
                vec![ZERO; nphi / 2 + 1],
                vec![ZERO; r2c.get_scratch_len()],
            )
        };
        type Bufs = (Vec<f64>, Vec<Complex64>, Vec<Complex64>);
        let one = |s: &mut Bufs, (row, out): (&[f64], &mut [Complex64])| -> Result<(), ShtError> {
            let (inp, buf, scr) = s;
            inp.copy_from_slice(row);
            r2c.process_with_scratch(inp, buf, scr)
                .map_err(|e| ShtError::Fft(e.to_string()))?;
            for m in 0..mm {
                out[m] = buf[m] * scale;
            }
            Ok(())
        };
        match self.par {
            Parallelism::None => {
                let (inp, buf, scr, _) = &mut self.phi_scratch;
                let mut s = (
                    std::mem::take(inp),
                    std::mem::take(buf),
                    std::mem::take(scr),
                );
                let res = grid
                    .chunks(nphi)
                    .zip(rows.chunks_mut(mm))
                    .try_for_each(|x| one(&mut s, x));
                (*inp, *buf, *scr) = s;
                res?
            }
            Parallelism::Rayon => match self.sht.lanes() {
                // Blocks of eight rows in parallel, into `rows`.
                Some(lanes) => lanes.r2c_rows_par(self.sht.simd(), grid, rows, mm, scale),
                None => grid
                    .par_chunks(nphi)
                    .zip(rows.par_chunks_mut(mm))
                    .try_for_each_init(init, one)?,
            },
        }
        for (row, vals) in rows.chunks(mm).enumerate() {
            let (bb, j) = (row / ntl, row % ntl);
            for (m, v) in vals.iter().enumerate() {
                self.b[(self.slot[m] * nb + b0 + bb) * ntl + j] = *v;
            }
        }
        Ok(())
    }
}
