//! `backend = "cuda"`: the solve with the fine levels on a GPU
//! ([`multigrid::device::DeviceHierarchy`]).

use crate::config::Config;
use anyhow::Result;
use comm::Communicator;
use gpu::cuda::Device;
use halo::{DeviceField, Field};
use multigrid::device::DeviceHierarchy;
use multigrid::{Hierarchy, SolveReport};
use std::sync::Arc;
use std::time::Instant;

use crate::DeviceTiming;

/// The device hierarchy with the right-hand side and the solution on the
/// device.
pub(crate) struct Run {
    dh: DeviceHierarchy,
    f: DeviceField,
    u: DeviceField,
}

impl Run {
    /// Opens this rank's GPU (`device`, or the rank's index on its machine
    /// modulo the device count) and moves `mg`'s fine levels and `f` onto
    /// it (collective).
    pub(crate) fn new(
        comm: &dyn Communicator,
        cfg: &Config,
        mg: Hierarchy,
        f: &Field,
    ) -> Result<Self> {
        let placement = gpu::place::place(comm, cfg.device)?;
        let dev = Arc::new(Device::open(placement.ordinal)?);
        let dh = DeviceHierarchy::new(comm, mg, dev.clone())?;
        let f = DeviceField::from_host(&dev, f, "right-hand side")?;
        let u = dh.new_field()?;
        Ok(Run { dh, f, u })
    }

    pub(crate) fn hierarchy(&self) -> &Hierarchy {
        self.dh.host()
    }

    pub(crate) fn hierarchy_mut(&mut self) -> &mut Hierarchy {
        self.dh.host_mut()
    }

    /// One MG-PCG solve from zero, complete on return.
    pub(crate) fn solve(&mut self, comm: &dyn Communicator) -> Result<SolveReport> {
        let dev = self.dh.device().clone();
        dev.main()
            .memset_zeros(self.u.data_mut())
            .map_err(|e| anyhow::anyhow!("zeroing the device solution: {e:?}"))?;
        let rep = self.dh.solve_pcg(comm, &mut self.u, &self.f)?;
        dev.synchronize()?;
        Ok(rep)
    }

    /// The solution into `u` and the host hierarchy back.
    pub(crate) fn finish(self, u: &mut Field) -> Result<Hierarchy> {
        self.u.download(u)?;
        Ok(self.dh.into_host())
    }

    /// Times, on fields of its own: `cycles` V-cycles one by one (each
    /// complete on return), and `copies` device-to-device copies of one
    /// fine field into another (the copy bandwidth the V-cycle's floor is
    /// measured against). Collective.
    pub(crate) fn timing(
        &mut self,
        comm: &dyn Communicator,
        cycles: usize,
        copies: usize,
    ) -> Result<DeviceTiming> {
        let dev = self.dh.device().clone();
        let mut u = self.dh.new_field()?;
        let mut vcycle = Vec::with_capacity(cycles);
        for _ in 0..cycles {
            comm.barrier()?;
            dev.synchronize()?;
            let t = Instant::now();
            self.dh.vcycle(comm, &mut u, &self.f)?;
            dev.synchronize()?;
            vcycle.push(t.elapsed().as_secs_f64());
        }
        let bytes = 16.0 * self.dh.layout().padded_len() as f64;
        let mut copy = Vec::with_capacity(copies);
        for _ in 0..copies {
            dev.synchronize()?;
            let t = Instant::now();
            dev.main()
                .memcpy_dtod(self.f.data(), u.data_mut())
                .map_err(|e| anyhow::anyhow!("timing a device copy: {e:?}"))?;
            dev.synchronize()?;
            copy.push(bytes / t.elapsed().as_secs_f64() / 1e9);
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        Ok(DeviceTiming {
            vcycle_ms_all: vcycle.iter().map(|s| 1e3 * s).collect(),
            vcycle_ms: 1e3 * med(vcycle),
            copy_gbs: med(copy),
        })
    }

    /// The GPU's name and the levels on it.
    pub(crate) fn device(&self) -> (Option<String>, usize) {
        (
            Some(self.dh.device().info().name.clone()),
            self.dh.device_levels(),
        )
    }
}
