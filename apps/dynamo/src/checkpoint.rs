//! Dynamo checkpoints: the state and the time-stepping history of every
//! mode, mode-major in the serial `(l, m)` order, so that a run restarts
//! on any rank count and process grid and continues bit for bit as if it
//! had not stopped.
//!
//! The file is an [`appkit::checkpoint`] (header with the application
//! `dynamo`, the shape `[nlm, 1, per_mode]`, the step and time, and the
//! keys below; little-endian `f64` payload; CRC-32C; written atomically by
//! rank 0 after the other ranks sent their modes). Per mode `(l, m)`
//! (zeros for modes that `minc` leaves out):
//!
//! - the state: `W`, `P`, `T` (real parts of the `3 Nr` values, then the
//!   imaginary parts), then `Z`, and with a field `G` and `H` (`2 Nr` each);
//! - the history of each stepper in the same order, as
//!   [`imex::Stepper::export_mode`] writes it.
//!
//! Header keys: `physics_hash` (the configuration's equations and grid),
//! `nr`, `lmax`, `minc`, `magnetic`, `dt` (the step size in use), the
//! step-history metadata of each stepper (`wpt`, `z`, `g`, `h`:
//! `scheme`, `filled`, `dt0`, `dt1` as exact bit patterns), and the
//! drift-tracking state (`drift_phi`, `drift_time`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use appkit::checkpoint::{self as ck, Header};
use comm::{CommExt, Communicator};
use imex::{Stepper, StepperMeta};

use crate::config::Config;
use crate::solver::Solver;

/// The application name in the header.
pub const APP: &str = "dynamo";
const TAG: u32 = 0xD7A0;

/// What a run carries across a restart besides the state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extra {
    /// The step size in use.
    pub dt: f64,
    /// The last mid-depth zero-crossing longitude and its time (drift).
    pub drift: Option<(f64, f64)>,
}

fn hex(x: f64) -> String {
    format!("{:016x}", x.to_bits())
}

fn unhex(meta: &BTreeMap<String, String>, key: &str) -> Result<f64> {
    let v = meta
        .get(key)
        .with_context(|| format!("the checkpoint header has no key {key:?}"))?;
    let bits = u64::from_str_radix(v, 16)
        .with_context(|| format!("checkpoint key {key:?} = {v:?} is not 16 hex digits"))?;
    Ok(f64::from_bits(bits))
}

fn get<'a>(meta: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str> {
    meta.get(key)
        .map(String::as_str)
        .with_context(|| format!("the checkpoint header has no key {key:?}"))
}

/// The steppers of a solver, in file order.
fn steppers(s: &mut Solver) -> Vec<&mut Stepper> {
    let (a, b, c, d) = s.steppers_mut();
    let mut v = vec![a, b];
    v.extend(c);
    v.extend(d);
    v
}

const NAMES: [&str; 4] = ["wpt", "z", "g", "h"];

/// Values per mode: state and history.
fn per_mode(s: &mut Solver) -> usize {
    let nr = s.resolution().nr;
    let state = if s.magnetic() { 12 * nr } else { 8 * nr };
    state
        + steppers(s)
            .iter()
            .map(|st| st.mode_history_len())
            .sum::<usize>()
}

/// Writes the checkpoint (collective); the path on rank 0.
pub fn write(
    comm: &dyn Communicator,
    solver: &mut Solver,
    cfg: &Config,
    extra: &Extra,
    path: &Path,
) -> Result<()> {
    let nlm = solver.dist().sht().nlm();
    let per = per_mode(solver);
    // Own modes: (serial index, values).
    let mut idx = Vec::new();
    let mut vals = Vec::new();
    let kept: Vec<(usize, usize)> = solver.kept().iter().map(|&i| solver.tuples()[i]).collect();
    let mut hist = Vec::new();
    for &(l, m) in &kept {
        idx.push(solver.dist().sht().lm_index(l, m) as u64);
        let start = vals.len();
        let f = &solver.fields;
        let blocks = [Some(&f.wpt), Some(&f.z), f.g.as_ref(), f.h.as_ref()];
        for b in blocks.into_iter().flatten() {
            let (re, im) = b.mode(l, m).expect("held mode");
            vals.extend_from_slice(re);
            vals.extend_from_slice(im);
        }
        for st in steppers(solver) {
            hist.clear();
            st.export_mode(l, m, &mut hist)?;
            vals.extend_from_slice(&hist);
        }
        debug_assert_eq!(vals.len() - start, per);
    }
    let mut header = Header::new(APP, &[nlm, 1, per], solver.steps(), solver.time());
    let meta = &mut header.meta;
    meta.insert("physics_hash".into(), appkit::hash::hex(cfg.physics_hash()));
    let res = *solver.resolution();
    meta.insert("nr".into(), res.nr.to_string());
    meta.insert("lmax".into(), res.lmax.to_string());
    meta.insert("minc".into(), res.minc.to_string());
    meta.insert("magnetic".into(), solver.magnetic().to_string());
    meta.insert("dt".into(), hex(extra.dt));
    if let Some((p, t)) = extra.drift {
        meta.insert("drift_phi".into(), hex(p));
        meta.insert("drift_time".into(), hex(t));
    }
    for (name, st) in NAMES.iter().zip(steppers(solver)) {
        let m = st.export_meta()?;
        meta.insert(format!("{name}.scheme"), m.scheme.clone());
        meta.insert(format!("{name}.time"), hex(m.time));
        meta.insert(format!("{name}.steps"), m.steps.to_string());
        meta.insert(format!("{name}.filled"), m.filled.to_string());
        meta.insert(format!("{name}.dt0"), hex(m.dt_history[0]));
        meta.insert(format!("{name}.dt1"), hex(m.dt_history[1]));
    }
    // Gather on rank 0 and write there; every rank learns the outcome.
    let written = if comm.rank() == 0 {
        let mut global = vec![0.0; nlm * per];
        let mut place = |ix: &[u64], v: &[f64]| {
            for (k, &i) in ix.iter().enumerate() {
                let i = i as usize;
                global[i * per..(i + 1) * per].copy_from_slice(&v[k * per..(k + 1) * per]);
            }
        };
        place(&idx, &vals);
        for r in 1..comm.size() {
            let mut n = [0u64];
            comm.recv(r, TAG, &mut n)?;
            let mut ix = vec![0u64; n[0] as usize];
            let mut v = vec![0.0; n[0] as usize * per];
            comm.recv(r, TAG, &mut ix)?;
            comm.recv(r, TAG, &mut v)?;
            place(&ix, &v);
        }
        ck::write_f64(path, &header, &global)
            .with_context(|| format!("writing checkpoint {}", path.display()))
    } else {
        comm.send(0, TAG, &[idx.len() as u64])?;
        comm.send(0, TAG, &idx)?;
        comm.send(0, TAG, &vals)?;
        Ok(())
    };
    let mut ok = [u64::from(written.is_ok())];
    comm.broadcast(&mut ok, 0)?;
    written?;
    if ok[0] == 0 {
        bail!("rank 0 failed to write checkpoint {}", path.display());
    }
    Ok(())
}

/// Reads a checkpoint into `solver` (every rank reads the file and takes
/// its own modes); the run's extra state.
pub fn read(solver: &mut Solver, cfg: &Config, path: &Path) -> Result<Extra> {
    let ck = ck::read_any_shape(path, APP)?;
    let header = &ck.header;
    let meta = &header.meta;
    let res = *solver.resolution();
    let want = [
        ("nr", res.nr.to_string()),
        ("lmax", res.lmax.to_string()),
        ("minc", res.minc.to_string()),
        ("magnetic", solver.magnetic().to_string()),
    ];
    for (k, v) in &want {
        let got = get(meta, k)?;
        if got != v {
            bail!(
                "checkpoint {} has {k} = {got}, this run has {k} = {v}: a checkpoint restarts only a run of the same resolution and physics",
                path.display()
            );
        }
    }
    let ph = appkit::hash::hex(cfg.physics_hash());
    let got = get(meta, "physics_hash")?;
    if got != ph {
        bail!(
            "checkpoint {} was written with other physical parameters or grid (physics hash {got}, this run {ph}): restart with the configuration that wrote it",
            path.display()
        );
    }
    let nlm = solver.dist().sht().nlm();
    // History lengths follow from the metadata: import it first.
    for (name, st) in NAMES.iter().zip(steppers(solver)) {
        let m = StepperMeta {
            scheme: get(meta, &format!("{name}.scheme"))?.to_string(),
            time: unhex(meta, &format!("{name}.time"))?,
            steps: get(meta, &format!("{name}.steps"))?
                .parse()
                .context("steps in the checkpoint header")?,
            filled: get(meta, &format!("{name}.filled"))?
                .parse()
                .context("filled in the checkpoint header")?,
            dt_history: [
                unhex(meta, &format!("{name}.dt0"))?,
                unhex(meta, &format!("{name}.dt1"))?,
            ],
        };
        st.import_meta(&m)
            .with_context(|| format!("checkpoint {}", path.display()))?;
    }
    let per = per_mode(solver);
    if header.shape != [nlm, 1, per] {
        bail!(
            "checkpoint {} holds {:?} values (modes x 1 x per mode), this run needs {:?}: it was written by another resolution or scheme",
            path.display(),
            header.shape,
            [nlm, 1, per]
        );
    }
    let values: Vec<f64> = ck
        .payload
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    if values.len() != nlm * per {
        bail!(
            "checkpoint {} has a payload of {} bytes, expected {}",
            path.display(),
            ck.payload.len(),
            8 * nlm * per
        );
    }
    let kept: Vec<(usize, usize)> = solver.kept().iter().map(|&i| solver.tuples()[i]).collect();
    for &(l, m) in &kept {
        let i = solver.dist().sht().lm_index(l, m);
        let v = &values[i * per..(i + 1) * per];
        let mut off = 0;
        let f = &mut solver.fields;
        let blocks = [Some(&mut f.wpt), Some(&mut f.z), f.g.as_mut(), f.h.as_mut()];
        for b in blocks.into_iter().flatten() {
            let (re, im) = b.mode_mut(l, m).expect("held mode");
            let n = re.len();
            re.copy_from_slice(&v[off..off + n]);
            im.copy_from_slice(&v[off + n..off + 2 * n]);
            off += 2 * n;
        }
        for st in steppers(solver) {
            let n = st.mode_history_len();
            st.import_mode(l, m, &v[off..off + n])?;
            off += n;
        }
        debug_assert_eq!(off, per);
    }
    let drift = match (meta.get("drift_phi"), meta.get("drift_time")) {
        (Some(_), Some(_)) => Some((unhex(meta, "drift_phi")?, unhex(meta, "drift_time")?)),
        _ => None,
    };
    Ok(Extra {
        dt: unhex(meta, "dt")?,
        drift,
    })
}
