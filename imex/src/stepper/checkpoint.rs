//! Checkpoint and restart: the stepper's scalar state and, per mode, its multistep history.

use super::Stepper;
use crate::{ImexError, LuBackend};

/// The scalar part of a [`Stepper`]'s state, from [`Stepper::export_meta`], for
/// [`Stepper::import_meta`].
///
/// # Checkpoint and restart
///
/// Besides its operators, what determines a stepper's future steps is this scalar state and,
/// for multistep schemes, the history of past `A_l u`, `N` and `L_l u` of every held mode. A
/// checkpoint holds
///
/// - this struct (all fields public, for the application's own file format);
/// - for every mode `(l, m)`, the [`Stepper::mode_history_len`] values that
///   [`Stepper::export_mode`] appends;
/// - the state block itself and the boundary values set with
///   [`Stepper::set_boundary_value`], which the application owns and restores itself (they
///   are not exported here).
///
/// To restart, build a stepper with the same scheme and operators (any layout: any set of
/// degrees and orders, in any order, on any number of threads), call
/// [`Stepper::import_meta`], then [`Stepper::import_mode`] for every mode it holds, restore the
/// state block and the boundary values, and step on: every mode continues bit for bit as in an
/// uninterrupted run, during the start-up steps of a multistep scheme as well. Until every held
/// mode has been imported the stepper refuses to step or export
/// ([`ImexError::IncompleteImport`]); neither side works while a step is in progress
/// ([`ImexError::StepInProgress`]).
///
/// The LU factors are not part of the state: they depend only on `dt`, the scheme weights and
/// the operators, and are recomputed at the first step (so [`Stepper::factorizations`] counts
/// differ from the uninterrupted run; the bits do not). DIRK schemes keep no history between
/// steps: their checkpoint is this struct alone ([`Stepper::mode_history_len`] is 0).
///
/// # Per-mode data
///
/// Only the history entries that a later step can still read are exported. Every step pushes
/// a new entry before it reads any, so the oldest entry of a full history (depth `k`: 1 for
/// SBDF1, 2 for CNAB2 and SBDF2, 3 for SBDF3) is never read again, and CNAB2 weights its older
/// `A_l u` and `L_l u` by 0. With `f = min(filled, k - 1)`, [`Stepper::history_entries`] is
/// `[n_au, n_n, n_lu]` =
///
/// | scheme | `A_l u` | `N` | `L_l u` |
/// |---|---|---|---|
/// | SBDF1, SBDF2, SBDF3 | `f` | `f` | 0 |
/// | CNAB2 | 0 | `f` | 0 |
/// | DIRK | 0 | 0 | 0 |
///
/// the same for every mode (the stepper holds up to `filled` entries per kind; an import fills
/// the rest with zeros that no step reads). After `s` completed steps (since the start or a
/// [`Stepper::restart`]), entry `j` (0 the newest) of each kind belongs to the state at the
/// start of step `s - 1 - j`, `u^{s-1-j}`: `A_l u^{s-1-j}`, `N(u^{s-1-j}, t^{s-1-j})` as the
/// explicit callback returned it, and `L_l u^{s-1-j}`. The data of one mode,
/// `2 nr (n_au + n_n + n_lu)` values, is ordered
///
/// ```text
/// for kind in [A u, N, L u]:
///     for entry in newest .. oldest:
///         nr real radial values of the mode, then its nr imaginary radial values
/// ```
///
/// It depends only on the mode, not on the layout or the number of threads, so a checkpoint
/// stored mode by mode can be read back by any number of ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct StepperMeta {
    /// The scheme's name ([`crate::Scheme::name`]); [`Stepper::import_meta`] requires it to be
    /// the importing stepper's.
    pub scheme: String,
    /// The time of the current state.
    pub time: f64,
    /// The number of completed steps.
    pub steps: u64,
    /// The last two step sizes, newest first (0 before the first steps).
    pub dt_history: [f64; 2],
    /// How many entries of the multistep history are filled: at most the scheme's history
    /// depth, and fewer during the start-up steps; 0 for DIRK schemes.
    pub filled: usize,
}

impl<B: LuBackend> Stepper<B> {
    /// How many history entries of each kind, `[A u, N, L u]`, are exported and imported per
    /// mode: the newest entries that a later step can still read (see [`StepperMeta`]). The
    /// same for every mode.
    pub fn history_entries(&self) -> [usize; 3] {
        self.scheme
            .multistep()
            .map_or([0; 3], |ms| ms.readable_history(self.filled))
    }

    /// How many history entries of each kind every degree holds: `filled` of `A u` and `N`,
    /// and of `L u` for the schemes that keep it.
    fn held_entries(&self) -> [usize; 3] {
        match self.scheme.multistep() {
            Some(ms) => {
                let lu = if ms.uses_implicit_history() {
                    self.filled
                } else {
                    0
                };
                [self.filled, self.filled, lu]
            }
            None => [0; 3],
        }
    }

    /// The number of values [`Stepper::export_mode`] appends for one mode and
    /// [`Stepper::import_mode`] expects: `2 nr` times the sum of
    /// [`Stepper::history_entries`].
    pub fn mode_history_len(&self) -> usize {
        2 * self.layout.nr() * self.history_entries().iter().sum::<usize>()
    }

    /// The first held mode whose history an import still awaits, in storage order.
    fn first_missing(&self) -> Option<(usize, usize)> {
        if self.missing_modes == 0 {
            return None;
        }
        self.degrees.iter().find_map(|d| {
            let k = d.missing.iter().position(|&m| m)?;
            let ms = self.layout.orders(d.l).unwrap_or(&[]);
            Some((d.l, ms.get(k).copied().unwrap_or(0)))
        })
    }

    /// Fails with [`ImexError::IncompleteImport`] while an import awaits some mode's history.
    pub(super) fn check_import_complete(&self) -> Result<(), ImexError> {
        match self.first_missing() {
            Some((l, m)) => Err(ImexError::IncompleteImport { l, m }),
            None => Ok(()),
        }
    }

    /// Fails while a step is in progress or an import is incomplete.
    fn check_exportable(&self) -> Result<(), ImexError> {
        if let Some(p) = &self.pending {
            return Err(ImexError::StepInProgress { stage: p.stage });
        }
        self.check_import_complete()
    }

    /// Storage position of degree `l`, and the position `k` of order `m` among its orders.
    fn locate_mode(&self, l: usize, m: usize) -> Result<(usize, usize), ImexError> {
        let d = self
            .layout
            .index_of(l)
            .ok_or(ImexError::ModeNotHeld { l, m })?;
        let k = self
            .layout
            .orders(l)
            .unwrap_or(&[])
            .binary_search(&m)
            .map_err(|_| ImexError::ModeNotHeld { l, m })?;
        Ok((d, k))
    }

    /// Checks that degree `i` holds `held_entries` entries of each kind, each of
    /// the block's size (`import_meta` and every step keep it so; only a step that failed
    /// half-way could leave a degree out of step).
    fn check_rings(&self, i: usize) -> Result<(), ImexError> {
        let d = &self.degrees[i];
        let rings = [&d.hist_au, &d.hist_n, &d.hist_lu];
        for (ring, count) in rings.into_iter().zip(self.held_entries()) {
            if ring.len() != count {
                return Err(ImexError::LengthMismatch {
                    what: "history entries held for a degree",
                    expected: count,
                    got: ring.len(),
                });
            }
            if let Some(e) = ring.iter().find(|e| e.len() != d.size()) {
                return Err(ImexError::LengthMismatch {
                    what: "history entry of a degree",
                    expected: d.size(),
                    got: e.len(),
                });
            }
        }
        Ok(())
    }

    /// The scalar state: scheme name, time, completed steps, step-size history and filled
    /// history entries (see [`StepperMeta`] for the whole checkpoint).
    ///
    /// Fails while a step is in progress ([`ImexError::StepInProgress`]) or an import is
    /// incomplete ([`ImexError::IncompleteImport`]).
    pub fn export_meta(&self) -> Result<StepperMeta, ImexError> {
        self.check_exportable()?;
        Ok(StepperMeta {
            scheme: self.scheme.name().to_string(),
            time: self.time,
            steps: self.steps,
            dt_history: self.dt_hist,
            filled: self.filled,
        })
    }

    /// Sets the scalar state from a checkpoint and makes room for
    /// [`Stepper::history_entries`] history entries per kind, to be filled by
    /// [`Stepper::import_mode`] for every held mode before the next step or export.
    ///
    /// Validates everything before changing anything: no step in progress
    /// ([`ImexError::StepInProgress`]); the same scheme name ([`ImexError::SchemeMismatch`]);
    /// a finite time ([`ImexError::InvalidTime`]); finite, non-negative step sizes, positive for
    /// the `min(steps, 2)` newest ([`ImexError::InvalidStepHistory`]); `filled` at most the
    /// scheme's history depth and at most `steps` ([`ImexError::HistoryDepth`]). The LU
    /// factors and boundary values are kept.
    pub fn import_meta(&mut self, meta: &StepperMeta) -> Result<(), ImexError> {
        if let Some(p) = &self.pending {
            return Err(ImexError::StepInProgress { stage: p.stage });
        }
        if meta.scheme != self.scheme.name() {
            return Err(ImexError::SchemeMismatch {
                expected: self.scheme.name().to_string(),
                got: meta.scheme.clone(),
            });
        }
        if !meta.time.is_finite() {
            return Err(ImexError::InvalidTime { got: meta.time });
        }
        let taken = meta.steps.min(2) as usize;
        for (index, &dt) in meta.dt_history.iter().enumerate() {
            let valid = dt.is_finite() && if index < taken { dt > 0.0 } else { dt >= 0.0 };
            if !valid {
                return Err(ImexError::InvalidStepHistory {
                    index,
                    got: dt,
                    taken,
                });
            }
        }
        let depth = self.scheme.multistep().map_or(0, |ms| ms.steps());
        let max = usize::try_from(meta.steps).map_or(depth, |s| s.min(depth));
        if meta.filled > max {
            return Err(ImexError::HistoryDepth {
                scheme: meta.scheme.clone(),
                max,
                got: meta.filled,
            });
        }

        self.time = meta.time;
        self.steps = meta.steps;
        self.dt_hist = meta.dt_history;
        self.filled = meta.filled;
        let held = self.held_entries();
        // Held entries that are not imported are never read: zero placeholders.
        let any = self.history_entries().iter().any(|&n| n > 0);
        self.missing_modes = 0;
        for d in &mut self.degrees {
            let size = d.size();
            for (ring, count) in [&mut d.hist_au, &mut d.hist_n, &mut d.hist_lu]
                .into_iter()
                .zip(held)
            {
                ring.truncate(count);
                for e in ring.iter_mut() {
                    e.clear();
                    e.resize(size, 0.0);
                }
                ring.resize_with(count, || vec![0.0; size]);
            }
            d.missing.clear();
            d.missing.resize(d.ncols / 2, any);
            if any {
                self.missing_modes += d.ncols / 2;
            }
        }
        Ok(())
    }

    /// Appends the history of mode `(l, m)` to `out`: [`Stepper::mode_history_len`] values in
    /// the order given at [`StepperMeta`] (nothing for DIRK schemes).
    ///
    /// Fails, leaving `out` as it was, for a mode not held ([`ImexError::ModeNotHeld`]), while a
    /// step is in progress ([`ImexError::StepInProgress`]) or an import is incomplete
    /// ([`ImexError::IncompleteImport`]).
    pub fn export_mode(&self, l: usize, m: usize, out: &mut Vec<f64>) -> Result<(), ImexError> {
        self.check_exportable()?;
        let (i, k) = self.locate_mode(l, m)?;
        let d = &self.degrees[i];
        self.check_rings(i)?;
        let (nr, nm) = (d.nr, d.ncols / 2);
        out.reserve(self.mode_history_len());
        let rings = [&d.hist_au, &d.hist_n, &d.hist_lu];
        for (ring, count) in rings.into_iter().zip(self.history_entries()) {
            for e in &ring[..count] {
                out.extend_from_slice(&e[k * nr..(k + 1) * nr]);
                out.extend_from_slice(&e[(nm + k) * nr..(nm + k + 1) * nr]);
            }
        }
        Ok(())
    }

    /// Sets the history of mode `(l, m)` from `data` as [`Stepper::export_mode`] wrote it,
    /// for the number of entries set by the last [`Stepper::import_meta`] (call that first).
    ///
    /// Validates before changing anything: the mode is held ([`ImexError::ModeNotHeld`]), no
    /// step is in progress ([`ImexError::StepInProgress`]), `data` has
    /// [`Stepper::mode_history_len`] values ([`ImexError::HistoryLength`]), all finite
    /// ([`ImexError::NonFiniteHistory`]). Importing a mode again overwrites it.
    pub fn import_mode(&mut self, l: usize, m: usize, data: &[f64]) -> Result<(), ImexError> {
        if let Some(p) = &self.pending {
            return Err(ImexError::StepInProgress { stage: p.stage });
        }
        let (i, k) = self.locate_mode(l, m)?;
        let expected = self.mode_history_len();
        if data.len() != expected {
            return Err(ImexError::HistoryLength {
                l,
                m,
                entries: self.history_entries().iter().sum(),
                expected,
                got: data.len(),
            });
        }
        if let Some(index) = data.iter().position(|v| !v.is_finite()) {
            return Err(ImexError::NonFiniteHistory {
                l,
                m,
                index,
                value: data[index],
            });
        }
        self.check_rings(i)?;
        let counts = self.history_entries();
        let d = &mut self.degrees[i];
        let (nr, nm) = (d.nr, d.ncols / 2);
        let targets = [&mut d.hist_au, &mut d.hist_n, &mut d.hist_lu]
            .into_iter()
            .zip(counts)
            .flat_map(|(ring, count)| ring[..count].iter_mut());
        for (e, chunk) in targets.zip(data.chunks_exact(2 * nr)) {
            let (re, im) = chunk.split_at(nr);
            e[k * nr..(k + 1) * nr].copy_from_slice(re);
            e[(nm + k) * nr..(nm + k + 1) * nr].copy_from_slice(im);
        }
        if d.missing.get(k).copied().unwrap_or(false) {
            d.missing[k] = false;
            self.missing_modes -= 1;
        }
        Ok(())
    }
}
