//! The device hierarchy gives the host's bits: MG-PCG's iterates, residual
//! history and iteration count, and single V-cycles, on constant and
//! variable coefficients, with a shift, closed faces and a singular
//! problem, on 1, 2 and 4 ranks sharing one GPU (the coarse levels gathered
//! onto fewer ranks run on the host). Skipped, with a note, where no CUDA
//! device is present (`cargo xtask gpu` runs it on one and fails on a
//! skip). Both halo transports: direct on the device and host-staged.
#![cfg(feature = "cuda")]

use comm::{local, ProcessGrid};
use gpu::cuda::Device;
use halo::Transport;
use halo::{DeviceField, Field};
use multigrid::device::{DeviceHierarchy, DeviceOptions};
use multigrid::{Boundary, Hierarchy, MgError, MgOptions, Poisson};
use std::sync::Arc;

const D: Boundary = Boundary::Dirichlet;
const N: Boundary = Boundary::Neumann;
const P: Boundary = Boundary::Periodic;

fn device() -> Option<Arc<Device>> {
    match Device::open(0) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            None
        }
    }
}

/// The problems: constant Dirichlet; mixed walls with variable faces (a
/// closed plane with holes) and a shift; periodic and singular with
/// variable faces (the pressure problem of a porous bed).
fn problems() -> Vec<(&'static str, Poisson)> {
    let beta = |d: usize, q: [usize; 3]| {
        if d == 0 && q[0] == 8 && !(q[1] + q[2]).is_multiple_of(3) {
            return 0.0;
        }
        0.5 + 0.1 * ((q[0] * 7 + q[1] * 13 + q[2] * 5 + d * 3) % 11) as f64
    };
    vec![
        (
            "constant, Dirichlet",
            Poisson::new([32, 32, 32], [1.0; 3], [D; 3]).unwrap(),
        ),
        (
            "variable faces and shift, mixed walls",
            Poisson::with_faces([16, 16, 24], [1.0, 0.8, 1.2], [[D, N], [P, P], [N, D]])
                .unwrap()
                .with_coefficient(Arc::new(beta))
                .with_shift(Arc::new(|q| 0.25 * ((q[0] + 2 * q[1] + q[2]) % 4) as f64)),
        ),
        (
            "variable faces, periodic, singular",
            Poisson::new([32, 16, 16], [1.0; 3], [P; 3])
                .unwrap()
                .with_coefficient(Arc::new(move |d, q| 0.2 + beta(d, q))),
        ),
    ]
}

/// A right-hand side of zero mean (for the singular problem) with some
/// roughness.
fn rhs(q: [usize; 3]) -> f64 {
    let v = ((q[0] * 3 + q[1] * 5 + q[2] * 7) % 13) as f64 - 6.0;
    v + (0.3 * q[0] as f64).sin()
}

fn bits(f: &Field) -> Vec<u64> {
    f.owned_values(0).iter().map(|v| v.to_bits()).collect()
}

#[test]
fn device_pcg_and_vcycles_give_the_host_bits() {
    let Some(dev) = device() else { return };
    for (name, p) in problems() {
        for (ranks, transport) in [
            (1, Transport::Direct),
            (2, Transport::Direct),
            (2, Transport::HostStaged),
            (4, Transport::Direct),
            (4, Transport::HostStaged),
        ] {
            let out = local::run(ranks, |c| {
                let grid = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
                let levels = Hierarchy::max_levels(p.shape).min(5);
                let opts = MgOptions {
                    agglomerate_below: 1024,
                    ..MgOptions::default()
                };
                let mut host = Hierarchy::new(c, grid, &p, levels, opts)?;
                let mut f = host.new_field();
                f.fill_owned(0, &host.owned(), rhs);
                if p.is_singular() {
                    // Zero mean: subtract the exact mean by hand.
                    let s = comm::exact::allreduce_exact_sum(c, &f.owned_values(0))?;
                    let mean = s / p.shape.iter().product::<usize>() as f64;
                    f.fill_owned(0, &host.owned(), |q| rhs(q) - mean);
                }
                // The host: one V-cycle from zero, then MG-PCG from zero.
                let mut uv = host.new_field();
                host.vcycle(c, &mut uv, &f)?;
                let mut u = host.new_field();
                let rep = host.solve_pcg(c, &mut u, &f)?;
                // The device, from the same hierarchy.
                let opts = DeviceOptions {
                    transport: Some(transport),
                    ..DeviceOptions::default()
                };
                let mut dh = DeviceHierarchy::with_options(c, host, dev.clone(), opts)?;
                if dh.transport() != transport {
                    return Err(MgError::Invalid(format!("took {}", dh.transport())));
                }
                let fd = DeviceField::from_host(&dev, &f, "f")?;
                let mut ud = dh.new_field()?;
                dh.vcycle(c, &mut ud, &fd)?;
                let mut back = Field::new(dh.layout());
                ud.download(&mut back)?;
                let vcycle_same = bits(&back) == bits(&uv);
                let mut ud = dh.new_field()?;
                let drep = dh.solve_pcg(c, &mut ud, &fd)?;
                ud.download(&mut back)?;
                let same = bits(&back) == bits(&u);
                let res: Vec<u64> = rep.residuals.iter().map(|r| r.to_bits()).collect();
                let dres: Vec<u64> = drep.residuals.iter().map(|r| r.to_bits()).collect();
                Ok::<_, MgError>((
                    vcycle_same,
                    same,
                    rep.iterations,
                    drep.iterations,
                    res == dres,
                    dh.device_levels(),
                    rep.converged,
                ))
            })
            .unwrap();
            for (rank, o) in out.iter().enumerate() {
                assert!(
                    o.6,
                    "{name}, {ranks} ranks, {transport}: the host did not converge"
                );
                assert!(
                    o.0,
                    "{name}, {ranks} ranks, {transport}, rank {rank}: the V-cycle differs"
                );
                assert_eq!(o.2, o.3, "{name}, {ranks} ranks, {transport}: iterations");
                assert!(
                    o.4,
                    "{name}, {ranks} ranks, {transport}: residual histories differ"
                );
                assert!(
                    o.1,
                    "{name}, {ranks} ranks, {transport}, rank {rank}: the solution differs"
                );
                assert!(o.5 >= 1, "{name}: no level on the device");
            }
        }
    }
}

#[test]
fn fields_of_another_layout_are_refused() {
    let Some(dev) = device() else { return };
    let r = local::run(1, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let grid = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
        let host = Hierarchy::new(c, grid, &p, 3, MgOptions::default())?;
        let mut dh = DeviceHierarchy::new(c, host, dev.clone())?;
        let mut lay = dh.layout();
        lay.owned[0] = 8;
        let wrong = DeviceField::new(&dev, lay, "wrong")?;
        let mut u = dh.new_field()?;
        Ok::<_, MgError>(dh.solve_pcg(c, &mut u, &wrong).unwrap_err().to_string())
    })
    .unwrap();
    assert!(r[0].contains("f has layout"), "{}", r[0]);
}

/// Work fields handed from one hierarchy to another give the same bits as
/// the hierarchy's own; a field of another layout is refused.
#[test]
fn work_fields_move_between_hierarchies() {
    let Some(dev) = device() else { return };
    let r = local::run(1, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let grid = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
        let build = || -> Result<DeviceHierarchy, MgError> {
            let host = Hierarchy::new(c, grid, &p, 3, MgOptions::default())?;
            DeviceHierarchy::new(c, host, dev.clone())
        };
        let (mut a, mut b) = (build()?, build()?);
        let mut hf = a.host().new_field();
        hf.fill_owned(0, &a.host().owned(), rhs);
        let f = DeviceField::from_host(&dev, &hf, "f")?;
        let solve = |h: &mut DeviceHierarchy| -> Result<Vec<u64>, MgError> {
            let mut u = h.new_field()?;
            h.solve_pcg(c, &mut u, &f)?;
            let mut out = Field::new(h.layout());
            u.download(&mut out)?;
            Ok(bits(&out))
        };
        let own = solve(&mut a)?;
        let work = a.take_work();
        assert_eq!(work.len(), 5, "MG-PCG's five work fields");
        b.give_work(work)?;
        let lent = solve(&mut b)?;
        assert!(b.take_work().len() == 5, "b made no fields of its own");
        let mut lay = a.layout();
        lay.owned[0] = 8;
        let wrong = DeviceField::new(&dev, lay, "wrong")?;
        let refused = a.give_work(vec![wrong]).unwrap_err().to_string();
        Ok::<_, MgError>((own == lent, refused))
    })
    .unwrap();
    assert!(r[0].0, "the same bits with lent work fields");
    assert!(r[0].1.contains("work field has layout"), "{}", r[0].1);
}

#[test]
fn a_non_finite_value_names_its_cell_on_the_device() {
    let Some(dev) = device() else { return };
    let bad = [11, 5, 7];
    let out = local::run(2, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let grid = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let host = Hierarchy::new(c, grid, &p, 3, MgOptions::default())?;
        let owned = host.owned();
        let mut f = host.new_field();
        f.fill_owned(0, &owned, |q| if q == bad { f64::NAN } else { 1.0 });
        let mut dh = DeviceHierarchy::new(c, host, dev.clone())?;
        let fd = DeviceField::from_host(&dev, &f, "f")?;
        let mut u = dh.new_field()?;
        Ok::<_, MgError>(dh.solve_pcg(c, &mut u, &fd).unwrap_err())
    })
    .unwrap();
    for e in out {
        assert!(
            matches!(e, MgError::NotFinite { what: "the right-hand side", cell, iteration: 0 } if cell == Some(bad)),
            "{e}"
        );
    }
}
