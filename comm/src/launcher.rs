//! Recognising a process started by an MPI launcher (`mpirun`, `mpiexec`,
//! `srun`), with or without the `mpi` feature.

/// Variables that MPI launchers set in every process they start (a test
/// that starts a binary outside any launcher removes them from its
/// environment).
pub const LAUNCHER_VARS: [&str; 6] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
];

/// Variables that carry the number of processes the launcher started.
const SIZE_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
];

/// True when an MPI launcher started this process.
pub fn is_launched_by_mpirun() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// The number of processes the MPI launcher started, when it says.
pub fn launcher_world_size() -> Option<usize> {
    world_size_from(|v| std::env::var(v).ok())
}

/// This process's rank in the MPI launcher's world, when the launcher says
/// (before MPI is initialised: for messages that one process should print).
pub fn launcher_rank() -> Option<usize> {
    RANK_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The variables in which MPI launchers give a process its world rank.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
];

/// [`launcher_world_size`] over any source of variables.
fn world_size_from(var: impl Fn(&str) -> Option<String>) -> Option<usize> {
    SIZE_VARS.iter().find_map(|v| var(v)?.trim().parse().ok())
}

/// The error for a binary without the `mpi` feature that an MPI launcher
/// started as one of several processes: each would otherwise run its own
/// in-process world and repeat the whole job.
#[cfg_attr(feature = "mpi", allow(dead_code))]
pub(crate) fn without_mpi_error(size: usize) -> String {
    format!(
        "this program was started by an MPI launcher as one of {size} processes, \
         but it was built without MPI support, so every process would run the whole \
         job on its own; rebuild it with `--features mpi` (for example \
         `cargo build --release --features mpi`), or run it without mpirun and choose \
         the number of in-process ranks with its --ranks option"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_size_comes_from_the_first_launcher_variable_that_parses() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(world_size_from(env(&[])), None);
        assert_eq!(
            world_size_from(env(&[("OMPI_COMM_WORLD_SIZE", "4")])),
            Some(4)
        );
        assert_eq!(world_size_from(env(&[("PMI_SIZE", " 16\n")])), Some(16));
        assert_eq!(
            world_size_from(env(&[("OMPI_COMM_WORLD_SIZE", "x"), ("PMI_SIZE", "2")])),
            Some(2)
        );
        let msg = without_mpi_error(4);
        assert!(
            msg.contains("one of 4 processes") && msg.contains("--features mpi"),
            "{msg}"
        );
    }
}
