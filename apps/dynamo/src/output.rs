//! Output files for ParaView and for the eye: the 3D fields as a VTK
//! structured grid (one `.vts` piece per rank and the `.pvts` header), the
//! equatorial slice (`.vts`, written by rank 0), and the energies against
//! time as a PNG chart.
//!
//! Vectors are written in Cartesian components (`x` towards `phi = 0` on
//! the equator, `z` along the rotation axis), scalars as they are; the
//! spherical components `u_r` and `u_phi` are written as scalars too.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use appkit::plot::{Chart, Series};
use appkit::vtk::{Field, Order, StructuredGrid};
use comm::{CommExt, Communicator, IndexBox};

use crate::diag::fourier;
use crate::solver::Solver;
use crate::Sample;

/// Cartesian components of the spherical vector `(v_r, v_theta, v_phi)` at `(theta, phi)`.
pub fn cartesian(v: [f64; 3], theta: f64, phi: f64) -> [f64; 3] {
    let (st, ct) = theta.sin_cos();
    let (sp, cp) = phi.sin_cos();
    [
        v[0] * st * cp + v[1] * ct * cp - v[2] * sp,
        v[0] * st * sp + v[1] * ct * sp + v[2] * cp,
        v[0] * ct - v[1] * st,
    ]
}

/// Writes the 3D snapshot and the equatorial slice of the current state
/// into `dir` (collective); returns the paths written (rank 0).
pub fn snapshot(comm: &dyn Communicator, s: &mut Solver, dir: &Path) -> Result<Vec<String>> {
    s.to_grid()?;
    let res = *s.resolution();
    let (r0, nrl) = s.dist().levels();
    let (j0, ntl) = s.dist().latitudes();
    let nphi = res.nphi;
    let gl = s.dist().grid_len();
    let r = s.radial().r().to_vec();
    let theta = s.dist().sht().theta()[j0..j0 + ntl].to_vec();
    let phis: Vec<f64> = (0..nphi).map(|k| s.dist().sht().phi(k)).collect();
    let magnetic = s.magnetic();
    let (gs, gt, gp) = s.grid_fields();
    let mut points = Vec::with_capacity(3 * gl);
    let mut vel = Vec::with_capacity(3 * gl);
    let mut mag = Vec::with_capacity(if magnetic { 3 * gl } else { 0 });
    let mut ur = Vec::with_capacity(gl);
    let mut uphi = Vec::with_capacity(gl);
    let mut temp = Vec::with_capacity(gl);
    for lr in 0..nrl {
        for (lj, &th) in theta.iter().enumerate() {
            for (k, &ph) in phis.iter().enumerate() {
                let p = (lr * ntl + lj) * nphi + k;
                let rr = r[r0 + lr];
                points.extend(cartesian([rr, 0.0, 0.0], th, ph));
                vel.extend(cartesian([gs[p], gt[p], gp[p]], th, ph));
                if magnetic {
                    mag.extend(cartesian(
                        [gs[4 * gl + p], gt[3 * gl + p], gp[3 * gl + p]],
                        th,
                        ph,
                    ));
                }
                ur.push(gs[p]);
                uphi.push(gp[p]);
                temp.push(gs[2 * gl + p]);
            }
        }
    }
    let mut fields = vec![
        Field::point_scalar("temperature", &temp),
        Field::point_vector("velocity", &vel),
        Field::point_scalar("u_r", &ur),
        Field::point_scalar("u_phi", &uphi),
    ];
    if magnetic {
        fields.push(Field::point_vector("magnetic_field", &mag));
    }
    let grid = StructuredGrid::new([res.nr, res.ntheta, nphi], Order::LastFastest);
    let piece = IndexBox {
        lo: [r0, j0, 0],
        hi: [r0 + nrl, j0 + ntl, nphi],
    };
    let stem = format!("dynamo_{:08}", s.steps());
    let mut files = Vec::new();
    if let Some(p) = grid.write_parallel(comm, dir, &stem, &piece, &points, &fields)? {
        files.push(p.display().to_string());
    }
    if let Some(p) = equatorial_slice(comm, s, dir)? {
        files.push(p.display().to_string());
    }
    Ok(files)
}

/// The equatorial plane at every radial level, `nphi + 1` longitudes (the
/// first repeated to close the ring), evaluated from the spectral
/// coefficients (the equator is not a Gauss latitude); written by rank 0
/// as `dynamo_eq_NNNNNNNN.vts` (collective).
fn equatorial_slice(comm: &dyn Communicator, s: &Solver, dir: &Path) -> Result<Option<PathBuf>> {
    let res = *s.resolution();
    let r = s.radial().r().to_vec();
    let c = s.equator(comm, &r)?;
    let path = dir.join(format!("dynamo_eq_{:08}.vts", s.steps()));
    let written = if comm.rank() == 0 {
        let np = res.nphi + 1;
        let mut points = Vec::with_capacity(3 * np * r.len());
        let (mut vel, mut mag) = (Vec::new(), Vec::new());
        let (mut temp, mut ur, mut uphi) = (Vec::new(), Vec::new(), Vec::new());
        let th = std::f64::consts::FRAC_PI_2;
        for (ir, &rr) in r.iter().enumerate() {
            let q = &c[ir];
            for k in 0..np {
                let ph = 2.0 * std::f64::consts::PI * (k % res.nphi) as f64 / res.nphi as f64;
                let f = |i: usize| fourier(&q[i], ph);
                points.extend(cartesian([rr, 0.0, 0.0], th, ph));
                vel.extend(cartesian([f(0), f(4), f(2)], th, ph));
                mag.extend(cartesian([f(5), f(3), f(6)], th, ph));
                temp.push(f(1));
                ur.push(f(0));
                uphi.push(f(2));
            }
        }
        let mut fields = vec![
            Field::point_scalar("temperature", &temp),
            Field::point_vector("velocity", &vel),
            Field::point_scalar("u_r", &ur),
            Field::point_scalar("u_phi", &uphi),
        ];
        if s.magnetic() {
            fields.push(Field::point_vector("magnetic_field", &mag));
        }
        let grid = StructuredGrid::new([r.len(), 1, np], Order::LastFastest);
        grid.write_piece_file(&path, &grid.whole, &points, &fields)
            .map_err(anyhow::Error::from)
    } else {
        Ok(())
    };
    let mut ok = [u64::from(written.is_ok())];
    comm.broadcast(&mut ok, 0)?;
    written?;
    if ok[0] == 0 {
        bail!("rank 0 failed to write {}", path.display());
    }
    Ok((comm.rank() == 0).then_some(path))
}

/// The energies of `history` against time, on a log scale (a linear one
/// where every energy is 0).
pub fn plot_energies(path: &Path, history: &[Sample]) -> Result<()> {
    let t: Vec<f64> = history.iter().map(|s| s.time).collect();
    let get = |f: fn(&Sample) -> f64| history.iter().map(f).collect::<Vec<f64>>();
    let ekin = get(|s| s.energies.ekin);
    let ekin_pol = get(|s| s.energies.ekin_pol);
    let ekin_tor = get(|s| s.energies.ekin_tor);
    let emag = get(|s| s.energies.emag);
    let mut series = vec![
        Series::new("Ekin", &t, &ekin),
        Series::new("Ekin poloidal", &t, &ekin_pol),
        Series::new("Ekin toroidal", &t, &ekin_tor),
    ];
    if emag.iter().any(|&e| e > 0.0) {
        series.push(Series::new("Emag", &t, &emag));
    }
    // A logarithmic axis where any energy is positive; a run that stays at
    // rest (every energy 0) is drawn on a linear one.
    let positive = series.iter().any(|s| s.y.iter().any(|&e| e > 0.0));
    let chart = Chart {
        log_y: positive,
        ..Chart::new("dynamo energies", "time (viscous units)", "energy")
    };
    chart.write(path, &series)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::plot_energies;
    use crate::diag::Energies;
    use crate::Sample;

    /// A run that stays at rest (every energy 0, as from the conduction
    /// state) still gets its plot: no positive value for a log axis, so a
    /// linear one. With energies the plot is written as before.
    #[test]
    fn energies_at_rest_are_plotted() {
        let dir = std::env::temp_dir().join(format!("dynamo_plot_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sample = |time: f64, ekin: f64| Sample {
            step: (time * 10.0) as u64,
            time,
            dt: 0.1,
            energies: Energies {
                ekin,
                ..Energies::default()
            },
            midpoint: None,
            drift: None,
        };
        for (name, e) in [("rest.png", 0.0), ("moving.png", 1.5)] {
            let p = dir.join(name);
            let h: Vec<Sample> = (0..4).map(|i| sample(0.1 * i as f64, e)).collect();
            plot_energies(&p, &h).unwrap_or_else(|err| panic!("{name}: {err:#}"));
            let png = std::fs::read(&p).unwrap();
            assert_eq!(&png[1..4], b"PNG", "{name}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
