//! Prints the number of reshapes (all-to-all rounds) of a forward plus
//! backward transform pair for brick, pencil and slab inputs, with the
//! classic pencil pipeline and with the minimum-reshape selection.
//!
//! `cargo run --release -p dfft --example reshape_table [-- NX NY NZ RANKS]`

use dfft::{Fft3d, Kind, Layout, Options, Output, Selection};

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (g, p) = if a.len() == 4 {
        ([a[0], a[1], a[2]], a[3])
    } else {
        ([120, 120, 115], 32)
    };
    println!("global {g:?} on {p} ranks: reshapes per forward + backward pair (C2C)");
    println!(
        "{:<22} {:>16} {:>22} {:>22}",
        "input layout", "pencils, input", "min-reshape, input", "min-reshape, transposed"
    );
    let rows = comm::local::run(p, |c| {
        let inputs = [
            ("bricks", Layout::bricks(g, p)?),
            ("pencils (z whole)", Layout::pencils(g, p, 2)?),
            ("pencils (x whole)", Layout::pencils(g, p, 0)?),
            ("slabs (split x)", Layout::slabs(g, p, 0)?),
        ];
        let mut out = vec![];
        for (name, l) in inputs {
            let count = |selection, output| -> Result<usize, dfft::FftError> {
                let o = Options {
                    selection,
                    output,
                    ..Options::default()
                };
                Ok(2 * Fft3d::new(c, &l, Kind::C2C, o)?.reshapes())
            };
            out.push((
                name,
                count(Selection::Pencils, Output::Input)?,
                count(Selection::MinReshape, Output::Input)?,
                count(Selection::MinReshape, Output::Transposed)?,
            ));
        }
        Ok::<_, dfft::FftError>(out)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (name, a, b, c) in &rows[0] {
        println!("{name:<22} {a:>16} {b:>22} {c:>22}");
    }
}
