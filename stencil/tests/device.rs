//! The device sweeps give the host sweep's bits: every kernel at several
//! orders, on one region, on several regions in one launch, around an
//! exchange, reading across a self-periodic box's faces, and two steps a
//! pass. Skipped, with a note, where no CUDA device is present
//! (`cargo xtask gpu` runs it on one and fails on a skip).
#![cfg(feature = "cuda")]

use gpu::cuda::Device;
use gpu::GpuError;
use halo::{DeviceField, FieldLayout, Region};
use std::sync::Arc;
use stencil::device::{ghost, DeviceStencil};
use stencil::{GpuKernel, PeriodicReads, StencilOptions, Sweep};

fn device() -> Option<Arc<Device>> {
    match Device::open(0) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            None
        }
    }
}

/// A field of `layout` whose owned cells hold a smooth function with some
/// noise and whose ghosts hold the periodic images of the owned cells.
fn periodic_field(layout: &FieldLayout, seed: u64) -> Vec<f64> {
    let p = layout.padded();
    let (n, g) = (layout.owned, layout.ghost);
    let mut u = vec![0.0; layout.padded_len()];
    let mut state = seed;
    let mut owned = vec![0.0; n.iter().product()];
    for v in owned.iter_mut() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *v = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
    }
    for i in 0..p[0] {
        for j in 0..p[1] {
            for k in 0..p[2] {
                let w = |x: usize, d: usize| (x + n[d] * g[d] - g[d]) % n[d];
                let (a, b, c) = (w(i, 0), w(j, 1), w(k, 2));
                u[layout.index(0, [i, j, k])] = owned[(a * n[1] + b) * n[2] + c];
            }
        }
    }
    u
}

fn host(sweep: &Sweep, layout: &FieldLayout, u: &[f64], region: &Region) -> Vec<f64> {
    let mut out = vec![0.0; layout.padded_len()];
    assert!(sweep.apply(layout, u, &mut out, region));
    out
}

/// The owned cells of `f`, in padded order (ghosts are not written).
fn owned_values(layout: &FieldLayout, f: &[f64]) -> Vec<u64> {
    let o = layout.owned_region();
    let mut v = Vec::new();
    for i in o.lo[0]..o.hi[0] {
        for j in o.lo[1]..o.hi[1] {
            for k in o.lo[2]..o.hi[2] {
                v.push(f[layout.index(0, [i, j, k])].to_bits());
            }
        }
    }
    v
}

struct Run {
    dev: Arc<Device>,
    layout: FieldLayout,
    src: DeviceField,
    dst: DeviceField,
    bad: gpu::cuda::cudarc::driver::CudaSlice<i32>,
}

impl Run {
    fn new(dev: &Arc<Device>, layout: FieldLayout, u: &[f64]) -> Run {
        let mut host = halo::Field::new(layout);
        host.as_mut_slice().copy_from_slice(u);
        Run {
            dev: dev.clone(),
            layout,
            src: DeviceField::from_host(dev, &host, "src").unwrap(),
            dst: DeviceField::new(dev, layout, "dst").unwrap(),
            bad: dev.upload(&[i32::MAX], "flag").unwrap(),
        }
    }

    fn result(&self) -> Vec<f64> {
        let mut out = halo::Field::new(self.layout);
        self.dev.synchronize().unwrap();
        self.dst.download(&mut out).unwrap();
        out.as_slice().to_vec()
    }

    fn flag(&self) -> i32 {
        self.dev.synchronize().unwrap();
        self.dev.download(&self.bad).unwrap()[0]
    }
}

#[test]
fn every_kernel_gives_the_host_bits() {
    let Some(dev) = device() else { return };
    for order in [2, 4, 8, 10, 14, 20] {
        let r = order / 2;
        // Even padded rows (pairs run) and an odd last axis (pairs fall
        // back to cached).
        for owned in [[13, 17, 24], [12, 11, 9]] {
            let layout = FieldLayout {
                owned,
                ghost: ghost(r),
                components: 1,
            };
            let u = periodic_field(&layout, order as u64);
            let sweep = Sweep::new(order, [0.11, 0.13, 0.17], 1e-4, true).unwrap();
            let owned_region = layout.owned_region();
            let want = owned_values(&layout, &host(&sweep, &layout, &u, &owned_region));
            for gpu in [
                GpuKernel::Auto,
                GpuKernel::Cached,
                GpuKernel::Pairs,
                GpuKernel::Shuffle,
                GpuKernel::Shared,
            ] {
                for gpu_chunk in [0, 1, 5] {
                    let opts = StencilOptions {
                        gpu,
                        gpu_chunk,
                        ..StencilOptions::default()
                    };
                    let st = DeviceStencil::new(&dev, layout, order, &opts, false, false).unwrap();
                    assert!(!st.wraps());
                    // `pairs` needs rows and planes of even padded length
                    // (the first box) and falls back to `cached` otherwise.
                    if gpu == GpuKernel::Pairs {
                        let even = owned[2] % 2 == 0;
                        assert_eq!(st.kernel_name(), if even { "pairs" } else { "cached" });
                    }
                    let what = format!("order {order}, {owned:?}, {gpu:?}, chunk {gpu_chunk}");
                    // The whole box in one launch.
                    let mut run = Run::new(&dev, layout, &u);
                    st.sweep(
                        &sweep,
                        &run.src,
                        &mut run.dst,
                        &owned_region,
                        3,
                        &mut run.bad,
                    )
                    .unwrap();
                    assert_eq!(owned_values(&layout, &run.result()), want, "{what}");
                    assert_eq!(run.flag(), i32::MAX, "{what}");
                    // Interior and shell around a (here empty) exchange.
                    let mut run = Run::new(&dev, layout, &u);
                    let (interior, shell) = split(&layout, r);
                    let mut finished = false;
                    st.sweep_overlapped::<GpuError>(
                        &sweep,
                        &mut run.src,
                        &mut run.dst,
                        (&interior, &shell),
                        3,
                        &mut run.bad,
                        |_| {
                            finished = true;
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert!(finished);
                    assert_eq!(
                        owned_values(&layout, &run.result()),
                        want,
                        "{what}, overlapped"
                    );
                }
            }
        }
    }
}

/// The interior (cells at least `r` from every face) and the six slabs
/// of the shell, which together cover the owned box.
fn split(layout: &FieldLayout, r: usize) -> (Region, Vec<Region>) {
    let o = layout.owned_region();
    let mut lo = o.lo;
    let mut hi = o.hi;
    let mut shell = Vec::new();
    for d in 0..3 {
        let mut below = Region { lo, hi };
        below.hi[d] = (lo[d] + r).min(hi[d]);
        let mut above = Region { lo, hi };
        above.lo[d] = hi[d].saturating_sub(r).max(below.hi[d]);
        shell.push(below);
        shell.push(above);
        lo[d] = below.hi[d];
        hi[d] = above.lo[d];
    }
    (Region { lo, hi }, shell)
}

#[test]
fn reading_across_the_faces_and_two_steps_give_the_host_bits() {
    let Some(dev) = device() else { return };
    for order in [2, 4] {
        let r = order / 2;
        let layout = FieldLayout {
            owned: [20, 18, 16],
            ghost: ghost(r),
            components: 1,
        };
        let u = periodic_field(&layout, 7);
        let sweep = Sweep::new(order, [0.1, 0.1, 0.1], 1e-3, true).unwrap();
        let owned = layout.owned_region();
        let once = host(&sweep, &layout, &u, &owned);
        for gpu in [GpuKernel::Cached, GpuKernel::Pairs, GpuKernel::Shuffle] {
            let opts = StencilOptions {
                gpu,
                gpu_periodic: PeriodicReads::Read,
                ..StencilOptions::default()
            };
            let st = DeviceStencil::new(&dev, layout, order, &opts, true, order == 2).unwrap();
            assert!(st.wraps());
            // The ghosts are zeroed on the device: reading across the faces
            // must not read them.
            let zero_ghosts: Vec<f64> = {
                let mut z = vec![0.0; layout.padded_len()];
                for i in owned.lo[0]..owned.hi[0] {
                    for j in owned.lo[1]..owned.hi[1] {
                        for k in owned.lo[2]..owned.hi[2] {
                            let q = layout.index(0, [i, j, k]);
                            z[q] = u[q];
                        }
                    }
                }
                z
            };
            let mut run = Run::new(&dev, layout, &zero_ghosts);
            st.sweep_owned(&sweep, &run.src, &mut run.dst, 1, &mut run.bad)
                .unwrap();
            assert_eq!(
                owned_values(&layout, &run.result()),
                owned_values(&layout, &once),
                "order {order}, {gpu:?}, across the faces"
            );
            if order == 2 {
                // Two steps against two host sweeps (the second from the
                // first's periodic images).
                let mid = periodic_from_owned(&layout, &once);
                let twice = host(&sweep, &layout, &mid, &owned);
                let mut run = Run::new(&dev, layout, &zero_ghosts);
                st.two_steps(&sweep, &run.src, &mut run.dst, 1, &mut run.bad)
                    .unwrap();
                assert_eq!(
                    owned_values(&layout, &run.result()),
                    owned_values(&layout, &twice),
                    "{gpu:?}, two steps"
                );
                assert_eq!(run.flag(), i32::MAX);
            }
        }
    }
}

/// `f` with its ghosts replaced by the periodic images of its owned cells.
fn periodic_from_owned(layout: &FieldLayout, f: &[f64]) -> Vec<f64> {
    let p = layout.padded();
    let (n, g) = (layout.owned, layout.ghost);
    let mut u = f.to_vec();
    for i in 0..p[0] {
        for j in 0..p[1] {
            for k in 0..p[2] {
                let w = |x: usize, d: usize| (x + n[d] * g[d] - g[d]) % n[d] + g[d];
                u[layout.index(0, [i, j, k])] = f[layout.index(0, [w(i, 0), w(j, 1), w(k, 2)])];
            }
        }
    }
    u
}

#[test]
fn a_non_finite_value_is_flagged_with_its_step() {
    let Some(dev) = device() else { return };
    let layout = FieldLayout {
        owned: [8; 3],
        ghost: ghost(1),
        components: 1,
    };
    let mut u = periodic_field(&layout, 3);
    u[layout.index(0, [4, 5, 6])] = f64::NAN;
    let sweep = Sweep::new(2, [0.1; 3], 1e-3, true).unwrap();
    let st = DeviceStencil::new(&dev, layout, 2, &StencilOptions::default(), false, false).unwrap();
    let mut run = Run::new(&dev, layout, &u);
    st.sweep(
        &sweep,
        &run.src,
        &mut run.dst,
        &layout.owned_region(),
        17,
        &mut run.bad,
    )
    .unwrap();
    assert_eq!(run.flag(), 17);
}

#[test]
fn bad_operands_are_refused_by_name() {
    let Some(dev) = device() else { return };
    let layout = FieldLayout {
        owned: [8; 3],
        ghost: ghost(2),
        components: 1,
    };
    let opts = StencilOptions::default();
    let e = |r: Result<DeviceStencil, GpuError>| r.unwrap_err().to_string();
    // Ghosts narrower than the radius, an order outside 2..=20, two steps
    // at order 4, a bad block width.
    assert!(e(DeviceStencil::new(&dev, layout, 6, &opts, false, false)).contains("narrower"));
    assert!(e(DeviceStencil::new(&dev, layout, 3, &opts, false, false)).contains("order 3"));
    assert!(e(DeviceStencil::new(&dev, layout, 4, &opts, true, true)).contains("two steps"));
    let wide = StencilOptions {
        gpu_block: 48,
        ..opts
    };
    assert!(e(DeviceStencil::new(&dev, layout, 4, &wide, false, false)).contains("gpu_block = 48"));
    let st = DeviceStencil::new(&dev, layout, 4, &opts, false, false).unwrap();
    let sweep = Sweep::new(4, [0.1; 3], 1e-3, true).unwrap();
    let u = periodic_field(&layout, 1);
    let mut run = Run::new(&dev, layout, &u);
    // A region reaching into the ghosts.
    let r = Region {
        lo: [0, 2, 4],
        hi: [5, 5, 5],
    };
    let err = st
        .sweep(&sweep, &run.src, &mut run.dst, &r, 1, &mut run.bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not inside the owned cells"), "{err}");
    // A sweep of another radius.
    let other = Sweep::new(2, [0.1; 3], 1e-3, true).unwrap();
    let err = st
        .sweep(
            &other,
            &run.src,
            &mut run.dst,
            &layout.owned_region(),
            1,
            &mut run.bad,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("radius 1"), "{err}");
    // A field of another layout.
    let small = FieldLayout {
        owned: [4; 3],
        ..layout
    };
    let mut other_dst = DeviceField::new(&dev, small, "small").unwrap();
    let err = st
        .sweep(
            &sweep,
            &run.src,
            &mut other_dst,
            &layout.owned_region(),
            1,
            &mut run.bad,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("destination field's layout"), "{err}");
    // Two steps on a stencil built for one.
    let err = st
        .two_steps(&sweep, &run.src, &mut run.dst, 1, &mut run.bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("built for one"), "{err}");
}
