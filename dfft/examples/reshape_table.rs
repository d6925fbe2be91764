//! Prints the number of reshapes (all-to-all rounds) of a forward plus
//! backward transform pair for brick, pencil and slab inputs, with the
//! classic pencil pipeline and with the minimum-reshape selection.
//!
//! `cargo run --release -p parnum-dfft --example reshape_table [-- NX NY NZ RANKS]`

use dfft::{Fft3d, Layout, Options, Output, Selection};

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
    if p == 0 || g.contains(&0) {
        eprintln!("error: the grid and the rank count must be positive, got {g:?} on {p} ranks");
        std::process::exit(2);
    }
    // A layout the shape cannot take on this many ranks (more ranks on an
    // axis than it has points) is a row that says why, not a failure.
    let rows = comm::local::run(p, |c| {
        let inputs = [
            ("bricks", Layout::bricks(g, p)),
            ("pencils (z whole)", Layout::pencils(g, p, 2)),
            ("pencils (x whole)", Layout::pencils(g, p, 0)),
            ("slabs (split x)", Layout::slabs(g, p, 0)),
        ];
        let mut out = vec![];
        for (name, l) in inputs {
            let l = match l {
                Ok(l) => l,
                Err(e) => {
                    out.push((name, Err(e.to_string())));
                    continue;
                }
            };
            let count = |selection, output| -> Result<usize, dfft::FftError> {
                let o = Options {
                    selection,
                    output,
                    ..Options::default()
                };
                Ok(2 * Fft3d::c2c(c, &l, o)?.reshapes())
            };
            let counts = (|| {
                Ok::<_, dfft::FftError>((
                    count(Selection::Pencils, Output::Input)?,
                    count(Selection::MinReshape, Output::Input)?,
                    count(Selection::MinReshape, Output::Transposed)?,
                ))
            })();
            out.push((name, counts.map_err(|e| e.to_string())));
        }
        Ok::<_, dfft::FftError>(out)
    });
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    for (name, r) in &rows[0] {
        match r {
            Ok((a, b, c)) => println!("{name:<22} {a:>16} {b:>22} {c:>22}"),
            Err(e) => println!("{name:<22} not possible: {e}"),
        }
    }
}
