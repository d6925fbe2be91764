//! The application kit: what every parnum application repeats, written
//! once, so that an application's own source is its physics (its
//! configuration struct, its solver loop, its diagnostics).
//!
//! | module | what it holds |
//! |---|---|
//! | [`app`] | the shell of a `main`: the common flags ([`RunArgs`](app::RunArgs), [`OutputArgs`](app::OutputArgs), [`CheckpointArgs`](app::CheckpointArgs)), the one `[output]` section ([`Output`](app::Output)) with one meaning of `*_every` and `-q` in every application, [`configure`](app::configure) (defaults < file < flags), [`execute`](app::execute) (checks, launch, summary, files, JSON) |
//! | [`config`] | TOML files into serde structs with unknown keys rejected, [`PerAxis`](config::PerAxis) values, command-line parsers such as [`parse_triple`](config::parse_triple), the [`set_from!`] override macro |
//! | [`validate`] | checks that name the value and the valid range |
//! | [`launch`] | a `main` on in-process ranks or under `mpirun`: rank 0's result, the error printed, the exit status |
//! | [`output`] | atomic files (temporary file, fsync, rename), JSON reports, the output folder created collectively |
//! | [`csv`] | time series with a fixed column set, one flushed row per call |
//! | [`vtk`] | VTK XML image data (one `.vti` piece per rank and the `.pvti` header) and structured grids (curvilinear points: `.vts` pieces and the `.pvts` header), several named scalar or vector point or cell fields |
//! | [`plot`] | line charts as PNG files (time series such as energies against time) with `plotters`: ticks, labels, legend, optional log-scale y axis, text in the embedded DejaVu Sans |
//! | [`checkpoint`] | checkpoint files: a header (app, shape, step, time, key/values), the payload and a CRC-32C, written atomically and checked on reading |
//! | [`crc32c`] | the CRC-32C checksum of the checkpoints |
//! | [`hash`] | the decomposition-independent hash of a distributed field |
//! | [`progress`] | a progress bar on rank 0, hidden when stderr is not a terminal |
//!
//! Nothing here is specific to a physical model, and nothing here chooses
//! the parallel backend: [`launch`] defers to [`comm::launch`].
#![warn(missing_docs)]

pub mod app;
pub mod checkpoint;
pub mod config;
pub mod crc32c;
pub mod csv;
pub mod hash;
pub mod launch;
pub mod output;
pub mod plot;
pub mod progress;
pub mod stats;
pub mod validate;
pub mod vtk;

pub use hash::field_hash;
