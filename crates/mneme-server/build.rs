//! Compiles `proto/mneme/v1/mneme.proto` and membrane's `proto/membrane/v1/membrane.proto`
//! with protox (pure Rust, no protoc) and keeps each file descriptor set for gRPC server
//! reflection.

// A build script is given its inputs in the environment (`OUT_DIR`).
#![allow(clippy::disallowed_methods)]

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/mneme/v1/mneme.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("mneme_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    // Decode failures are INVALID_ARGUMENT (src/codec.rs).
    tonic_prost_build::configure().build_client(true).build_server(true).codec_path("crate::codec::MnemeCodec").compile_fds(fds)?;
    // membrane's own protocol (v0.2.0, verbatim), served beside mneme.v1 when enabled; its
    // descriptors are kept apart so reflection lists it only when it is served.
    let membrane = "proto/membrane/v1/membrane.proto";
    println!("cargo:rerun-if-changed={membrane}");
    let fds = protox::compile([membrane], ["proto"])?;
    std::fs::write(out.join("membrane_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure().build_client(true).build_server(true).codec_path("crate::codec::MnemeCodec").compile_fds(fds)?;
    Ok(())
}
