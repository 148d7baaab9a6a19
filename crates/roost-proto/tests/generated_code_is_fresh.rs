//! Proves the checked-in generated code (`src/gen/roost.v1.rs`) matches `proto/roost/v1/*.proto`.
//!
//! With `ROOST_REGENERATE=1` set, the test writes the fresh code over the checked-in file instead
//! of comparing. Code generation uses the vendored `protoc`, so no system `protoc` is needed.

use std::path::{Path, PathBuf};

/// Every `.proto` file of package `roost.v1`, relative to the `proto/` directory.
const PROTOS: &[&str] = &[
    "roost/v1/cluster.proto",
    "roost/v1/control.proto",
    "roost/v1/raft.proto",
    "roost/v1/worker.proto",
];

/// The file prost writes for package `roost.v1`.
const GENERATED: &str = "roost.v1.rs";

const REFRESH: &str = "ROOST_REGENERATE=1 cargo test -p roost-proto --test generated_code_is_fresh";

fn generate(out_dir: &Path) -> String {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto_root = manifest_dir
        .join("../../proto")
        .canonicalize()
        .expect("the proto/ directory at the repository root");
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| proto_root.join(p)).collect();

    let protoc = protoc_bin_vendored::protoc_bin_path().expect("the vendored protoc binary");
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .out_dir(out_dir)
        .compile_with_config(config, &protos, &[proto_root])
        .expect("protoc and code generation succeed");

    std::fs::read_to_string(out_dir.join(GENERATED)).expect("the generated file")
}

#[test]
fn generated_code_is_fresh() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let fresh = generate(out.path());

    // Generating twice must give the same bytes, or the comparison below would be flaky.
    let again = tempfile::tempdir().expect("a temporary directory");
    assert_eq!(
        fresh,
        generate(again.path()),
        "code generation is not deterministic"
    );

    let checked_in_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/gen")
        .join(GENERATED);

    if std::env::var_os("ROOST_REGENERATE").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(checked_in_path.parent().unwrap()).unwrap();
        std::fs::write(&checked_in_path, &fresh).unwrap();
        eprintln!("wrote {}", checked_in_path.display());
        return;
    }

    let checked_in = std::fs::read_to_string(&checked_in_path).unwrap_or_default();
    if checked_in != fresh {
        let first_difference = checked_in
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is stale: it does not match proto/roost/v1/*.proto (first difference at line {}).\n\
             Refresh it with:\n\n    {REFRESH}\n\nand commit the result.",
            checked_in_path.display(),
            first_difference + 1,
        );
    }
}
