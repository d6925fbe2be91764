//! The CUDA backend (feature `cuda`, `--backend cuda`).
//!
//! The field and its scratch copies live on the device as
//! [`halo::DeviceField`]s; the halo goes through the same
//! [`halo::Exchanger`] as on the host, packed and unpacked by kernels
//! (host-staged between ranks, device-to-device for periodic
//! self-neighbours), so any number of ranks may share a GPU. The stencil is
//! one fused kernel per order (`kernels/heat3d.cu`, compiled by NVRTC for
//! the radius in use) that performs the host sweep's operations in the same
//! order without contraction, so the device gives the host's bits.
//!
//! **Overlap.** After `post` (pack, send, and the periodic self-copies
//! queued on the `main` stream) the interior sweep runs on the device's
//! `side` stream while the messages travel and `main` unpacks and sweeps
//! the shell; `main` then waits for `side`. The interior reads no ghost
//! cell that a message fills (only owned cells and self-copied ghosts,
//! which `side` waits for), and the unpack writes only such ghosts, so the
//! two never touch the same memory, and blocking and overlapped steps give
//! the same bits.
//!
//! **Step times** are measured with device events on `main` around each
//! step (the host's phase timers would only time kernel launches), so the
//! report's `step` is device time; `post` and `wait` stay host times of the
//! exchange.

use crate::config::{Config, GpuExchange, Integrator, Mode};
use crate::StepTimes;
use anyhow::{anyhow, Context, Result};
use comm::Communicator;
use dfft::cuda::{DeviceComplex, DeviceFft3d, Route};
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use gpu::cuda::{launch_1d, Device, StepTimer};
use halo::{
    DeviceExchanger, DeviceField, DeviceRegion, Field, FieldLayout, Region, Topology, Transport,
};
use std::sync::Arc;
use std::time::Instant;
use stencil::device::DeviceStencil;
use stencil::Sweep;

/// The geometry of a step: layout, owned region, interior, shell.
pub(crate) type Geometry<'a> = (&'a FieldLayout, &'a Region, &'a Region, &'a [Region]);

/// The Euler steps one pass of the stencil advances (`steps_per_pass`)
/// for a run of `ranks` ranks in which one rank that is its own periodic
/// neighbour reads across its faces (`wrap`, see
/// [`stencil::device::reads_across_faces`]). Two (`fd_two`) need `wrap` and
/// order [`stencil::device::TWO_STEP_ORDER`] besides
/// [`crate::multi_step_unmet`]'s conditions; the default takes two where
/// possible from [`stencil::device::AUTO_TWO_STEP_CELLS`] owned cells.
fn steps_per_pass(cfg: &Config, ranks: usize, wrap: bool) -> Result<usize> {
    let mut unmet = crate::multi_step_unmet(cfg);
    if !wrap {
        unmet.insert(
            0,
            format!(
                "one rank that is its own periodic neighbour and reads across its faces (this run: {ranks} rank(s), gpu_periodic {:?}, owned cells at least the radius along every axis)",
                cfg.stencil.gpu_periodic
            ),
        );
    }
    if cfg.order != stencil::device::TWO_STEP_ORDER {
        unmet.push(format!(
            "order {} (this run: {})",
            stencil::device::TWO_STEP_ORDER,
            cfg.order
        ));
    }
    let cells: usize = cfg.shape().iter().product();
    let auto = stencil::device::auto_steps(cells);
    crate::resolve_steps_per_pass(
        cfg.stencil.steps_per_pass,
        &unmet,
        auto,
        stencil::device::MAX_STEPS_PER_PASS,
        "a GPU",
    )
}

/// heat3d's own kernels: the Runge-Kutta combinations and the spectral
/// scaling.
struct Kernels {
    rk: CudaFunction,
    scale: CudaFunction,
}

/// The spectral operator on the device.
struct Spectral {
    plan: DeviceFft3d,
    spec: CudaSlice<DeviceComplex>,
    factor: CudaSlice<f64>,
}

/// The device state of one rank.
pub(crate) struct DeviceSolver {
    dev: Arc<Device>,
    u: DeviceField,
    a: Option<DeviceField>,
    b: Option<DeviceField>,
    c: Option<DeviceField>,
    k: Kernels,
    /// The finite-difference sweeps (none for the spectral operator).
    stencil: Option<DeviceStencil>,
    /// The smallest step that wrote a non-finite value (`i32::MAX`: none).
    bad: CudaSlice<i32>,
    euler: Sweep,
    lap: Sweep,
    spectral: Option<Spectral>,
    /// The halo exchange (finite differences).
    ex: Option<DeviceExchanger<f64>>,
    step: i32,
    /// Device time of each pass.
    timer: StepTimer,
    /// The steps each timed pass advanced (1 or 2).
    per_pass: Vec<usize>,
}

fn gpu_err(e: gpu::GpuError) -> anyhow::Error {
    anyhow!(e)
}

/// Opens this rank's device ([`gpu::place`]) and checks, before anything
/// is allocated, that the memory this rank and the other ranks on its GPU
/// need is free.
pub(crate) fn preflight(
    comm: &dyn Communicator,
    cfg: &Config,
    layout: &FieldLayout,
    rk: bool,
    spectral: bool,
) -> Result<Arc<Device>> {
    let at = gpu::place::place(comm, cfg.device)?;
    let dev = at.open().map_err(gpu_err)?;
    let fields = if spectral {
        1
    } else if rk {
        4
    } else {
        2
    };
    let mut bytes = fields * layout.padded_len() * 8;
    if spectral {
        // This rank's share of the half spectrum: the spectrum and its
        // factors, and on several ranks the transform's two work buffers
        // and its message buffers (about two spectra each).
        let s = cfg.shape();
        let share = (s[0] * s[1] * (s[2] / 2 + 1)).div_ceil(comm.size());
        bytes += share * (16 + 8);
        if comm.size() > 1 {
            bytes += share * 4 * 16;
        }
    }
    gpu::place::check_memory(comm, &dev, at, bytes as u128, || {
        format!(
            "the {:?} grid ({} field(s){})",
            cfg.shape(),
            fields,
            if spectral { " and the spectrum" } else { "" }
        )
    })
    .context("use fewer cells, more GPUs, or the cpu backend")?;
    Ok(Arc::new(dev))
}

impl DeviceSolver {
    /// Uploads the initial field to `dev` (from [`preflight`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dev: Arc<Device>,
        comm: &dyn Communicator,
        topo: &Topology,
        cfg: &Config,
        u0: &Field<f64>,
        (euler, lap): (&Sweep, &Sweep),
        dt: f64,
        rk: bool,
        spectral: bool,
    ) -> Result<Self> {
        let layout = u0.layout();
        let cells: usize = cfg.shape().iter().product();
        let field = |name: &str| -> Result<DeviceField> {
            DeviceField::new(&dev, layout, name).map_err(|e| {
                anyhow!(e).context(format!(
                    "allocating the {:?} grid ({cells} cells over {} rank(s)) on the device",
                    cfg.shape(),
                    comm.size()
                ))
            })
        };
        let mut u = field("field u")?;
        u.upload(u0).map_err(gpu_err)?;
        let a = if spectral {
            None
        } else {
            Some(field("scratch a")?)
        };
        let (b, c) = if rk {
            (Some(field("stage b")?), Some(field("stage c")?))
        } else {
            (None, None)
        };
        let src = crate::kernels::source;
        let f = |name: &str| {
            dev.function(crate::kernels::MODULE, src, name)
                .map_err(gpu_err)
        };
        let k = Kernels {
            rk: f("rk_combine")?,
            scale: f("spectral_scale")?,
        };
        let bad = dev.upload(&[i32::MAX], "flag").map_err(gpu_err)?;
        let stencil = if spectral {
            None
        } else {
            // One rank that is its own face neighbour on every axis.
            let me = topo.rank();
            let nbs = topo.neighbors();
            let own_faces = (0..3).all(|d| {
                [-1, 1].iter().all(|&side| {
                    let mut o = [0isize; 3];
                    o[d] = side;
                    nbs.iter().any(|n| n.offset == o && n.rank == me)
                })
            });
            let self_periodic = nbs.iter().all(|n| n.rank == me) && own_faces;
            let opts = cfg.stencil;
            let wrap =
                stencil::device::reads_across_faces(&opts, cfg.order, &layout, self_periodic);
            let two = steps_per_pass(cfg, comm.size(), wrap)? == 2;
            Some(
                DeviceStencil::new(&dev, layout, cfg.order, &opts, self_periodic, two)
                    .context("setting up the device stencil")?,
            )
        };
        let spectral = if spectral {
            Some(Self::spectral(&dev, comm, topo, cfg, dt)?)
        } else {
            None
        };
        // Collective: every rank builds the exchanger here.
        let ex = match spectral {
            Some(_) => None,
            None => {
                let want = match cfg.gpu_exchange {
                    GpuExchange::Auto => None,
                    GpuExchange::Direct => Some(Transport::Direct),
                    GpuExchange::Staged => Some(Transport::HostStaged),
                    GpuExchange::Nccl => Some(Transport::Nccl),
                };
                Some(
                    DeviceExchanger::new(comm, topo, &dev, 1, 0, want)
                        .map_err(|e| anyhow!(e).context("setting up the device halo exchange"))?,
                )
            }
        };
        Ok(DeviceSolver {
            dev,
            u,
            a,
            b,
            c,
            k,
            stencil,
            bad,
            euler: euler.clone(),
            lap: lap.clone(),
            spectral,
            ex,
            step: 0,
            timer: StepTimer::default(),
            per_pass: vec![],
        })
    }

    fn spectral(
        dev: &Arc<Device>,
        comm: &dyn Communicator,
        topo: &Topology,
        cfg: &Config,
        dt: f64,
    ) -> Result<Spectral> {
        let input = crate::spectral_input(comm, cfg, topo.decomposition())?;
        // The spectrum stays where the last transform leaves it (fewest
        // reshapes); the factors are laid out to match.
        let opts = dfft::Options {
            output: dfft::Output::Transposed,
            ..dfft::Options::default()
        };
        // The reshapes travel as the halo would: through host buffers or
        // NCCL when asked, device to device where they can otherwise (and
        // `direct` is an error where they cannot, as for the halo).
        let route = match cfg.gpu_exchange {
            GpuExchange::Staged => Route::Staged,
            GpuExchange::Nccl => Route::Nccl,
            GpuExchange::Auto | GpuExchange::Direct => Route::Auto,
        };
        let plan = DeviceFft3d::with_route(comm, dev, &input, opts, route)?;
        if cfg.gpu_exchange == GpuExchange::Direct && plan.reshapes() > 0 && !plan.is_direct() {
            return Err(anyhow!(
                "gpu_exchange = direct: the spectral reshapes cannot go device to device between \
                 these {} ranks ({} communicator; the ranks must be threads of one process or \
                 processes between which the driver allows CUDA IPC) (valid here: auto, staged, \
                 nccl)",
                comm.size(),
                comm.backend()
            ));
        }
        // cuFFT leaves both transforms unnormalised.
        let n: usize = cfg.shape().iter().product();
        let factor = crate::spectral_factors(comm, cfg, plan.output_layout(), dt, n as f64);
        Ok(Spectral {
            spec: dev
                .alloc_zeros(plan.output_len(), "spectrum")
                .map_err(gpu_err)?,
            factor: dev.upload(&factor, "spectral factors").map_err(gpu_err)?,
            plan,
        })
    }

    /// The device, for the report.
    pub(crate) fn device(&self) -> &Device {
        &self.dev
    }

    /// How each reshape of the spectral transform travels (`DeviceDirect`,
    /// `DeviceStaged` or `DeviceNccl`, one per reshape; empty without
    /// one).
    pub(crate) fn reshape_protocols(&self) -> Vec<String> {
        self.spectral
            .as_ref()
            .map_or(Vec::new(), |s| s.plan.protocols())
    }

    /// How the halo travels between ranks (finite differences).
    pub(crate) fn transport(&self) -> Option<Transport> {
        self.ex.as_ref().map(DeviceExchanger::transport)
    }

    /// Copies the field to the host mirror (after all queued work).
    pub(crate) fn download(&self, u: &mut Field<f64>) -> Result<()> {
        self.dev.synchronize().map_err(gpu_err)?;
        self.u.download(u).map_err(gpu_err)
    }

    /// The first step that wrote a non-finite value (the spectral step: the
    /// first that started from one), if any.
    pub(crate) fn first_bad_step(&self) -> Result<Option<usize>> {
        self.dev.synchronize().map_err(gpu_err)?;
        let b = self.dev.download(&self.bad).map_err(gpu_err)?[0];
        Ok((b != i32::MAX).then_some(b as usize))
    }

    /// Device seconds of each step so far: a pass of two steps counts
    /// half its time for each.
    pub(crate) fn step_seconds(&mut self) -> Result<Vec<f64>> {
        let per_pass = &self.per_pass;
        let secs = self.timer.seconds().map_err(gpu_err)?;
        Ok(secs
            .iter()
            .zip(per_pass)
            .flat_map(|(&t, &n)| std::iter::repeat_n(t / n as f64, n))
            .collect())
    }

    /// The most steps one call of [`DeviceSolver::step`] may advance.
    pub(crate) fn steps_per_pass(&self) -> usize {
        self.stencil
            .as_ref()
            .map_or(1, DeviceStencil::steps_per_pass)
    }

    /// `dst = sweep(src)` on the owned cells with the halo of `src`
    /// exchanged first (blocking) or around the interior (overlap).
    fn apply(
        &mut self,
        (comm, mode): (&dyn Communicator, Mode),
        geo: Geometry<'_>,
        rk: bool,
        which: (Slot, Slot),
        t: &mut StepTimes,
    ) -> Result<()> {
        let (_, _, interior, shell) = geo;
        let st = self
            .stencil
            .as_ref()
            .expect("finite differences build a stencil");
        let sweep = if rk { &self.lap } else { &self.euler };
        let (step, bad) = (self.step, &mut self.bad);
        let ex = self
            .ex
            .as_mut()
            .expect("finite differences build an exchanger");
        let (src, dst) = two(&mut self.u, &mut self.a, &mut self.b, which);
        let t0 = Instant::now();
        match mode {
            Mode::Blocking => {
                // One self-periodic rank's stencil reads across its faces
                // at the periodic images: no ghost is read.
                if !st.wraps() {
                    ex.exchange(comm, &mut [&mut *src])?;
                }
                t[2] += t0.elapsed().as_secs_f64();
                st.sweep_owned(sweep, src, dst, step, bad)
                    .map_err(gpu_err)?;
            }
            Mode::Overlap => {
                // `post` packs (device to host), sends, and queues the
                // periodic self-copies on `main`; the interior, which may
                // read those ghosts (`Topology::interior`), starts on `side`
                // after them and runs while the messages travel and `main`
                // unpacks.
                let pending = ex.post(comm, &mut [&mut *src])?;
                let t1 = Instant::now();
                t[0] += (t1 - t0).as_secs_f64();
                let wait = &mut t[2];
                st.sweep_overlapped(sweep, src, dst, (interior, shell), step, bad, |src| {
                    let r = pending.finish(&mut [src]).map_err(anyhow::Error::from);
                    *wait += t1.elapsed().as_secs_f64();
                    r
                })?;
            }
        }
        Ok(())
    }

    /// One Runge-Kutta combination on the owned cells (see `rk_combine`).
    fn combine(
        &mut self,
        mode: i32,
        h: f64,
        g: f64,
        owned: &Region,
        layout: &FieldLayout,
    ) -> Result<()> {
        let (u, a, b, c) = (
            &mut self.u,
            self.a.as_mut().expect("rk4 allocates a"),
            self.b.as_ref().expect("rk4 allocates b"),
            self.c.as_mut().expect("rk4 allocates c"),
        );
        let s = layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let bx = DeviceRegion::from(owned);
        let main = self.dev.main();
        let mut l = main.launch_builder(&self.k.rk);
        l.arg(&mode)
            .arg(u.data_mut())
            .arg(a.data_mut())
            .arg(b.data())
            .arg(c.data_mut())
            .arg(&h)
            .arg(&g)
            .arg(&bx)
            .arg(&s0)
            .arg(&s1)
            .arg(&self.step)
            .arg(&mut self.bad);
        // SAFETY: the arguments match `rk_combine`; every field has this
        // layout and the region is its owned cells.
        unsafe { l.launch(launch_1d(owned.len().min(1 << 22), 256)) }
            .map_err(|e| anyhow!("launching rk_combine: {e:?}"))?;
        Ok(())
    }

    fn spectral_step(&mut self, comm: &dyn Communicator) -> Result<()> {
        let sp = self.spectral.as_mut().expect("spectral operator");
        sp.plan
            .forward(comm, &self.u.data().slice(..), &mut sp.spec)?;
        let n = sp.plan.output_len() as i64;
        let main = self.dev.main();
        let mut l = main.launch_builder(&self.k.scale);
        l.arg(&mut sp.spec)
            .arg(&sp.factor)
            .arg(&n)
            .arg(&self.step)
            .arg(&mut self.bad);
        // SAFETY: both buffers hold `n` values.
        unsafe { l.launch(launch_1d(n as usize, 256)) }
            .map_err(|e| anyhow!("launching spectral_scale: {e:?}"))?;
        sp.plan
            .backward(comm, &mut sp.spec, &mut self.u.data_mut().slice_mut(..))?;
        Ok(())
    }

    /// `steps` steps (Euler, RK4 or spectral; 2 only up to
    /// [`DeviceSolver::steps_per_pass`], in one pass), timed with device
    /// events.
    pub(crate) fn step(
        &mut self,
        steps: usize,
        x: (&dyn Communicator, Mode),
        geo: Geometry<'_>,
        integrator: Integrator,
        dt: f64,
        t: &mut StepTimes,
    ) -> Result<()> {
        if steps == 0 || steps > self.steps_per_pass() {
            return Err(anyhow!(
                "{steps} steps in one device pass (this run advances 1 to {})",
                self.steps_per_pass()
            ));
        }
        self.timer.begin(&self.dev).map_err(gpu_err)?;
        self.per_pass.push(steps);
        if steps == 2 {
            let st = self.stencil.as_ref().expect("two steps load fd_two");
            let (src, dst) = two(&mut self.u, &mut self.a, &mut self.b, (Slot::U, Slot::A));
            st.two_steps(&self.euler, src, dst, self.step + 1, &mut self.bad)
                .map_err(gpu_err)?;
            std::mem::swap(&mut self.u, self.a.as_mut().expect("euler allocates a"));
            self.step += 2;
            self.timer.end(&self.dev).map_err(gpu_err)?;
            return Ok(());
        }
        self.step += 1;
        if self.spectral.is_some() {
            self.spectral_step(x.0)?;
        } else {
            let (comm, mode) = x;
            let (layout, owned) = (geo.0, geo.1);
            match integrator {
                Integrator::Euler => {
                    self.apply((comm, mode), geo, false, (Slot::U, Slot::A), t)?;
                    std::mem::swap(&mut self.u, self.a.as_mut().expect("euler allocates a"));
                }
                Integrator::Rk4 => {
                    self.apply((comm, mode), geo, true, (Slot::U, Slot::B), t)?;
                    self.combine(0, 0.5 * dt, 0.0, owned, layout)?;
                    for (weight, next) in [(2.0, 0.5 * dt), (2.0, dt)] {
                        self.apply((comm, mode), geo, true, (Slot::A, Slot::B), t)?;
                        self.combine(1, next, weight, owned, layout)?;
                    }
                    self.apply((comm, mode), geo, true, (Slot::A, Slot::B), t)?;
                    self.combine(2, dt / 6.0, 0.0, owned, layout)?;
                }
            }
        }
        self.timer.end(&self.dev).map_err(gpu_err)?;
        Ok(())
    }
}

/// Which device field an operand is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    U,
    A,
    B,
}

/// Two distinct fields, the first read and exchanged, the second written.
fn two<'a>(
    u: &'a mut DeviceField,
    a: &'a mut Option<DeviceField>,
    b: &'a mut Option<DeviceField>,
    (src, dst): (Slot, Slot),
) -> (&'a mut DeviceField, &'a mut DeviceField) {
    let a = a.as_mut().expect("scratch a");
    match (src, dst) {
        (Slot::U, Slot::A) => (u, a),
        (Slot::U, Slot::B) => (u, b.as_mut().expect("stage b")),
        (Slot::A, Slot::B) => (a, b.as_mut().expect("stage b")),
        other => unreachable!("no step uses {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PerAxis, StencilOptions};

    #[test]
    fn two_steps_a_pass_only_where_possible() {
        let cfg = |order: usize, n: usize, mode: Mode, k: usize| Config {
            order,
            n: PerAxis::All(n),
            mode,
            stencil: StencilOptions {
                steps_per_pass: k,
                ..StencilOptions::default()
            },
            ..Config::default()
        };
        let b = Mode::Blocking;
        // The default: two at order 2 from 2^24 cells, one elsewhere.
        for order in (2..=20).step_by(2) {
            for n in [128, 256, 512] {
                let want = if order == 2 && n >= 256 { 2 } else { 1 };
                let got = steps_per_pass(&cfg(order, n, b, 0), 1, true).unwrap();
                assert_eq!(got, want, "order {order}, {n}^3");
            }
        }
        let big = |mode, k| cfg(2, 512, mode, k);
        assert_eq!(steps_per_pass(&big(Mode::Overlap, 0), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&big(b, 0), 2, false).unwrap(), 1);
        let rk = |order, mode, k| Config {
            integrator: Integrator::Rk4,
            ..cfg(order, 512, mode, k)
        };
        assert_eq!(steps_per_pass(&rk(2, b, 0), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&big(b, 1), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&cfg(2, 8, b, 2), 1, true).unwrap(), 2);
        // Asking for two where they are not possible names every reason.
        let e = steps_per_pass(&rk(4, Mode::Overlap, 2), 2, false)
            .unwrap_err()
            .to_string();
        for want in [
            "steps_per_pass = 2 needs",
            "this run: 2 rank(s)",
            "blocking mode (this run: Overlap)",
            "the Euler finite-difference step",
            "order 2 (this run: 4)",
        ] {
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
        let e = steps_per_pass(&big(b, 3), 1, true).unwrap_err().to_string();
        assert!(
            e.contains("= 3") && e.contains("on a GPU (valid: 1 to 2"),
            "{e}"
        );
    }
}
