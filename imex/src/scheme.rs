//! Time schemes as data: IMEX multistep weights and IMEX DIRK Butcher tableaux.
//!
//! All schemes integrate `A du/dt = L u + N(u, t)`, with `L u` implicit and `N` explicit.

use std::fmt;
use std::str::FromStr;

use crate::ImexError;

/// Which family a scheme belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemeKind {
    /// IMEX linear multistep: one explicit evaluation and one implicit solve per step, past
    /// states kept in a history; not self-starting.
    Multistep,
    /// IMEX diagonally implicit Runge-Kutta with an explicit first stage: several explicit
    /// evaluations and implicit solves per step, self-starting.
    Dirk,
}

/// Constant-step weights of a `k`-step IMEX multistep scheme in the form of the MagIC paper
/// (Schaeffer et al.'s Eq. 16):
///
/// ```text
/// (A - dt bI_0 L) u^{n+1} = sum_{j=1..k} a_j A u^{n+1-j}
///                         + dt sum_{j=1..k} ( bE_j N^{n+1-j} + bI_j L u^{n+1-j} )
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MultistepWeights {
    /// `a_1 .. a_k`, the weights of the past states `A u^{n+1-j}`.
    pub a: Vec<f64>,
    /// `bE_1 .. bE_k`, the weights of the past explicit terms `N^{n+1-j}`.
    pub b_exp: Vec<f64>,
    /// `bI_0 .. bI_k`, the weight of the new implicit term first, then the past ones.
    pub b_imp: Vec<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Cnab2,
    Sbdf(usize),
}

/// A multistep scheme: constant-step weights, plus the variable-step and start-up rules the
/// stepper applies (see [`Scheme`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MultistepScheme {
    name: &'static str,
    order: usize,
    family: Family,
    weights: MultistepWeights,
}

impl MultistepScheme {
    /// The scheme's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The order of accuracy.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The constant-step weights.
    pub fn weights(&self) -> &MultistepWeights {
        &self.weights
    }

    /// Number of past steps the scheme reads (the history depth `k`).
    pub fn steps(&self) -> usize {
        self.weights.a.len()
    }

    /// Whether past implicit terms `L u^{n+1-j}` (`j >= 1`) are ever used.
    pub(crate) fn uses_implicit_history(&self) -> bool {
        matches!(self.family, Family::Cnab2)
    }

    /// How many of the newest held entries of each history kind (`[A u, N, L u]`) a later step
    /// can still read, with `filled` entries held after a completed step. Every step pushes one
    /// entry into each ring before reading any, so the oldest entry of a full ring (index
    /// `k - 1`) is overwritten unread; and CNAB2 never reads its older `A u` and `L u` (`a_2` and
    /// `bI_2` are 0 in every variant of [`MultistepScheme::step_weights`]). The test
    /// `readable_history_covers_every_weight_read` checks this against the weights.
    pub(crate) fn readable_history(&self, filled: usize) -> [usize; 3] {
        let kept = filled.min(self.steps() - 1);
        match self.family {
            Family::Cnab2 => [0, kept, 0],
            Family::Sbdf(_) => [kept, kept, 0],
        }
    }
}

/// Weights of one multistep step, after the start-up and variable-step rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct StepWeights {
    /// Number of history entries read (1..=3).
    pub k: usize,
    pub a: [f64; 3],
    pub b_exp: [f64; 3],
    /// `b_imp[0]` is the weight of the new step.
    pub b_imp: [f64; 4],
}

impl StepWeights {
    fn from_slices(a: &[f64], b_exp: &[f64], b_imp: &[f64]) -> Self {
        let mut w = Self {
            k: a.len(),
            a: [0.0; 3],
            b_exp: [0.0; 3],
            b_imp: [0.0; 4],
        };
        w.a[..a.len()].copy_from_slice(a);
        w.b_exp[..b_exp.len()].copy_from_slice(b_exp);
        w.b_imp[..b_imp.len()].copy_from_slice(b_imp);
        w
    }
}

/// CNAB2 (Crank-Nicolson for L, second-order Adams-Bashforth for N), as in the MagIC paper:
/// a = (1, 0), bE = (3/2, -1/2), bI = (1/2, 1/2, 0).
fn cnab2_weights() -> MultistepWeights {
    MultistepWeights {
        a: vec![1.0, 0.0],
        b_exp: vec![1.5, -0.5],
        b_imp: vec![0.5, 0.5, 0.0],
    }
}

/// SBDF-k of Ascher, Ruuth & Wetton (1995), "Implicit-explicit methods for time-dependent
/// partial differential equations", SIAM J. Numer. Anal. 32(3), 797-823, Sect. 3:
///
/// ```text
/// SBDF1:  u^{n+1} - u^n                                  = dt ( N^n                     + L u^{n+1} )
/// SBDF2:  3/2 u^{n+1} - 2 u^n + 1/2 u^{n-1}              = dt ( 2 N^n - N^{n-1}         + L u^{n+1} )
/// SBDF3:  11/6 u^{n+1} - 3 u^n + 3/2 u^{n-1} - 1/3 u^{n-2} = dt ( 3 N^n - 3 N^{n-1} + N^{n-2} + L u^{n+1} )
/// ```
///
/// divided by the leading coefficient to match the form of [`MultistepWeights`].
fn sbdf_weights(k: usize) -> MultistepWeights {
    match k {
        1 => MultistepWeights {
            a: vec![1.0],
            b_exp: vec![1.0],
            b_imp: vec![1.0, 0.0],
        },
        2 => MultistepWeights {
            a: vec![4.0 / 3.0, -1.0 / 3.0],
            b_exp: vec![4.0 / 3.0, -2.0 / 3.0],
            b_imp: vec![2.0 / 3.0, 0.0, 0.0],
        },
        _ => MultistepWeights {
            a: vec![18.0 / 11.0, -9.0 / 11.0, 2.0 / 11.0],
            b_exp: vec![18.0 / 11.0, -18.0 / 11.0, 6.0 / 11.0],
            b_imp: vec![6.0 / 11.0, 0.0, 0.0, 0.0],
        },
    }
}

/// Variable-step SBDF-k weights from the Lagrange polynomials on the actual time levels
/// (Wang & Ruuth 2008, "Variable step-size implicit-explicit linear multistep methods for
/// time-dependent partial differential equations", J. Comput. Math. 26(6)): the BDF derivative
/// of the interpolant of `u^{n+1}, u^n, ...` at `t^{n+1}` and the extrapolation of
/// `N^n, N^{n-1}, ...` to `t^{n+1}`. `steps[0]` is the new step, `steps[1]` the previous one, ...
pub(crate) fn sbdf_variable(k: usize, steps: &[f64]) -> StepWeights {
    // Nodes in units of the new step: s_0 = 0 (t^{n+1}), s_1 = -1 (t^n), s_2, s_3 further back.
    let mut s = [0.0f64; 4];
    let mut acc = 0.0;
    for j in 1..=k {
        acc += steps[j - 1] / steps[0];
        s[j] = -acc;
    }
    // alpha_j = k_n * l_j'(t^{n+1}).
    let mut alpha = [0.0f64; 4];
    alpha[0] = (1..=k).map(|i| -1.0 / s[i]).sum();
    for j in 1..=k {
        let mut num = 1.0;
        let mut den = 1.0;
        for i in 0..=k {
            if i == j {
                continue;
            }
            den *= s[j] - s[i];
            if i != 0 {
                num *= -s[i];
            }
        }
        alpha[j] = num / den;
    }
    // beta_j: extrapolation weights of N at t^{n+1} from the nodes s_1..s_k.
    let mut beta = [0.0f64; 3];
    for j in 1..=k {
        let mut w = 1.0;
        for i in 1..=k {
            if i != j {
                w *= -s[i] / (s[j] - s[i]);
            }
        }
        beta[j - 1] = w;
    }
    let mut out = StepWeights {
        k,
        a: [0.0; 3],
        b_exp: [0.0; 3],
        b_imp: [0.0; 4],
    };
    for j in 1..=k {
        out.a[j - 1] = -alpha[j] / alpha[0];
        out.b_exp[j - 1] = beta[j - 1] / alpha[0];
    }
    out.b_imp[0] = 1.0 / alpha[0];
    out
}

impl MultistepScheme {
    /// The weights of the next step, given how many past states the history holds (before the
    /// current one is pushed) and the step sizes (`steps[0]` the new one, then older ones).
    ///
    /// Start-up: CNAB2's first step is Crank-Nicolson with a forward-Euler explicit term
    /// (a = (1), bE = (1), bI = (1/2, 1/2)), as MagIC does, so it needs no extra factorisation;
    /// SBDF2's first step is SBDF1 (IMEX Euler). SBDF3 starts with two BPR353 steps, handled by
    /// the stepper (a first-order start would cap SBDF3 at second order).
    pub(crate) fn step_weights(&self, filled: usize, steps: &[f64; 3]) -> StepWeights {
        let constant = |n: usize| steps[1..n].iter().all(|&h| h == steps[0]);
        match self.family {
            Family::Cnab2 => {
                if filled == 0 {
                    StepWeights::from_slices(&[1.0], &[1.0], &[0.5, 0.5])
                } else if constant(2) {
                    let w = &self.weights;
                    StepWeights::from_slices(&w.a, &w.b_exp, &w.b_imp)
                } else {
                    let omega = steps[0] / steps[1];
                    StepWeights::from_slices(
                        &[1.0, 0.0],
                        &[1.0 + 0.5 * omega, -0.5 * omega],
                        &[0.5, 0.5, 0.0],
                    )
                }
            }
            Family::Sbdf(k) => {
                let k = k.min(filled + 1);
                if constant(k) {
                    let w = sbdf_weights(k);
                    StepWeights::from_slices(&w.a, &w.b_exp, &w.b_imp)
                } else {
                    sbdf_variable(k, steps)
                }
            }
        }
    }
}

/// The Butcher tableaux of an IMEX DIRK scheme with an explicit first stage (type "ARS" /
/// "CK"): stage `i` solves
///
/// ```text
/// (A - dt aI_ii L) U_i = A u^n + dt sum_{j<i} ( aE_ij N(U_j, t^n + c_j dt) + aI_ij L U_j )
/// ```
///
/// and `A u^{n+1} = A u^n + dt sum_j ( bE_j N_j + bI_j L U_j )`, which is `u^{n+1} = U_s`
/// when both `b` equal the last rows ("stiffly accurate"). All implicit diagonal entries
/// `aI_ii` (`i >= 1`) are equal, so one factorisation per degree serves every stage.
#[derive(Clone, Debug, PartialEq)]
pub struct DirkTableau {
    name: String,
    order: usize,
    s: usize,
    a_exp: Vec<f64>,
    a_imp: Vec<f64>,
    b_exp: Vec<f64>,
    b_imp: Vec<f64>,
    c: Vec<f64>,
}

impl DirkTableau {
    /// Builds and validates a tableau. `a_exp` and `a_imp` are `s x s` (row `i` = stage `i`),
    /// `b_exp`, `b_imp` and `c` have `s` entries. Requirements: `a_exp` strictly lower
    /// triangular; `a_imp` lower triangular with an all-zero first row; equal, positive diagonal
    /// `a_imp[i][i]` for `i >= 1`; `c[0] = 0`; row sums of both tableaux equal to `c` (to 1e-12).
    pub fn new(
        name: impl Into<String>,
        order: usize,
        a_exp: Vec<Vec<f64>>,
        a_imp: Vec<Vec<f64>>,
        b_exp: Vec<f64>,
        b_imp: Vec<f64>,
        c: Vec<f64>,
    ) -> Result<Self, ImexError> {
        let name = name.into();
        let bad = |reason: String| ImexError::InvalidTableau {
            name: name.clone(),
            reason,
        };
        let s = c.len();
        if s < 2 {
            return Err(bad(format!("expected at least 2 stages, got {s}")));
        }
        for (what, m) in [("explicit A", &a_exp), ("implicit A", &a_imp)] {
            if m.len() != s || m.iter().any(|r| r.len() != s) {
                return Err(bad(format!(
                    "{what} must be {s} x {s} (the length of c), got {} rows of lengths {:?}",
                    m.len(),
                    m.iter().map(Vec::len).collect::<Vec<_>>()
                )));
            }
        }
        for (what, b) in [("explicit b", &b_exp), ("implicit b", &b_imp)] {
            if b.len() != s {
                return Err(bad(format!(
                    "{what} must have {s} entries, got {}",
                    b.len()
                )));
            }
        }
        let all = a_exp
            .iter()
            .chain(a_imp.iter())
            .flatten()
            .chain(b_exp.iter())
            .chain(b_imp.iter())
            .chain(c.iter());
        if all.clone().any(|v| !v.is_finite()) {
            return Err(bad("all coefficients must be finite".into()));
        }
        if c[0] != 0.0 {
            return Err(bad(format!("expected c[0] = 0, got {}", c[0])));
        }
        for i in 0..s {
            for j in i..s {
                if a_exp[i][j] != 0.0 {
                    return Err(bad(format!(
                        "explicit A must be strictly lower triangular, entry ({i}, {j}) is {}",
                        a_exp[i][j]
                    )));
                }
                if j > i && a_imp[i][j] != 0.0 {
                    return Err(bad(format!(
                        "implicit A must be lower triangular, entry ({i}, {j}) is {}",
                        a_imp[i][j]
                    )));
                }
            }
        }
        if a_imp[0].iter().any(|&v| v != 0.0) {
            return Err(bad(
                "the first stage must be explicit: row 0 of implicit A must be zero".into(),
            ));
        }
        let gamma = a_imp[1][1];
        if gamma <= 0.0 {
            return Err(bad(format!(
                "the implicit diagonal must be positive, got {gamma}"
            )));
        }
        for (i, row) in a_imp.iter().enumerate().skip(1) {
            if row[i] != gamma {
                return Err(bad(format!(
                    "the implicit diagonal must be constant (singly diagonal): entry ({i}, {i}) is \
                     {}, expected {gamma}",
                    row[i]
                )));
            }
        }
        for i in 0..s {
            for (what, m) in [("explicit", &a_exp), ("implicit", &a_imp)] {
                let sum: f64 = m[i].iter().sum();
                if (sum - c[i]).abs() > 1e-12 {
                    return Err(bad(format!(
                        "row {i} of the {what} tableau sums to {sum}, expected c[{i}] = {}",
                        c[i]
                    )));
                }
            }
        }
        Ok(Self {
            name,
            order,
            s,
            a_exp: a_exp.concat(),
            a_imp: a_imp.concat(),
            b_exp,
            b_imp,
            c,
        })
    }

    /// The scheme's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The order of accuracy.
    pub fn order(&self) -> usize {
        self.order
    }

    /// Number of stages `s`, the explicit first stage included.
    pub fn stages(&self) -> usize {
        self.s
    }

    /// The implicit diagonal `aI_ii` (`i >= 1`).
    pub fn gamma(&self) -> f64 {
        self.a_imp[self.s + 1]
    }

    /// Explicit tableau entry `aE_ij` (zero outside).
    pub fn a_exp(&self, i: usize, j: usize) -> f64 {
        if i < self.s && j < self.s {
            self.a_exp[i * self.s + j]
        } else {
            0.0
        }
    }

    /// Implicit tableau entry `aI_ij` (zero outside).
    pub fn a_imp(&self, i: usize, j: usize) -> f64 {
        if i < self.s && j < self.s {
            self.a_imp[i * self.s + j]
        } else {
            0.0
        }
    }

    /// Explicit weights `bE`.
    pub fn b_exp(&self) -> &[f64] {
        &self.b_exp
    }

    /// Implicit weights `bI`.
    pub fn b_imp(&self) -> &[f64] {
        &self.b_imp
    }

    /// Stage times `c` (in units of `dt`, from `t^n`).
    pub fn c(&self) -> &[f64] {
        &self.c
    }

    /// Whether both weight vectors equal the last rows of their tableaux, so that
    /// `u^{n+1} = U_s` (no assembly solve).
    pub fn stiffly_accurate(&self) -> bool {
        let last = self.s - 1;
        (0..self.s)
            .all(|j| self.b_exp[j] == self.a_exp(last, j) && self.b_imp[j] == self.a_imp(last, j))
    }

    /// Whether the explicit term of stage `i` is ever read.
    pub(crate) fn needs_explicit(&self, i: usize) -> bool {
        i == 0
            || (i + 1..self.s).any(|r| self.a_exp(r, i) != 0.0)
            || (!self.stiffly_accurate() && self.b_exp[i] != 0.0)
    }

    /// Whether the implicit term `L U_i` of stage `i` is ever read.
    pub(crate) fn needs_implicit(&self, i: usize) -> bool {
        (i + 1..self.s).any(|r| self.a_imp(r, i) != 0.0)
            || (!self.stiffly_accurate() && self.b_imp[i] != 0.0)
    }
}

/// ARS(2,2,2), Ascher, Ruuth & Spiteri (1997), "Implicit-explicit Runge-Kutta methods for
/// time-dependent partial differential equations", Appl. Numer. Math. 25, 151-167, Sect. 2.6:
/// gamma = 1 - 1/sqrt(2), delta = 1 - 1/(2 gamma) = -1/sqrt(2). L-stable, stiffly accurate.
fn ars222() -> DirkTableau {
    // Each literal is the shortest decimal that round-trips to the double nearest to the exact
    // value, which is given to 25 digits in the comment.
    // gamma = 1 - 1/sqrt(2) = 0.2928932188134524755991556
    const G: f64 = 0.2928932188134525;
    // 1 - gamma = 1/sqrt(2) = 0.7071067811865475244008444
    const ONE_MINUS_G: f64 = std::f64::consts::FRAC_1_SQRT_2;
    // delta = 1 - 1/(2 gamma) = -1/sqrt(2)
    const D: f64 = -std::f64::consts::FRAC_1_SQRT_2;
    // 1 - delta = 1 + 1/sqrt(2) = 1.707106781186547524400844
    const ONE_MINUS_D: f64 = 1.7071067811865475;
    DirkTableau::new(
        "ARS222",
        2,
        vec![
            vec![0.0, 0.0, 0.0],
            vec![G, 0.0, 0.0],
            vec![D, ONE_MINUS_D, 0.0],
        ],
        vec![
            vec![0.0, 0.0, 0.0],
            vec![0.0, G, 0.0],
            vec![0.0, ONE_MINUS_G, G],
        ],
        vec![D, ONE_MINUS_D, 0.0],
        vec![0.0, ONE_MINUS_G, G],
        vec![0.0, G, 1.0],
    )
    .expect("ARS222 tableau is valid")
}

/// ARS(3,4,3), Ascher, Ruuth & Spiteri (1997), Sect. 2.7. The implicit part is the L-stable
/// three-stage SDIRK of order 3: gamma is the root in (1/6, 1/2) of
/// `6 g^3 - 18 g^2 + 9 g - 1 = 0` (0.4358665215 in the paper), b1 = -3/2 g^2 + 4 g - 1/4,
/// b2 = 3/2 g^2 - 5 g + 5/4, row 3 = (0, (1 - g)/2, g), c = (0, g, (1 + g)/2, 1).
///
/// The paper prints the explicit entries to 10 digits only (0.3212788860, 0.3966543747,
/// -0.105858296, 0.5529291479, 0.5529291479). Here they are the exact solution of the
/// conditions those printed values satisfy: row sums c3 and 1, aE_42 = aE_43, the third-order
/// condition `bE^T AE c = 1/6`, and `bE^T AE AE c = 1/24` (the explicit stability polynomial
/// is that of classical RK4; the printed values satisfy it to 1.3e-11). They agree with the
/// printed values to 1.4e-10. The non-stiffly-accurate explicit weights (bE = bI) need one
/// assembly solve with `A_l` per step.
fn ars343() -> DirkTableau {
    // Shortest round-trip literals of the nearest doubles; exact values to 25 digits in the
    // comments (computed with 50-digit arithmetic).
    // gamma = 0.4358665215084589994160195
    const G: f64 = 0.435866521508459;
    // (1 - gamma)/2 = 0.2820667392457705002919903
    const HALF_ONE_MINUS_G: f64 = 0.2820667392457705;
    // (1 + gamma)/2 = 0.7179332607542294997080097
    const HALF_ONE_PLUS_G: f64 = 0.7179332607542295;
    // b1 = -3/2 gamma^2 + 4 gamma - 1/4 = 1.208496649176010070336478
    const B1: f64 = 1.20849664917601;
    // b2 = 3/2 gamma^2 - 5 gamma + 5/4 = -0.6443631706844690697524971
    const B2: f64 = -0.644363170684469;
    // aE_31 = 0.3212788860286277549068316
    const E31: f64 = 0.32127888602862775;
    // aE_32 = 0.3966543747256017448011781
    const E32: f64 = 0.3966543747256017;
    // aE_41 = -0.1058582960718796471457386
    const E41: f64 = -0.10585829607187965;
    // aE_42 = aE_43 = 0.5529291480359398235728693
    const E42: f64 = 0.5529291480359398;
    DirkTableau::new(
        "ARS343",
        3,
        vec![
            vec![0.0, 0.0, 0.0, 0.0],
            vec![G, 0.0, 0.0, 0.0],
            vec![E31, E32, 0.0, 0.0],
            vec![E41, E42, E42, 0.0],
        ],
        vec![
            vec![0.0, 0.0, 0.0, 0.0],
            vec![0.0, G, 0.0, 0.0],
            vec![0.0, HALF_ONE_MINUS_G, G, 0.0],
            vec![0.0, B1, B2, G],
        ],
        vec![0.0, B1, B2, G],
        vec![0.0, B1, B2, G],
        vec![0.0, G, HALF_ONE_PLUS_G, 1.0],
    )
    .expect("ARS343 tableau is valid")
}

/// BPR(3,5,3), Boscarino, Pareschi & Russo (2013), "Implicit-explicit Runge-Kutta schemes for
/// hyperbolic systems and kinetic equations in the diffusion limit", SIAM J. Sci. Comput. 35(1),
/// A22-A51 (as implemented in MagIC's `dirk.f90`). Rational coefficients, gamma = 1/2, stiffly
/// accurate in both parts; the explicit term of stage 4 is never read.
fn bpr353() -> DirkTableau {
    DirkTableau::new(
        "BPR353",
        3,
        vec![
            vec![0.0, 0.0, 0.0, 0.0, 0.0],
            vec![1.0, 0.0, 0.0, 0.0, 0.0],
            vec![4.0 / 9.0, 2.0 / 9.0, 0.0, 0.0, 0.0],
            vec![0.25, 0.0, 0.75, 0.0, 0.0],
            vec![0.25, 0.0, 0.75, 0.0, 0.0],
        ],
        vec![
            vec![0.0, 0.0, 0.0, 0.0, 0.0],
            vec![0.5, 0.5, 0.0, 0.0, 0.0],
            vec![5.0 / 18.0, -1.0 / 9.0, 0.5, 0.0, 0.0],
            vec![0.5, 0.0, 0.0, 0.5, 0.0],
            vec![0.25, 0.0, 0.75, -0.5, 0.5],
        ],
        vec![0.25, 0.0, 0.75, 0.0, 0.0],
        vec![0.25, 0.0, 0.75, -0.5, 0.5],
        vec![0.0, 1.0, 2.0 / 3.0, 1.0, 1.0],
    )
    .expect("BPR353 tableau is valid")
}

pub(crate) enum SchemeRef<'a> {
    Multistep(&'a MultistepScheme),
    Dirk(&'a DirkTableau),
}

#[derive(Clone, Debug, PartialEq)]
enum Inner {
    Multistep(MultistepScheme),
    Dirk(DirkTableau),
}

/// A time scheme, chosen by name (`"cnab2"`, ...) or built from a custom [`DirkTableau`].
///
/// | name | kind | order | start / notes |
/// |---|---|---|---|
/// | `cnab2` | multistep | 2 | first step CN + forward Euler for N (MagIC's choice); variable dt: bE = (1 + w/2, -w/2), w = dt_n / dt_{n-1} |
/// | `sbdf1` | multistep | 1 | IMEX Euler |
/// | `sbdf2` | multistep | 2 | first step SBDF1; variable dt: Wang & Ruuth (2008) |
/// | `sbdf3` | multistep | 3 | first two steps BPR353; variable dt: Wang & Ruuth (2008) |
/// | `ars222` | DIRK | 2 | 3 stages, 2 explicit evaluations |
/// | `ars343` | DIRK | 3 | 4 stages, 4 explicit evaluations, one assembly solve with `A_l` |
/// | `bpr353` | DIRK | 3 | 5 stages, 3 explicit evaluations |
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    inner: Inner,
}

impl Scheme {
    /// The names [`Scheme::from_name`] accepts (case-insensitively).
    pub const NAMES: &'static [&'static str] = &[
        "cnab2", "sbdf1", "sbdf2", "sbdf3", "ars222", "ars343", "bpr353",
    ];

    /// The scheme with this name (case-insensitive; see [`Scheme::NAMES`]).
    pub fn from_name(name: &str) -> Result<Self, ImexError> {
        let lower = name.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "cnab2" => Self::cnab2(),
            "sbdf1" => Self::sbdf(1),
            "sbdf2" => Self::sbdf(2),
            "sbdf3" => Self::sbdf(3),
            "ars222" => Self::ars222(),
            "ars343" => Self::ars343(),
            "bpr353" => Self::bpr353(),
            _ => {
                return Err(ImexError::UnknownScheme {
                    got: name.to_string(),
                    valid: Self::NAMES.join(", "),
                })
            }
        })
    }

    /// Crank-Nicolson / Adams-Bashforth 2.
    pub fn cnab2() -> Self {
        Self {
            inner: Inner::Multistep(MultistepScheme {
                name: "CNAB2",
                order: 2,
                family: Family::Cnab2,
                weights: cnab2_weights(),
            }),
        }
    }

    /// SBDF1 (IMEX Euler).
    pub fn sbdf1() -> Self {
        Self::sbdf(1)
    }

    /// SBDF2.
    pub fn sbdf2() -> Self {
        Self::sbdf(2)
    }

    /// SBDF3.
    pub fn sbdf3() -> Self {
        Self::sbdf(3)
    }

    fn sbdf(k: usize) -> Self {
        Self {
            inner: Inner::Multistep(MultistepScheme {
                name: ["SBDF1", "SBDF2", "SBDF3"][k - 1],
                order: k,
                family: Family::Sbdf(k),
                weights: sbdf_weights(k),
            }),
        }
    }

    /// ARS(2,2,2).
    pub fn ars222() -> Self {
        Self::dirk(ars222())
    }

    /// ARS(3,4,3).
    pub fn ars343() -> Self {
        Self::dirk(ars343())
    }

    /// BPR(3,5,3).
    pub fn bpr353() -> Self {
        Self::dirk(bpr353())
    }

    /// A DIRK scheme from a validated tableau.
    pub fn dirk(tableau: DirkTableau) -> Self {
        Self {
            inner: Inner::Dirk(tableau),
        }
    }

    /// The scheme's name (upper case for the built-in ones).
    pub fn name(&self) -> &str {
        match &self.inner {
            Inner::Multistep(m) => m.name,
            Inner::Dirk(d) => &d.name,
        }
    }

    /// The order of accuracy.
    pub fn order(&self) -> usize {
        match &self.inner {
            Inner::Multistep(m) => m.order,
            Inner::Dirk(d) => d.order,
        }
    }

    /// Multistep or DIRK.
    pub fn kind(&self) -> SchemeKind {
        match &self.inner {
            Inner::Multistep(_) => SchemeKind::Multistep,
            Inner::Dirk(_) => SchemeKind::Dirk,
        }
    }

    /// The multistep scheme, if this is one.
    pub fn multistep(&self) -> Option<&MultistepScheme> {
        match &self.inner {
            Inner::Multistep(m) => Some(m),
            Inner::Dirk(_) => None,
        }
    }

    /// The DIRK tableau, if this is one.
    pub fn tableau(&self) -> Option<&DirkTableau> {
        match &self.inner {
            Inner::Multistep(_) => None,
            Inner::Dirk(d) => Some(d),
        }
    }

    pub(crate) fn view(&self) -> SchemeRef<'_> {
        match &self.inner {
            Inner::Multistep(m) => SchemeRef::Multistep(m),
            Inner::Dirk(d) => SchemeRef::Dirk(d),
        }
    }

    /// The DIRK scheme that starts this multistep scheme, if it needs one (BPR353 for SBDF3).
    pub fn startup_tableau(&self) -> Option<DirkTableau> {
        match &self.inner {
            Inner::Multistep(m) if m.family == Family::Sbdf(3) => Some(bpr353()),
            _ => None,
        }
    }
}

impl FromStr for Scheme {
    type Err = ImexError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::{abs_diff_eq, assert_abs_diff_eq};

    #[test]
    fn variable_sbdf_reduces_to_constant() {
        for k in 1..=3 {
            let w = sbdf_variable(k, &[0.1, 0.1, 0.1]);
            let c = sbdf_weights(k);
            for j in 0..k {
                // Variable-step formulas at equal steps: a few roundings of
                // weights <= 3 in size. Measured at most 1.1e-16, 90x margin.
                assert!(
                    abs_diff_eq!(w.a[j], c.a[j], epsilon = 1e-14),
                    "k={k} a[{j}]: {} vs {}",
                    w.a[j],
                    c.a[j]
                );
                assert!(
                    abs_diff_eq!(w.b_exp[j], c.b_exp[j], epsilon = 1e-14),
                    "k={k} b_exp[{j}]: {} vs {}",
                    w.b_exp[j],
                    c.b_exp[j]
                );
            }
            // b_imp[0] <= 1 from one or two divisions: measured at most
            // 1.1e-16, 9x margin.
            assert_abs_diff_eq!(w.b_imp[0], c.b_imp[0], epsilon = 1e-15);
        }
    }

    /// Every history entry a later step reads with a non-zero weight is among the entries
    /// [`MultistepScheme::readable_history`] counts (so a checkpoint of those suffices).
    #[test]
    fn readable_history_covers_every_weight_read() {
        let patterns = [
            [1.0, 1.0, 1.0],
            [1.5, 1.0, 1.0],
            [1.0, 1.5, 1.0],
            [1.0, 1.0, 1.5],
            [0.7, 1.3, 0.9],
        ];
        for scheme in [
            Scheme::cnab2(),
            Scheme::sbdf1(),
            Scheme::sbdf2(),
            Scheme::sbdf3(),
        ] {
            let ms = scheme.multistep().unwrap();
            let depth = ms.steps();
            for filled0 in 0..=depth {
                let readable = ms.readable_history(filled0);
                // Step s (1-based) after the checkpoint: s pushes have moved saved entry i to
                // ring index i + s.
                for s in 1..=depth {
                    let filled = (filled0 + s - 1).min(depth);
                    if scheme.startup_tableau().is_some() && filled + 1 < depth {
                        continue; // a DIRK start-up step: reads no history
                    }
                    for steps in &patterns {
                        let w = ms.step_weights(filled, steps);
                        let check = |kind: usize, index: usize, weight: f64| {
                            if weight != 0.0 && index >= s {
                                let saved = index - s;
                                assert!(
                                    saved < readable[kind],
                                    "{}: filled {filled0}, step {s}, {steps:?}: kind {kind} \
                                     reads saved entry {saved}, readable {readable:?}",
                                    scheme.name()
                                );
                            }
                        };
                        for j in 0..w.k {
                            check(0, j, w.a[j]);
                            check(1, j, w.b_exp[j]);
                        }
                        for j in 1..=w.k {
                            check(2, j - 1, w.b_imp[j]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn variable_sbdf2_matches_closed_form() {
        let (h, hp) = (0.3, 0.2);
        let w = h / hp;
        let v = sbdf_variable(2, &[h, hp, 0.0]);
        let d = 1.0 + 2.0 * w;
        // Same weights by two evaluation orders, values <= 2: measured at
        // most 2.2e-16, 45x margin.
        assert_abs_diff_eq!(v.a[0], (1.0 + w) * (1.0 + w) / d, epsilon = 1e-14);
        assert_abs_diff_eq!(v.a[1], -w * w / d, epsilon = 1e-14);
        assert_abs_diff_eq!(v.b_exp[0], (1.0 + w) * (1.0 + w) / d, epsilon = 1e-14);
        assert_abs_diff_eq!(v.b_exp[1], -w * (1.0 + w) / d, epsilon = 1e-14);
        assert_abs_diff_eq!(v.b_imp[0], (1.0 + w) / d, epsilon = 1e-14);
    }
}
