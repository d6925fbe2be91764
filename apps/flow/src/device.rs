//! The step on an NVIDIA GPU (feature `cuda`): the velocity, pressure and
//! work fields, the geometry the step reads and the fine multigrid levels
//! of the four solves live on the device; the host keeps the coarse levels
//! and sees scalars. The kernels (`kernels/flow.cu`) do the host's
//! operations in the host's order without fused multiply-adds, and
//! [`multigrid::device`] solves with the host's bits, so a step gives the
//! fields of [`Flow::step`](crate::Flow::step) on the host, bit for bit.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use comm::{Communicator, ReduceOp};
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use gpu::cuda::Device;
use halo::{DeviceExchanger, DeviceField, Field, Topology, Transport};
use multigrid::device::{DeviceHierarchy, DeviceOptions};
use multigrid::Hierarchy;

use crate::geometry::Geometry;

const MODULE: &str = "flow_f64";

/// The geometry of one owned point, as the kernels' `struct Span` takes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Span {
    n: [i32; 3],
    g: [i32; 3],
    s: [i64; 2],
    gs: [i64; 2],
}

// SAFETY: `repr(C)` integers laid out as `struct Span` of `kernels/flow.cu`
// (six ints, then four longs at offset 24).
unsafe impl DeviceRepr for Span {}

struct Kernels {
    advection: CudaFunction,
    momentum_rhs: CudaFunction,
    divergence: CudaFunction,
    correct: CudaFunction,
    pressure: CudaFunction,
}

/// Message channels: the flow's own exchangers, then the four
/// hierarchies' (each takes two a device level).
const CH_U: u16 = 12;
const CH_P: u16 = 13;
const CH_MG: u16 = 32;

fn launch(n: usize) -> LaunchConfig {
    gpu::cuda::launch_1d(n.clamp(1, 1 << 22), 256)
}

/// The device half of a [`Flow`](crate::Flow).
pub(crate) struct State {
    dev: Arc<Device>,
    k: Kernels,
    pub(crate) mg_u: Vec<DeviceHierarchy>,
    pub(crate) mg_p: DeviceHierarchy,
    ex3: DeviceExchanger<f64>,
    ex1: DeviceExchanger<f64>,
    u: [DeviceField; 3],
    p: DeviceField,
    ustar: [DeviceField; 3],
    rhs: DeviceField,
    phi: DeviceField,
    nl: [DeviceField; 3],
    nl_old: [DeviceField; 3],
    fluid: [CudaSlice<u8>; 3],
    weight: [CudaSlice<f64>; 3],
    aperture: [CudaSlice<f64>; 3],
    maxes: CudaSlice<u64>,
    /// The solvers' work fields, handed from solve to solve.
    work: Vec<DeviceField>,
    span: Span,
    /// The host's `u`, `p` and `nl` are behind the device's.
    pub(crate) stale: bool,
}

/// What [`State::step`] did: its iterations, the largest change and
/// velocity, and the host seconds spent in the flow's own exchanges.
pub(crate) struct DeviceStep {
    pub its: [usize; 3],
    pub pressure: multigrid::SolveReport,
    pub change: f64,
    pub umax: f64,
    pub halo: f64,
    pub momentum: f64,
    pub projection: f64,
}

/// The device bytes a rank's [`State`] takes for `geom`'s block, the
/// hierarchies, one set of solver work fields (the four solves run one
/// after the other and hand it on) and 17 fields of `padded` values.
pub(crate) fn bytes(geom: &Geometry, hier: &[&Hierarchy], padded: usize) -> u128 {
    let m = geom.region().len() as u128;
    let mg: u128 = hier.iter().map(|h| DeviceHierarchy::bytes(h) as u128).sum();
    let work = hier
        .iter()
        .map(|h| DeviceHierarchy::pcg_bytes(h) as u128)
        .max()
        .unwrap_or(0);
    mg + work + 17 * 8 * padded as u128 + m * (3 + 6 * 8)
}

impl State {
    /// Moves the four hierarchies onto `dev` and uploads the fields and
    /// the geometry (collective). The caller has checked the memory.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        comm: &dyn Communicator,
        dev: Arc<Device>,
        transport: Option<Transport>,
        topo: &Topology,
        geom: &Geometry,
        mg_u: Vec<Hierarchy>,
        mg_p: Hierarchy,
        host: [&Field; 7],
    ) -> Result<Self> {
        let f = |e: &str| {
            dev.function(MODULE, || include_str!("../kernels/flow.cu").to_string(), e)
                .with_context(|| format!("the flow kernel {e}"))
        };
        let k = Kernels {
            advection: f("flow_advection")?,
            momentum_rhs: f("flow_momentum_rhs")?,
            divergence: f("flow_divergence")?,
            correct: f("flow_correct")?,
            pressure: f("flow_pressure")?,
        };
        let mut channel = CH_MG;
        let mut to_dev = |h: Hierarchy| -> Result<DeviceHierarchy> {
            let opts = DeviceOptions { transport, channel };
            let dh = DeviceHierarchy::with_options(comm, h, dev.clone(), opts)?;
            channel += dh.channels();
            Ok(dh)
        };
        let mut dmg_u = Vec::with_capacity(3);
        for h in mg_u {
            dmg_u.push(to_dev(h)?);
        }
        let dmg_p = to_dev(mg_p)?;
        let lay = dmg_p.layout();
        let ex3 = DeviceExchanger::new(comm, topo, &dev, 3, CH_U, transport)?;
        let ex1 = DeviceExchanger::new(comm, topo, &dev, 1, CH_P, transport)?;
        let z = |what: &str| DeviceField::new(&dev, lay, what);
        let up = |h: &Field, what: &str| DeviceField::from_host(&dev, h, what);
        let fluid = |d: usize| {
            let b: Vec<u8> = geom.fluid[d].iter().map(|&x| u8::from(x)).collect();
            dev.upload(&b, "flow fluid points")
        };
        let own = lay.owned;
        let gs = geom.strides();
        let span = Span {
            n: own.map(|x| x as i32),
            g: lay.ghost.map(|x| x as i32),
            s: [lay.strides()[0] as i64, lay.strides()[1] as i64],
            gs: [gs[0] as i64, gs[1] as i64],
        };
        Ok(State {
            k,
            mg_u: dmg_u,
            mg_p: dmg_p,
            ex3,
            ex1,
            u: [
                up(host[0], "flow velocity")?,
                up(host[1], "flow velocity")?,
                up(host[2], "flow velocity")?,
            ],
            p: up(host[3], "flow pressure")?,
            ustar: [z("flow u*")?, z("flow u*")?, z("flow u*")?],
            rhs: z("flow right-hand side")?,
            phi: z("flow pressure correction")?,
            nl: [
                up(host[4], "flow advective term")?,
                up(host[5], "flow advective term")?,
                up(host[6], "flow advective term")?,
            ],
            nl_old: [
                z("flow advective term")?,
                z("flow advective term")?,
                z("flow advective term")?,
            ],
            fluid: [fluid(0)?, fluid(1)?, fluid(2)?],
            weight: [
                dev.upload(&geom.weight[0], "flow force weights")?,
                dev.upload(&geom.weight[1], "flow force weights")?,
                dev.upload(&geom.weight[2], "flow force weights")?,
            ],
            aperture: [
                dev.upload(&geom.aperture[0], "flow apertures")?,
                dev.upload(&geom.aperture[1], "flow apertures")?,
                dev.upload(&geom.aperture[2], "flow apertures")?,
            ],
            maxes: dev.alloc_zeros(2, "flow maxima")?,
            work: Vec::new(),
            span,
            dev,
            stale: false,
        })
    }

    /// The device.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The halo transport.
    pub(crate) fn transport(&self) -> Transport {
        self.ex1.transport()
    }

    /// The velocity, pressure and advective term into `host` (the order
    /// of [`Flow::checkpoint_fields`](crate::Flow::checkpoint_fields)).
    pub(crate) fn download(&mut self, host: [&mut Field; 7]) -> Result<()> {
        let [a, b, c, d, e, f, g] = host;
        self.u[0].download(a)?;
        self.u[1].download(b)?;
        self.u[2].download(c)?;
        self.p.download(d)?;
        self.nl[0].download(e)?;
        self.nl[1].download(f)?;
        self.nl[2].download(g)?;
        self.stale = false;
        Ok(())
    }

    /// The host's `host` fields onto the device (after the host changed
    /// them).
    pub(crate) fn upload(&mut self, host: [&Field; 7]) -> Result<()> {
        self.u[0].upload(host[0])?;
        self.u[1].upload(host[1])?;
        self.u[2].upload(host[2])?;
        self.p.upload(host[3])?;
        self.nl[0].upload(host[4])?;
        self.nl[1].upload(host[5])?;
        self.nl[2].upload(host[6])?;
        Ok(())
    }

    fn points(&self) -> usize {
        self.span.n.iter().map(|&x| x as usize).product()
    }

    /// One step as [`Flow::step`](crate::Flow::step) (collective):
    /// `p`: the solver's parameters, `h` the spacing, `ab2` whether the
    /// advective term is Adams-Bashforth 2 (else forward Euler), `step` the
    /// number of the step (for errors).
    pub(crate) fn step(
        &mut self,
        comm: &dyn Communicator,
        p: &crate::solver::Params,
        h: f64,
        ab2: bool,
        step: u64,
    ) -> Result<DeviceStep> {
        let t0 = Instant::now();
        let mut halo = 0.0;
        let stream = self.dev.main().clone();
        let span = self.span;
        let n = self.points();
        let dt = p.dt;
        {
            let t = Instant::now();
            let [a, b, c] = &mut self.u;
            self.ex3.exchange(comm, &mut [a, b, c])?;
            self.ex1.exchange(comm, &mut [&mut self.p])?;
            halo += t.elapsed().as_secs_f64();
        }
        if p.navier_stokes {
            std::mem::swap(&mut self.nl, &mut self.nl_old);
            let ih2 = 0.5 / h;
            for d in 0..3 {
                let dd = d as i32;
                let [u0, u1, u2] = &self.u;
                let mut a = stream.launch_builder(&self.k.advection);
                a.arg(self.nl[d].data_mut())
                    .arg(u0.data())
                    .arg(u1.data())
                    .arg(u2.data());
                a.arg(&self.fluid[d]).arg(&dd).arg(&ih2).arg(&span);
                // SAFETY: the arguments match `flow_advection`; every field
                // has the hierarchy's layout (ghost width >= 1, which the
                // stencil's reads need) and `fluid` covers the block and one
                // ghost layer, as `span` describes.
                unsafe { a.launch(launch(n)) }.context("flow_advection")?;
            }
        }
        let mode: i32 = match (p.navier_stokes, ab2) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        let mut its = [0usize; 3];
        for d in 0..3 {
            let (dd, f) = (d as i32, p.force[d]);
            let mut a = stream.launch_builder(&self.k.momentum_rhs);
            a.arg(self.rhs.data_mut())
                .arg(self.u[d].data())
                .arg(self.p.data())
                .arg(self.nl[d].data())
                .arg(self.nl_old[d].data());
            a.arg(&self.fluid[d]).arg(&self.weight[d]);
            a.arg(&dd).arg(&mode).arg(&dt).arg(&h).arg(&f).arg(&span);
            // SAFETY: as `flow_advection`; `weight` covers the block and
            // its ghost layer like `fluid`.
            unsafe { a.launch(launch(n)) }.context("flow_momentum_rhs")?;
            // Warm start from u^n.
            stream
                .memcpy_dtod(self.u[d].data(), self.ustar[d].data_mut())
                .context("copying u^n")?;
            let mg = &mut self.mg_u[d];
            mg.give_work(std::mem::take(&mut self.work))?;
            let rep = mg
                .solve_pcg(comm, &mut self.ustar[d], &self.rhs)
                .with_context(|| format!("step {step}: the momentum solve of component {d}"))?;
            self.work = mg.take_work();
            if !rep.converged {
                bail!(
                    "the momentum solve of component {d} did not converge in step {step} ({} iterations, relative residual {:.3e})",
                    rep.iterations,
                    rep.residuals.last().copied().unwrap_or(f64::NAN)
                );
            }
            its[d] = rep.iterations;
        }
        self.dev.synchronize()?;
        let t1 = Instant::now();
        {
            let t = Instant::now();
            let [a, b, c] = &mut self.ustar;
            self.ex3.exchange(comm, &mut [a, b, c])?;
            halo += t.elapsed().as_secs_f64();
        }
        let scale = -1.0 / (h * dt);
        {
            let [u0, u1, u2] = &self.ustar;
            let [a0, a1, a2] = &self.aperture;
            let mut a = stream.launch_builder(&self.k.divergence);
            a.arg(self.rhs.data_mut())
                .arg(u0.data())
                .arg(u1.data())
                .arg(u2.data());
            a.arg(a0).arg(a1).arg(a2).arg(&scale).arg(&span);
            // SAFETY: as `flow_advection`; the apertures cover the block
            // and its ghost layer (the upper faces read lie in it).
            unsafe { a.launch(launch(n)) }.context("flow_divergence")?;
        }
        stream
            .memset_zeros(self.phi.data_mut())
            .context("zeroing phi")?;
        self.mg_p.give_work(std::mem::take(&mut self.work))?;
        let rep = self
            .mg_p
            .solve_pcg(comm, &mut self.phi, &self.rhs)
            .with_context(|| format!("step {step}: the pressure solve"))?;
        self.work = self.mg_p.take_work();
        if !rep.converged {
            bail!(
                "the pressure solve did not converge in step {step} ({} iterations, relative residual {:.3e})",
                rep.iterations,
                rep.residuals.last().copied().unwrap_or(f64::NAN)
            );
        }
        {
            let t = Instant::now();
            self.ex1.exchange(comm, &mut [&mut self.phi])?;
            halo += t.elapsed().as_secs_f64();
        }
        stream
            .memset_zeros(&mut self.maxes)
            .context("zeroing the maxima")?;
        for d in 0..3 {
            let dd = d as i32;
            let mut a = stream.launch_builder(&self.k.correct);
            a.arg(self.u[d].data_mut())
                .arg(self.ustar[d].data())
                .arg(self.phi.data());
            a.arg(&self.fluid[d]).arg(&dd).arg(&dt).arg(&h);
            a.arg(&mut self.maxes).arg(&span);
            // SAFETY: as `flow_advection`; `maxes` holds two words, and the
            // launch's blocks are of 256 threads (a multiple of 32, which
            // the kernel's reduction needs).
            unsafe { a.launch(launch(n)) }.context("flow_correct")?;
        }
        {
            let len = self.p.layout().padded_len() as i64;
            let (c, rot) = (p.nu * dt, i32::from(p.rotational));
            let mut a = stream.launch_builder(&self.k.pressure);
            a.arg(self.p.data_mut())
                .arg(self.phi.data())
                .arg(self.rhs.data())
                .arg(&c)
                .arg(&rot)
                .arg(&len);
            // SAFETY: the arguments match `flow_pressure`; the three
            // arrays have the same padded length `len`.
            unsafe { a.launch(launch(len as usize)) }.context("flow_pressure")?;
        }
        let words = self.dev.download(&self.maxes)?;
        let mut m = [f64::from_bits(words[0]), f64::from_bits(words[1])];
        comm.allreduce_f64(&mut m, ReduceOp::Max)?;
        self.stale = true;
        let t2 = Instant::now();
        Ok(DeviceStep {
            its,
            pressure: rep,
            change: m[0],
            umax: m[1],
            halo,
            momentum: (t1 - t0).as_secs_f64(),
            projection: (t2 - t1).as_secs_f64(),
        })
    }
}
