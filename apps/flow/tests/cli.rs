//! The command line: options that cannot work are refused before the run.

use std::process::Command;

fn flow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_json_file_in_a_missing_folder_is_refused_before_the_run() {
    let missing = std::env::temp_dir()
        .join(format!("flow-cli-{}", std::process::id()))
        .join("missing");
    let json = missing.join("report.json");
    let out = flow(&[
        "--n",
        "8",
        "--steps",
        "1",
        "--ranks",
        "1",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--json") && err.contains(&missing.display().to_string()),
        "{err}"
    );
    // Nothing ran: no report on stdout.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn n_that_does_not_split_over_the_ranks_is_refused_before_the_run() {
    let out = flow(&["--n", "10", "--ranks", "2", "--steps", "1", "-q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("n = 10 does not split over 2 ranks") && !err.contains("flow failed"),
        "{err}"
    );
}
