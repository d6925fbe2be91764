//! The shell of an application's `main`: the flags every application
//! takes, the one output section, the configuration built from defaults, a
//! file and flags, the checks before a run, the launch, and the ending
//! (summary, the list of files written, the JSON report).
//!
//! An application writes its own flags as a `clap` struct that also
//! derives `Serialize`, with the TOML key of each flag as its field name
//! and `Option` fields (`None` is a flag not given). The shell merges them
//! over the file, which is merged over the configuration's `Default`
//! ([`configure`]), so an application never copies a flag into its
//! configuration by hand. [`Command`] puts them beside the common flags
//! and [`parse`] reads the command line under the application's name.
//!
//! ```no_run
//! use appkit::app::{self, OutputArgs};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! #[serde(deny_unknown_fields, default)]
//! struct Config {
//!     steps: usize,
//!     output: app::Output,
//! }
//!
//! /// The application's own flags: each is the key of the same name.
//! #[derive(Debug, clap::Args, Serialize)]
//! struct Flags {
//!     /// Number of steps.
//!     #[arg(long)]
//!     steps: Option<usize>,
//! }
//!
//! #[derive(Debug, Serialize)]
//! struct Report {
//!     steps: usize,
//!     files: Vec<String>,
//! }
//!
//! impl app::Report for Report {
//!     fn summary(&self) -> String {
//!         format!("{} steps", self.steps)
//!     }
//!     fn files(&self) -> &[String] {
//!         &self.files
//!     }
//! }
//!
//! /// The whole command line: the common flags, `-o`/`--vtk-every`, and ours.
//! type Cli = app::Command<Flags, OutputArgs>;
//!
//! fn main() -> std::process::ExitCode {
//!     let cli: Cli = appkit::parse_command_line!();
//!     app::main(|| {
//!         let cfg: Config = cli.configure(&[])?;
//!         let plan = app::Plan::new(&cli.run).output(cfg.output.dir.as_deref());
//!         app::execute(plan, |_comm, _progress| {
//!             Ok::<_, String>(Report { steps: cfg.steps, files: vec![] })
//!         })
//!     })
//! }
//! ```
//!
//! # One meaning in every application
//!
//! - `-q`/`--quiet`: no progress bar or progress messages, and no list of
//!   the files written. The one-line summary and errors always print.
//! - `vtk_every = N` and `checkpoint_every = N` (`--vtk-every`,
//!   `--checkpoint-every`): with `N > 0`, at every step number that is a
//!   multiple of `N` and after the last step; with `0`, after the last step
//!   only ([`Output::vtk_due`], [`Output::checkpoint_due`]). Step numbers
//!   count from the initial state (step 0) through restarts, so a run
//!   continued from a checkpoint keeps the schedule. `vtk = false`
//!   (`--no-vtk`) and `checkpoint = false` (`--no-checkpoint`) switch the
//!   kind off. Nothing is written without an output folder (`-o`).
//! - `--json FILE`: the report, written after the run by rank 0; its folder
//!   must exist before the run or be the output folder (or inside it),
//!   which the run creates. It is checked before the run starts.
//! - `--ranks N`: in-process ranks (default: one per core, or the
//!   application's own default); ignored under `mpirun`, whose process
//!   count is the rank count.

use crate::output::{check_file_target, write_json, OutputError};
use comm::Communicator;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// An application's whole command line: the flags every application takes
/// ([`RunArgs`]), its output and checkpoint flags where it has them
/// ([`OutputArgs`], [`CheckpointArgs`], or [`NoFlags`]), and its own flags
/// `F`, each of which sets the configuration key of its name. Parse it with
/// [`parse`], which names the program after the application.
#[derive(Debug, clap::Parser)]
pub struct Command<F: clap::Args, O: clap::Args = NoFlags, K: clap::Args = NoFlags> {
    /// The flags every application takes.
    #[command(flatten)]
    pub run: RunArgs,
    /// The `[output]` flags.
    #[command(flatten)]
    pub output: O,
    /// The checkpoint flags.
    #[command(flatten)]
    pub checkpoint: K,
    /// The application's own flags.
    #[command(flatten)]
    pub flags: F,
}

impl<F, O, K> Command<F, O, K>
where
    F: clap::Args + Serialize,
    O: clap::Args + Serialize,
    K: clap::Args + Serialize + Restart,
{
    /// The checkpoint to continue from (`--restart`), if any.
    pub fn restart(&self) -> Option<&Path> {
        self.checkpoint.restart()
    }

    /// The [`Plan`] of the run: these flags, the output folder `dir` the
    /// configuration names and the checkpoint to continue from.
    pub fn plan(&self, dir: Option<&Path>) -> Plan<'_> {
        Plan::new(&self.run).output(dir).restart(self.restart())
    }

    /// The configuration of the run ([`configure_renamed`]): defaults,
    /// then the `--config` file (whose old key names `renamed` are read as
    /// the new ones), then the output, checkpoint and own flags.
    pub fn configure<C>(&self, renamed: &[(&str, &str)]) -> Result<C, ShellError>
    where
        C: Default + Serialize + DeserializeOwned,
    {
        configure_renamed(
            &self.run,
            &[&self.output, &self.checkpoint, &self.flags],
            renamed,
        )
    }
}

/// The checkpoint part of a [`Command`]: the checkpoint a run continues
/// from.
pub trait Restart {
    /// The `--restart` file, if given.
    fn restart(&self) -> Option<&Path>;
}

impl Restart for CheckpointArgs {
    fn restart(&self) -> Option<&Path> {
        self.restart.as_deref()
    }
}

impl Restart for NoFlags {
    fn restart(&self) -> Option<&Path> {
        None
    }
}

/// No flags: the output or checkpoint part of a [`Command`] for an
/// application that writes no such files.
#[derive(Debug, Clone, Default, clap::Args, Serialize)]
#[group(skip)]
pub struct NoFlags {}

/// Parses the command line into `C` as the program `name` (version
/// `version`, described by `about` in `--help`), exiting with clap's
/// message and status on a bad command line or after `--help` and
/// `--version`. [`parse_command_line!`](crate::parse_command_line) calls it
/// with the calling package's name, version and description.
pub fn parse<C: clap::Parser>(name: &'static str, version: &'static str, about: &'static str) -> C {
    let matches = C::command()
        .name(name)
        .bin_name(name)
        .version(version)
        .about(about)
        .long_about(None::<&str>)
        .get_matches();
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The flags every application takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// TOML configuration file (every key optional; the application's
    /// examples/ folder lists them). Flags override its keys.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// In-process ranks (default: the number of cores, or the
    /// application's own default). Ignored under mpirun, whose process
    /// count is the rank count.
    #[arg(long, value_name = "N")]
    pub ranks: Option<usize>,
    /// Write the report as JSON to this file after the run (its folder
    /// must exist, or be the output folder; checked before the run).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress bar or messages and no list of the files written (the
    /// summary still prints).
    #[arg(short, long)]
    pub quiet: bool,
}

/// The flags of an application that writes an output folder: each sets
/// the key of the same name in the `[output]` section ([`Output`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Output folder (created by the run); nothing is written without it.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// VTK snapshots at every multiple of this step number and after the
    /// last step (0: after the last step only).
    #[arg(long, value_name = "N")]
    pub vtk_every: Option<usize>,
    /// No VTK snapshots.
    #[arg(long)]
    pub no_vtk: bool,
}

impl Serialize for OutputArgs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = toml::Table::new();
        if let Some(d) = &self.output {
            t.insert(
                "dir".into(),
                path_value(d).map_err(serde::ser::Error::custom)?,
            );
        }
        if let Some(v) = self.vtk_every {
            t.insert("vtk_every".into(), count_value(v));
        }
        if self.no_vtk {
            t.insert("vtk".into(), toml::Value::Boolean(false));
        }
        section(t).serialize(s)
    }
}

/// The flags of an application that writes checkpoints and restarts from
/// them: `--checkpoint-every` and `--no-checkpoint` set keys of the
/// `[output]` section ([`Output`]); `--restart` names the checkpoint to
/// continue from.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckpointArgs {
    /// Checkpoints at every multiple of this step number and after the
    /// last step (0: after the last step only).
    #[arg(long, value_name = "N")]
    pub checkpoint_every: Option<usize>,
    /// No checkpoints.
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Continue from this checkpoint (any rank count).
    #[arg(long, value_name = "FILE")]
    pub restart: Option<PathBuf>,
}

impl Serialize for CheckpointArgs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = toml::Table::new();
        if let Some(v) = self.checkpoint_every {
            t.insert("checkpoint_every".into(), count_value(v));
        }
        if self.no_checkpoint {
            t.insert("checkpoint".into(), toml::Value::Boolean(false));
        }
        section(t).serialize(s)
    }
}

fn section(t: toml::Table) -> toml::Table {
    let mut top = toml::Table::new();
    if !t.is_empty() {
        top.insert("output".into(), toml::Value::Table(t));
    }
    top
}

fn count_value(v: usize) -> toml::Value {
    // Counts beyond i64 cannot be steps of a run; saturate rather than fail.
    toml::Value::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

fn path_value(p: &Path) -> Result<toml::Value, String> {
    p.to_str()
        .map(|s| toml::Value::String(s.to_string()))
        .ok_or_else(|| format!("the path {} is not valid UTF-8", p.display()))
}

/// The `[output]` section of every application that writes files; see the
/// [module documentation](self) for the meaning of each key, which is the
/// same everywhere. An application refuses the keys it does not read
/// ([`Output::unused`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    /// Folder for every output file; nothing is written when absent.
    pub dir: Option<PathBuf>,
    /// Write VTK snapshots at all.
    pub vtk: bool,
    /// Snapshots at every multiple of this step number and after the last
    /// step; 0: after the last step only.
    pub vtk_every: usize,
    /// Write checkpoints at all.
    pub checkpoint: bool,
    /// Checkpoints at every multiple of this step number and after the last
    /// step; 0: after the last step only.
    pub checkpoint_every: usize,
    /// Write the time series of diagnostics (and its plot, where the
    /// application draws one).
    pub diagnostics: bool,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            dir: None,
            vtk: true,
            vtk_every: 0,
            checkpoint: true,
            checkpoint_every: 0,
            diagnostics: true,
        }
    }
}

/// What an application writes, for [`Output::unused`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Writes {
    /// VTK snapshots during the run (else at most the final state).
    pub vtk_series: bool,
    /// Checkpoints.
    pub checkpoints: bool,
    /// A time series of diagnostics.
    pub diagnostics: bool,
}

impl Writes {
    /// Every kind: snapshots during a run, checkpoints, a time series.
    pub const ALL: Writes = Writes {
        vtk_series: true,
        checkpoints: true,
        diagnostics: true,
    };
}

fn due(every: usize, step: u64, last: bool) -> bool {
    last || (every > 0 && step % every as u64 == 0)
}

impl Output {
    /// Whether a snapshot is due at step number `step` (`last`: the run's
    /// last step): an output folder, `vtk`, and `step` a multiple of
    /// `vtk_every` (when positive) or the last.
    pub fn vtk_due(&self, step: u64, last: bool) -> bool {
        self.dir.is_some() && self.vtk && due(self.vtk_every, step, last)
    }

    /// Whether a checkpoint is due at step number `step`, as
    /// [`Output::vtk_due`] with `checkpoint` and `checkpoint_every`.
    pub fn checkpoint_due(&self, step: u64, last: bool) -> bool {
        self.dir.is_some() && self.checkpoint && due(self.checkpoint_every, step, last)
    }

    /// Whether the time series is written: an output folder and
    /// `diagnostics`.
    pub fn series(&self) -> bool {
        self.dir.is_some() && self.diagnostics
    }

    /// The keys of this section set away from their defaults that an
    /// application writing `writes` would not read, each as
    /// `output.key = value applies to ...`, for
    /// [`validate::unused`](crate::validate::unused).
    pub fn unused(&self, app: &str, writes: Writes) -> Vec<String> {
        let d = Output::default();
        let mut keys = Vec::new();
        if !writes.vtk_series && self.vtk_every != d.vtk_every {
            keys.push(format!(
                "output.vtk_every = {} applies to snapshots during a run ({app} writes the final state only)",
                self.vtk_every
            ));
        }
        if !writes.checkpoints {
            if self.checkpoint_every != d.checkpoint_every {
                keys.push(format!(
                    "output.checkpoint_every = {} applies to checkpoints ({app} writes none)",
                    self.checkpoint_every
                ));
            }
            if self.checkpoint != d.checkpoint {
                keys.push(format!(
                    "output.checkpoint = {} applies to checkpoints ({app} writes none)",
                    self.checkpoint
                ));
            }
        }
        if writes.vtk_series && !self.vtk && self.vtk_every != d.vtk_every {
            keys.push(format!(
                "output.vtk_every = {} applies to output.vtk = true (this run: output.vtk = false)",
                self.vtk_every
            ));
        }
        if writes.checkpoints && !self.checkpoint && self.checkpoint_every != d.checkpoint_every {
            keys.push(format!(
                "output.checkpoint_every = {} applies to output.checkpoint = true (this run: output.checkpoint = false)",
                self.checkpoint_every
            ));
        }
        if !writes.diagnostics && self.diagnostics != d.diagnostics {
            keys.push(format!(
                "output.diagnostics = {} applies to a time series ({app} writes none)",
                self.diagnostics
            ));
        }
        keys
    }
}

/// Why the shell stopped before or after a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The configuration could not be read or built.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Flags that cannot be turned into configuration keys.
    #[error("invalid flags: {0}")]
    Flags(String),
    /// The configuration of file and flags does not fit the application's
    /// configuration (a value of the wrong type, say).
    #[error("invalid configuration after the flags: {0}")]
    Merge(String),
    /// The checkpoint to restart from is missing.
    #[error("checkpoint file {} does not exist", .0.display())]
    NoCheckpoint(PathBuf),
    /// A file or folder the run would write cannot be.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The run failed.
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
}

/// Flags that become configuration keys: anything that serialises to a
/// table of keys (`None` fields are left out).
pub trait Overrides {
    /// The keys, as a TOML table.
    fn table(&self) -> Result<toml::Table, String>;
}

impl<T: Serialize> Overrides for T {
    fn table(&self) -> Result<toml::Table, String> {
        match toml::Value::try_from(self) {
            Ok(toml::Value::Table(t)) => Ok(t),
            Ok(other) => Err(format!("expected a table of keys, got {other}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Merges `over` into `base`: tables key by key, anything else replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The configuration of a run: `C::default()`, then the file of
/// `--config` ([`read_toml`](crate::config::read_toml): unknown keys are
/// errors naming the key, the line and the file), then each of `flags` in
/// order (a flag given sets its key). The result is not validated: that is
/// the application's `validate`, which sees the whole configuration.
pub fn configure<C>(run: &RunArgs, flags: &[&dyn Overrides]) -> Result<C, ShellError>
where
    C: Default + Serialize + DeserializeOwned,
{
    configure_renamed(run, flags, &[])
}

/// [`configure`] for a configuration whose keys were renamed (`(old,
/// new)` pairs, see
/// [`read_toml_renamed`](crate::config::read_toml_renamed)): a file that
/// uses an old name still works, and a deprecation note is printed on
/// standard error (by the first process under an MPI launcher).
pub fn configure_renamed<C>(
    run: &RunArgs,
    flags: &[&dyn Overrides],
    renamed: &[(&str, &str)],
) -> Result<C, ShellError>
where
    C: Default + Serialize + DeserializeOwned,
{
    let base: C = match &run.config {
        Some(p) => {
            let (c, notes) = crate::config::read_toml_renamed(p, renamed)?;
            if comm::launcher_rank().unwrap_or(0) == 0 {
                for n in notes {
                    eprintln!("warning: {n}");
                }
            }
            c
        }
        None => C::default(),
    };
    if flags.is_empty() {
        return Ok(base);
    }
    let mut table = match toml::Value::try_from(&base) {
        Ok(toml::Value::Table(t)) => t,
        Ok(_) => return Err(ShellError::Merge("not a table of keys".into())),
        Err(e) => return Err(ShellError::Merge(e.to_string())),
    };
    for f in flags {
        merge(&mut table, f.table().map_err(ShellError::Flags)?);
    }
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ShellError::Merge(e.message().to_string()))
}

/// What an application's report gives the shell's ending.
pub trait Report: Serialize {
    /// The one-line (or short) summary printed after the run.
    fn summary(&self) -> String;
    /// The files written, listed after the summary unless `--quiet`.
    fn files(&self) -> &[String] {
        &[]
    }
}

/// What the shell checks and how it launches a run; built from the common
/// flags with [`Plan::new`].
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    app: String,
    run: &'a RunArgs,
    output: Option<PathBuf>,
    restart: Option<PathBuf>,
    ranks: Option<usize>,
}

impl<'a> Plan<'a> {
    /// A run of the flags `run`, named by the binary's name.
    pub fn new(run: &'a RunArgs) -> Self {
        Plan {
            app: binary_name(),
            run,
            output: None,
            restart: None,
            ranks: run.ranks,
        }
    }

    /// The output folder the run creates (a `--json` file may go there).
    pub fn output(mut self, dir: Option<&Path>) -> Self {
        self.output = dir.map(Path::to_path_buf);
        self
    }

    /// The checkpoint the run continues from, checked to exist.
    pub fn restart(mut self, file: Option<&Path>) -> Self {
        self.restart = file.map(Path::to_path_buf);
        self
    }

    /// The in-process rank count when `--ranks` is absent (`None`: one per
    /// core); ignored under `mpirun`.
    pub fn default_ranks(mut self, ranks: Option<usize>) -> Self {
        self.ranks = self.run.ranks.or(ranks);
        self
    }

    /// The rank count the launch will use, where it is known before it:
    /// the process count under `mpirun` (when built with MPI support),
    /// else the in-process count.
    pub fn ranks(&self) -> Option<usize> {
        if comm::is_launched_by_mpirun() {
            comm::launcher_world_size().filter(|_| comm::MPI_ENABLED)
        } else {
            Some(self.ranks.unwrap_or_else(comm::local::default_ranks))
        }
    }

    /// The checks before a run: the checkpoint exists, the `--json` file
    /// can be written once the run is over.
    pub fn check(&self) -> Result<(), ShellError> {
        if let Some(p) = &self.restart {
            if !p.is_file() {
                return Err(ShellError::NoCheckpoint(p.clone()));
            }
        }
        if let Some(p) = &self.run.json {
            check_file_target_in("--json", p, self.output.as_deref())?;
        }
        Ok(())
    }
}

fn binary_name() -> String {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".to_string())
}

/// [`check_file_target`] for a file that may lie in a folder the run
/// creates: where the file's folder is `created` or inside it and does not
/// exist yet, the nearest folder above it that exists must take a new
/// folder (checked by making and removing one); otherwise the usual check.
pub fn check_file_target_in(
    what: &str,
    path: &Path,
    created: Option<&Path>,
) -> Result<(), OutputError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let inside = created.is_some_and(|c| parent.starts_with(c) || absolute_starts_with(parent, c));
    if parent.exists() || !inside {
        return check_file_target(what, path);
    }
    let err = |why: String| OutputError::Target {
        what: what.to_string(),
        path: path.to_path_buf(),
        why,
    };
    let mut above = parent;
    while !above.exists() {
        above = match above.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    if !above.is_dir() {
        return Err(err(format!(
            "the folder {} cannot be created: {} is not a folder",
            parent.display(),
            above.display()
        )));
    }
    let probe = above.join(format!(".appkit-probe.{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            Ok(())
        }
        Err(e) => Err(err(format!(
            "the folder {} cannot be created: {} takes no new folder ({e})",
            parent.display(),
            above.display()
        ))),
    }
}

fn absolute_starts_with(p: &Path, base: &Path) -> bool {
    match (std::path::absolute(p), std::path::absolute(base)) {
        (Ok(a), Ok(b)) => a.starts_with(b),
        _ => false,
    }
}

/// Runs a checked plan: [`Plan::check`], then `body(comm, progress)` on
/// every rank ([`launch`](crate::launch::launch); `progress` is `!quiet`),
/// then, in the process holding rank 0, the ending: the summary, the files
/// written (unless `--quiet`) and the JSON report.
pub fn execute<R, E, F>(plan: Plan<'_>, body: F) -> Result<(), ShellError>
where
    R: Report + Send,
    E: Display,
    F: Fn(&dyn Communicator, bool) -> Result<R, E> + Sync,
{
    plan.check()?;
    let quiet = plan.run.quiet;
    let report = crate::launch::launch(&plan.app, plan.ranks, |c| body(c, !quiet))?;
    if let Some(r) = report {
        println!("{}", r.summary());
        if !quiet {
            for f in r.files() {
                println!("wrote {f}");
            }
        }
        if let Some(p) = &plan.run.json {
            write_json(p, &r)?;
        }
    }
    Ok(())
}

/// The flags of `F` whose clap id (the field's name) is no key of the
/// configuration `C`, at its top level or in one of its sections (a flag
/// of a flattened struct that serialises as a section, such as heat3d's
/// `[stencil]` flags): each application's test that every flag of its own
/// sets a key of its configuration (a flag that named none would be an
/// error only when given).
pub fn flags_without_keys<C: Default + Serialize, F: clap::Args>() -> Vec<String> {
    let keys = match serde_json::to_value(C::default()) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => return vec!["(the configuration is not a table of keys)".into()],
    };
    let is_key = |id: &str| {
        keys.contains_key(id)
            || keys.values().any(|v| match v {
                serde_json::Value::Object(section) => section.contains_key(id),
                _ => false,
            })
    };
    F::augment_args(clap::Command::new("flags"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .filter(|id| !is_key(id))
        .collect()
}

/// [`parse`] with the name, version and description of the package that
/// calls it (its `Cargo.toml`): `let cli: Cli = appkit::parse_command_line!();`.
#[macro_export]
macro_rules! parse_command_line {
    () => {
        $crate::app::parse(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_DESCRIPTION"),
        )
    };
}

/// The test every application's `main.rs` carries, given the names of its
/// `clap` struct, its configuration and its own flags (in scope there):
/// the command is well formed (`clap`'s `debug_assert`) and each of the
/// application's own flags names a key of its configuration
/// ([`flags_without_keys`]).
#[macro_export]
macro_rules! shell_test {
    ($cli:ident, $config:ident, $flags:ident) => {
        #[cfg(test)]
        mod shell_test {
            #[test]
            fn every_flag_sets_a_key_of_the_configuration() {
                use clap::CommandFactory;
                super::$cli::command().debug_assert();
                assert_eq!(
                    $crate::app::flags_without_keys::<super::$config, super::$flags>(),
                    Vec::<String>::new()
                );
            }
        }
    };
}

/// The `main` of an application: runs `real_main` and turns its result
/// into the exit status (`error: ...` with the whole chain on stderr).
pub fn main<E: Display>(real_main: impl FnOnce() -> Result<(), E>) -> ExitCode {
    crate::launch::exit_code(real_main())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PerAxis;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Config {
        n: PerAxis<usize>,
        dt: Option<f64>,
        seed: u64,
        name: String,
        output: Output,
    }

    impl Default for Config {
        fn default() -> Self {
            Config {
                n: PerAxis::All(8),
                dt: None,
                seed: 7,
                name: "x".into(),
                output: Output::default(),
            }
        }
    }

    #[derive(Debug, Default, clap::Args, Serialize)]
    struct Flags {
        #[arg(long, value_parser = crate::config::parse_triple)]
        n: Option<[usize; 3]>,
        #[arg(long)]
        dt: Option<f64>,
        #[arg(long)]
        seed: Option<u64>,
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        checkpoint: CheckpointArgs,
        #[command(flatten)]
        flags: Flags,
    }

    fn parse(args: &[&str]) -> Cli {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("demo").chain(args.iter().copied())).unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        crate::output::tests::tmp(&format!("app-{name}"))
    }

    #[test]
    fn defaults_then_file_then_flags() {
        let dir = tmp("layers");
        let file = dir.join("run.toml");
        std::fs::write(
            &file,
            "seed = 3\nname = \"file\"\ndt = 0.5\n[output]\nvtk_every = 4\ndiagnostics = false\n",
        )
        .unwrap();
        let cli = parse(&[]);
        let c: Config = configure(&cli.run, &[&cli.output, &cli.checkpoint, &cli.flags]).unwrap();
        assert_eq!(c, Config::default(), "no file, no flags: the defaults");
        let f = file.to_str().unwrap();
        let cli = parse(&["-c", f]);
        let c: Config = configure(&cli.run, &[&cli.output, &cli.checkpoint, &cli.flags]).unwrap();
        assert_eq!((c.seed, c.dt, c.name.as_str()), (3, Some(0.5), "file"));
        assert_eq!((c.output.vtk_every, c.output.diagnostics), (4, false));
        let cli = parse(&[
            "-c",
            f,
            "--seed",
            "11",
            "--n",
            "4x5x6",
            "-o",
            "out",
            "--no-vtk",
            "--checkpoint-every",
            "9",
        ]);
        let c: Config = configure(&cli.run, &[&cli.output, &cli.checkpoint, &cli.flags]).unwrap();
        // Flags win key by key; keys of the file no flag names stay.
        assert_eq!(c.seed, 11);
        assert_eq!(c.n, PerAxis::Each([4, 5, 6]));
        assert_eq!((c.dt, c.name.as_str()), (Some(0.5), "file"));
        let o = &c.output;
        assert_eq!(o.dir.as_deref(), Some(Path::new("out")));
        assert_eq!((o.vtk, o.vtk_every, o.diagnostics), (false, 4, false));
        assert_eq!((o.checkpoint, o.checkpoint_every), (true, 9));
        // The file's errors are the file's: key, line and file named.
        std::fs::write(&file, "sed = 3\n").unwrap();
        let cli = parse(&["-c", f, "--seed", "2"]);
        let e = configure::<Config>(&cli.run, &[&cli.flags]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("run.toml") && m.contains("sed") && m.contains("line 1"),
            "{m}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flags_are_matched_with_keys() {
        assert!(flags_without_keys::<Config, Flags>().is_empty());
        #[derive(Debug, clap::Args)]
        struct Stray {
            #[arg(long)]
            seeds: Option<u64>,
        }
        assert_eq!(flags_without_keys::<Config, Stray>(), ["seeds"]);
        // A key of a section (`[output]`) counts; one in no section does not.
        #[derive(Debug, clap::Args)]
        struct Section {
            #[arg(long)]
            vtk_every: Option<usize>,
            #[arg(long)]
            vtk_evry: Option<usize>,
        }
        assert_eq!(flags_without_keys::<Config, Section>(), ["vtk_evry"]);
    }

    #[test]
    fn a_flag_the_configuration_lacks_is_an_error() {
        #[derive(Debug, Serialize)]
        struct Stray {
            stray: Option<u32>,
        }
        let e = configure::<Config>(&RunArgs::default(), &[&Stray { stray: Some(1) }])
            .unwrap_err()
            .to_string();
        assert!(e.contains("stray"), "{e}");
        // A flag not given is no key at all.
        let c: Config = configure(&RunArgs::default(), &[&Stray { stray: None }]).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn one_schedule_for_snapshots_and_checkpoints() {
        let mut o = Output {
            dir: Some("out".into()),
            vtk_every: 3,
            ..Output::default()
        };
        let due: Vec<u64> = (0..=10).filter(|&s| o.vtk_due(s, s == 10)).collect();
        assert_eq!(due, [0, 3, 6, 9, 10]);
        // 0: after the last step only.
        let due: Vec<u64> = (0..=10).filter(|&s| o.checkpoint_due(s, s == 10)).collect();
        assert_eq!(due, [10]);
        o.checkpoint_every = 5;
        let due: Vec<u64> = (0..=10).filter(|&s| o.checkpoint_due(s, s == 10)).collect();
        assert_eq!(due, [0, 5, 10]);
        o.vtk = false;
        o.checkpoint = false;
        assert!(!(0..=10).any(|s| o.vtk_due(s, true) || o.checkpoint_due(s, true)));
        let none = Output::default();
        assert!(!none.vtk_due(0, true) && !none.checkpoint_due(0, true) && !none.series());
    }

    #[test]
    fn keys_an_application_does_not_read_are_named() {
        let o = Output {
            vtk_every: 2,
            checkpoint: false,
            ..Output::default()
        };
        let all = Writes {
            vtk_series: true,
            checkpoints: true,
            diagnostics: true,
        };
        assert!(o.unused("demo", all).is_empty());
        // A schedule for a kind switched off.
        let off = Output {
            vtk: false,
            vtk_every: 4,
            checkpoint: false,
            checkpoint_every: 5,
            ..Output::default()
        };
        let keys = off.unused("demo", all);
        assert_eq!(keys, [
            "output.vtk_every = 4 applies to output.vtk = true (this run: output.vtk = false)",
            "output.checkpoint_every = 5 applies to output.checkpoint = true (this run: output.checkpoint = false)",
        ]);
        let keys = o.unused("demo", Writes::default());
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert!(keys[0].starts_with("output.vtk_every = 2 applies to snapshots during a run (demo writes the final state only)"));
        assert!(keys[1]
            .starts_with("output.checkpoint = false applies to checkpoints (demo writes none)"));
        assert!(Output::default()
            .unused("demo", Writes::default())
            .is_empty());
    }

    #[test]
    fn a_json_file_may_go_into_the_output_folder_the_run_creates() {
        let dir = tmp("json-target");
        let out = dir.join("new/out");
        let json = out.join("report.json");
        // Its folder does not exist: refused, unless the run creates it.
        let m = check_file_target_in("--json", &json, None)
            .unwrap_err()
            .to_string();
        assert!(m.contains("does not exist"), "{m}");
        check_file_target_in("--json", &json, Some(&out)).unwrap();
        check_file_target_in("--json", &out.join("sub/r.json"), Some(&out)).unwrap();
        // Not inside the folder the run creates: the plain check.
        let m = check_file_target_in("--json", &dir.join("other/r.json"), Some(&out))
            .unwrap_err()
            .to_string();
        assert!(m.contains("does not exist"), "{m}");
        // A file in the way of the folder the run would create.
        std::fs::write(dir.join("plain"), b"x").unwrap();
        let blocked = dir.join("plain/out");
        let m = check_file_target_in("--json", &blocked.join("r.json"), Some(&blocked))
            .unwrap_err()
            .to_string();
        assert!(m.contains("is not a folder"), "{m}");
        // Nothing was left behind by the probes.
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["plain"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_checkpoint_is_refused_before_the_run() {
        let run = RunArgs::default();
        let plan = Plan::new(&run).restart(Some(Path::new("/nonexistent/x.chk")));
        let e = execute(plan, |_, _| -> Result<Nothing, String> {
            panic!("the run must not start")
        })
        .unwrap_err()
        .to_string();
        assert_eq!(e, "checkpoint file /nonexistent/x.chk does not exist");
    }

    #[derive(Debug, Serialize)]
    struct Nothing;

    impl Report for Nothing {
        fn summary(&self) -> String {
            String::new()
        }
    }

    #[test]
    fn the_report_is_written_after_the_run() {
        #[derive(Debug, Serialize)]
        struct Sum {
            ranks: usize,
        }
        impl Report for Sum {
            fn summary(&self) -> String {
                format!("{} ranks", self.ranks)
            }
        }
        let dir = tmp("report");
        let out = dir.join("out");
        let run = RunArgs {
            ranks: Some(3),
            json: Some(out.join("r.json")),
            quiet: true,
            ..RunArgs::default()
        };
        let plan = Plan::new(&run).output(Some(&out));
        execute(plan, |c, progress| {
            assert!(!progress, "--quiet turns progress off");
            crate::output::create_dir(c, &out).map_err(|e| e.to_string())?;
            Ok::<_, String>(Sum { ranks: c.size() })
        })
        .unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("r.json")).unwrap()).unwrap();
        assert_eq!(back["ranks"], 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
