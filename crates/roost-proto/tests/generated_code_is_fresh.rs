//! Proves the checked-in generated code (`src/gen/roost.v1.rs`) and the encoded descriptor set
//! (`src/gen/roost_descriptor.bin`, served by the node's gRPC reflection) match
//! `proto/roost/v1/*.proto`.
//!
//! With `ROOST_REGENERATE=1` set, the test writes the fresh files over the checked-in ones instead
//! of comparing. Code generation uses the vendored `protoc`, so no system `protoc` is needed.

use std::path::{Path, PathBuf};

/// Every `.proto` file of package `roost.v1`, relative to the `proto/` directory.
const PROTOS: &[&str] = &[
    "roost/v1/attachments.proto",
    "roost/v1/cluster.proto",
    "roost/v1/control.proto",
    "roost/v1/documents.proto",
    "roost/v1/interactions.proto",
    "roost/v1/monitors.proto",
    "roost/v1/enums.proto",
    "roost/v1/raft.proto",
    "roost/v1/worker.proto",
];

/// The file prost writes for package `roost.v1`.
const GENERATED: &str = "roost.v1.rs";

/// The encoded `FileDescriptorSet` of every `.proto` file (protoc's `--include_imports
/// --include_source_info`, so reflection clients see the comments too).
const DESCRIPTOR_SET: &str = "roost_descriptor.bin";

const REFRESH: &str = "ROOST_REGENERATE=1 cargo test -p roost-proto --test generated_code_is_fresh";

/// The generated Rust code and the encoded descriptor set.
fn generate(out_dir: &Path) -> (String, Vec<u8>) {
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
        .codec_path("crate::codec::RoostCodec")
        .emit_rerun_if_changed(false)
        .out_dir(out_dir)
        .file_descriptor_set_path(out_dir.join(DESCRIPTOR_SET))
        .compile_with_config(config, &protos, &[proto_root])
        .expect("protoc and code generation succeed");

    (
        std::fs::read_to_string(out_dir.join(GENERATED)).expect("the generated file"),
        std::fs::read(out_dir.join(DESCRIPTOR_SET)).expect("the descriptor set"),
    )
}

#[test]
fn generated_code_is_fresh() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let (fresh, fresh_descriptors) = generate(out.path());

    // Generating twice must give the same bytes, or the comparison below would be flaky.
    let again = tempfile::tempdir().expect("a temporary directory");
    let (again_code, again_descriptors) = generate(again.path());
    assert_eq!(fresh, again_code, "code generation is not deterministic");
    assert!(
        fresh_descriptors == again_descriptors,
        "the descriptor set is not deterministic"
    );

    let gen_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gen");
    let checked_in_path = gen_dir.join(GENERATED);
    let descriptors_path = gen_dir.join(DESCRIPTOR_SET);

    if std::env::var_os("ROOST_REGENERATE").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&gen_dir).unwrap();
        std::fs::write(&checked_in_path, &fresh).unwrap();
        std::fs::write(&descriptors_path, &fresh_descriptors).unwrap();
        eprintln!(
            "wrote {} and {}",
            checked_in_path.display(),
            descriptors_path.display()
        );
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

    let checked_in_descriptors = std::fs::read(&descriptors_path).unwrap_or_default();
    assert!(
        checked_in_descriptors == fresh_descriptors,
        "{} is stale: it does not match proto/roost/v1/*.proto ({} bytes checked in, {} \
         generated).\nRefresh it with:\n\n    {REFRESH}\n\nand commit the result.",
        descriptors_path.display(),
        checked_in_descriptors.len(),
        fresh_descriptors.len(),
    );
}
