//! Derivatives of a real field with 1D transforms along their own axes only.
//!
//! A derivative along axis `a` needs `a` whole, not a 3D transform: the
//! field moves to a layout where `a` is whole, goes through a 1D transform
//! along `a`, is multiplied by `(i k_a)^p`, transformed back and returned to
//! the input layout. A mixed derivative chains two such stages. Axes are
//! visited in the fixed order 2, 1, 0; at each stage only the fields whose
//! next axis it is move (the input field, once, if some derivative starts
//! there; partial results of mixed derivatives), all in one batched reshape.

use crate::fft::{fft_lines_pub, layout_for_axis, C2cPair, Plan1d};
use crate::layout::Layout;
use crate::reshape::{Protocol, Reshape};
use crate::FftError;
use comm::Communicator;
use num_complex::Complex64;
use rustfft::{FftDirection, FftPlanner};

/// One derivative of a real field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Derivative {
    /// First derivative along the axis.
    D1(usize),
    /// Second derivative along the axis.
    D2(usize),
    /// Mixed second derivative along two different axes.
    Mixed(usize, usize),
    /// The Laplacian: the sum of the three second derivatives (computed as
    /// `(d2_2 + d2_1) + d2_0`, a fixed order).
    Laplacian,
}

/// Position of an axis in the visiting order 2, 1, 0.
fn rank_of_axis(a: usize) -> usize {
    2 - a
}

/// One elementary chain of 1D derivative stages: (axis, power) in visiting order.
type Chain = Vec<(usize, u32)>;

fn chains(d: Derivative) -> Result<Vec<Chain>, FftError> {
    let check = |a: usize| {
        if a > 2 {
            Err(FftError::Invalid(format!(
                "derivative axis {a} is out of range (valid: 0, 1, 2)"
            )))
        } else {
            Ok(a)
        }
    };
    Ok(match d {
        Derivative::D1(a) => vec![vec![(check(a)?, 1)]],
        Derivative::D2(a) => vec![vec![(check(a)?, 2)]],
        Derivative::Mixed(a, b) => {
            let (a, b) = (check(a)?, check(b)?);
            if a == b {
                return Err(FftError::Invalid(format!(
                    "a mixed derivative needs two different axes, got {a} twice (use D2({a}))"
                )));
            }
            let mut c = vec![(a, 1), (b, 1)];
            c.sort_by_key(|&(x, _)| rank_of_axis(x));
            vec![c]
        }
        Derivative::Laplacian => vec![vec![(2, 2)], vec![(1, 2)], vec![(0, 2)]],
    })
}

#[derive(Debug)]
struct Stage {
    axis: usize,
    layout: Layout,
    /// Fields moved in: indices into the working set (usize::MAX = input).
    inputs: Vec<usize>,
    /// Per output: (which input, power, working-set slot it becomes).
    outputs: Vec<(usize, u32, usize)>,
    to: Option<Reshape<Complex64>>,
    back: Option<Reshape<Complex64>>,
}

/// Forward and inverse 1D plans per length.
struct Plans1d(Vec<C2cPair>);

impl std::fmt::Debug for Plans1d {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|p| p.0)).finish()
    }
}

/// A planned set of derivatives of one real field in a fixed layout.
#[derive(Debug)]
pub struct Derivatives {
    input: Layout,
    rank: usize,
    requests: Vec<Derivative>,
    /// Per request: the working-set slots summed for it.
    results: Vec<Vec<usize>>,
    stages: Vec<Stage>,
    slots: usize,
    plans: Plans1d,
    lengths: [f64; 3],
    work: Vec<Complex64>,
    line: Vec<Complex64>,
    gather: Vec<Complex64>,
    back: Vec<Complex64>,
    moved: usize,
}

impl Derivatives {
    /// Plans `requests` for a real field in `input` on a periodic box of
    /// side `lengths` (collective).
    pub fn new(
        comm: &dyn Communicator,
        input: &Layout,
        lengths: [f64; 3],
        requests: &[Derivative],
        protocol: Protocol,
    ) -> Result<Self, FftError> {
        if requests.is_empty() {
            return Err(FftError::Invalid("no derivative requested".into()));
        }
        if let Some(d) = (0..3).find(|&d| !(lengths[d] > 0.0 && lengths[d].is_finite())) {
            return Err(FftError::Invalid(format!(
                "box length {} on axis {d} must be positive and finite",
                lengths[d]
            )));
        }
        let p = comm.size();
        if input.ranks() != p {
            return Err(FftError::Invalid(format!(
                "layout grid {:?} holds {} ranks but the communicator has {p}",
                input.dims(),
                input.ranks()
            )));
        }
        let rank = comm.rank();
        // Working set: slot per chain step result. Build chains.
        let mut all: Vec<(usize, Chain)> = vec![];
        for (r, d) in requests.iter().enumerate() {
            for c in chains(*d)? {
                all.push((r, c));
            }
        }
        let mut results = vec![vec![]; requests.len()];
        // current[k]: slot holding chain k's partial result (usize::MAX = the input field).
        let mut current: Vec<usize> = vec![usize::MAX; all.len()];
        let mut step_of: Vec<usize> = vec![0; all.len()];
        let mut slots = 0;
        let mut stages = vec![];
        let mut moved = 0;
        for axis in [2usize, 1, 0] {
            let mut inputs: Vec<usize> = vec![];
            let mut outputs = vec![];
            for (k, (_, chain)) in all.iter().enumerate() {
                if step_of[k] < chain.len() && chain[step_of[k]].0 == axis {
                    let src = current[k];
                    let idx = match inputs.iter().position(|&s| s == src) {
                        Some(i) => i,
                        None => {
                            inputs.push(src);
                            inputs.len() - 1
                        }
                    };
                    // Share identical outputs (same input, same power).
                    let power = chain[step_of[k]].1;
                    let slot = match outputs.iter().find(|&&(i, pw, _)| i == idx && pw == power) {
                        Some(&(_, _, s)) => s,
                        None => {
                            slots += 1;
                            outputs.push((idx, power, slots - 1));
                            slots - 1
                        }
                    };
                    current[k] = slot;
                    step_of[k] += 1;
                }
            }
            if inputs.is_empty() {
                continue;
            }
            let layout = if input.is_whole(axis) {
                input.clone()
            } else {
                layout_for_axis(input.global(), p, axis)?
            };
            let (to, back) = if layout == *input {
                (None, None)
            } else {
                moved += inputs.len() + outputs.len();
                (
                    Some(Reshape::new(comm, input, &layout, inputs.len(), protocol)?),
                    Some(Reshape::new(comm, &layout, input, outputs.len(), protocol)?),
                )
            };
            stages.push(Stage {
                axis,
                layout,
                inputs,
                outputs,
                to,
                back,
            });
        }
        for (k, (r, _)) in all.iter().enumerate() {
            results[*r].push(current[k]);
        }
        let mut planner = FftPlanner::<f64>::new();
        let mut plans = vec![];
        let mut scratch = 0;
        for s in &stages {
            let n = input.global()[s.axis];
            if !plans.iter().any(|p: &C2cPair| p.0 == n) {
                let f = Plan1d::new(&mut planner, n, FftDirection::Forward);
                let b = Plan1d::new(&mut planner, n, FftDirection::Inverse);
                scratch = scratch.max(f.scratch_len()).max(b.scratch_len());
                plans.push((n, f, b));
            }
        }
        let max_n = input.global().iter().copied().max().unwrap_or(1);
        let local_max = stages
            .iter()
            .map(|s| s.layout.local_len(rank))
            .chain([input.local_len(rank)])
            .max()
            .unwrap_or(0);
        let widest = stages
            .iter()
            .map(|s| s.inputs.len() + s.outputs.len())
            .max()
            .unwrap_or(0);
        Ok(Derivatives {
            input: input.clone(),
            rank,
            requests: requests.to_vec(),
            results,
            work: vec![Complex64::default(); local_max * (slots + 1 + 2 * widest)],
            line: vec![Complex64::default(); scratch + max_n],
            gather: vec![Complex64::default(); input.local_len(rank) * widest],
            back: vec![Complex64::default(); input.local_len(rank) * widest],
            stages,
            slots,
            plans: Plans1d(plans),
            lengths,
            moved,
        })
    }

    /// Field moves (one field through one reshape) per call; the input
    /// layout's own axes move nothing.
    pub fn fields_moved(&self) -> usize {
        self.moved
    }

    /// The derivatives, in request order.
    pub fn requests(&self) -> &[Derivative] {
        &self.requests
    }

    /// Elements of the input field.
    pub fn input_len(&self) -> usize {
        self.input.local_len(self.rank)
    }

    /// Elements of the output: one field per request, in the input layout.
    pub fn output_len(&self) -> usize {
        self.input_len() * self.requests.len()
    }

    /// Computes every requested derivative of `f` into `out`.
    pub fn apply(
        &mut self,
        comm: &dyn Communicator,
        f: &[f64],
        out: &mut [f64],
    ) -> Result<(), FftError> {
        let n0 = self.input_len();
        if f.len() != n0 {
            return Err(FftError::LengthMismatch {
                what: "derivative input",
                expected: n0,
                got: f.len(),
            });
        }
        if out.len() != self.output_len() {
            return Err(FftError::LengthMismatch {
                what: "derivative output",
                expected: self.output_len(),
                got: out.len(),
            });
        }
        let rank = self.rank;
        let stride = self.work.len()
            / (self.slots
                + 1
                + 2 * self
                    .stages
                    .iter()
                    .map(|s| s.inputs.len() + s.outputs.len())
                    .max()
                    .unwrap_or(0));
        // Slots 0..slots: partial results in the input layout; slot `slots`:
        // the input field as complex; then two staging areas.
        let (slots_area, staging) = self.work.split_at_mut(stride * (self.slots + 1));
        for (c, &x) in slots_area[self.slots * stride..self.slots * stride + n0]
            .iter_mut()
            .zip(f)
        {
            *c = Complex64::new(x, 0.0);
        }
        let g = self.input.global();
        for st in &mut self.stages {
            let nl = st.layout.local_len(rank);
            let nin = st.inputs.len();
            let nout = st.outputs.len();
            let (a_in, rest) = staging.split_at_mut(stride * nin.max(1));
            let a_in = &mut a_in[..nl * nin];
            let a_out = &mut rest[..nl * nout];
            // Gather the inputs (input layout) and move them to the stage layout.
            let gathered = &mut self.gather[..n0 * nin];
            for (i, &s) in st.inputs.iter().enumerate() {
                let slot = if s == usize::MAX { self.slots } else { s };
                gathered[i * n0..(i + 1) * n0]
                    .copy_from_slice(&slots_area[slot * stride..slot * stride + n0]);
            }
            match &mut st.to {
                Some(r) => r.execute(comm, gathered, a_in)?,
                None => a_in.copy_from_slice(gathered),
            }
            let n = g[st.axis];
            let plan = self.plans.0.iter().find(|p| p.0 == n).expect("planned");
            // Forward along the axis, derivative factors, backward.
            fft_lines_pub(
                &plan.1,
                &st.layout,
                rank,
                st.axis,
                nin,
                a_in,
                &mut self.line,
            );
            let l = self.lengths[st.axis];
            let k_of = |q: usize, power: u32| -> Complex64 {
                let nyq = n.is_multiple_of(2) && q == n / 2;
                let k = crate::wavenumber(q, n, l);
                match power {
                    1 if nyq => Complex64::new(0.0, 0.0),
                    1 => Complex64::new(0.0, k / n as f64),
                    _ => Complex64::new(-k * k / n as f64, 0.0),
                }
            };
            let strides = st.layout.strides(rank);
            let shape = st.layout.local_shape(rank);
            let (oa, ob) = crate::layout::others(st.axis);
            for (o, &(i, power, _)) in st.outputs.iter().enumerate() {
                let src = &a_in[i * nl..(i + 1) * nl];
                let dst = &mut a_out[o * nl..(o + 1) * nl];
                for x in 0..shape[oa] {
                    for y in 0..shape[ob] {
                        let base = x * strides[oa] + y * strides[ob];
                        for q in 0..n {
                            let at = base + q * strides[st.axis];
                            dst[at] = src[at] * k_of(q, power);
                        }
                    }
                }
            }
            fft_lines_pub(
                &plan.2,
                &st.layout,
                rank,
                st.axis,
                nout,
                a_out,
                &mut self.line,
            );
            let back = &mut self.back[..n0 * nout];
            match &mut st.back {
                Some(r) => r.execute(comm, a_out, back)?,
                None => back.copy_from_slice(a_out),
            }
            for (o, &(_, _, slot)) in st.outputs.iter().enumerate() {
                slots_area[slot * stride..slot * stride + n0]
                    .copy_from_slice(&back[o * n0..(o + 1) * n0]);
            }
        }
        for (r, slots) in self.results.iter().enumerate() {
            let dst = &mut out[r * n0..(r + 1) * n0];
            for (j, d) in dst.iter_mut().enumerate() {
                // Fixed summation order (the order of the chains).
                let mut s = slots_area[slots[0] * stride + j].re;
                for &k in &slots[1..] {
                    s += slots_area[k * stride + j].re;
                }
                *d = s;
            }
        }
        Ok(())
    }
}
