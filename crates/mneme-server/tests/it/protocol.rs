//! What generic clients see: gRPC health and server reflection (checked with Python's
//! grpcio-reflection, a client that knows nothing of mneme.proto) and the OpenAPI
//! document (validated with openapi-spec-validator), both from the test tools' pinned
//! Python environment (`mneme_testkit::python`, set up on first use).

use std::process::Command;

use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::TestDaemon;

fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new(mneme_testkit::python()).arg("-c").arg(script).args(args).output().expect("python runs");
    assert!(out.status.success(), "python failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const REFLECT: &str = r#"
import sys, grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from google.protobuf.descriptor_pool import DescriptorPool
ch = grpc.insecure_channel(sys.argv[1])
stub = reflection_pb2_grpc.ServerReflectionStub(ch)
for r in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
    for s in r.list_services_response.service:
        print("service", s.name)
pool = DescriptorPool(ProtoReflectionDescriptorDatabase(ch))
for name in ("mneme.v1.Memory", "mneme.v1.Hooks"):
    for m in pool.FindServiceByName(name).methods:
        print("method", name + "/" + m.name, m.input_type.full_name)
"#;

#[tokio::test]
async fn reflection_lists_the_services_to_a_generic_client() {
    let d = TestDaemon::start().await;
    let addr = d.grpc_addr().to_string();
    let out = tokio::task::spawn_blocking(move || python(REFLECT, &[&addr])).await.expect("python");
    for service in ["mneme.v1.Memory", "mneme.v1.Hooks", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"] {
        assert!(out.contains(&format!("service {service}\n")), "{service} not listed:\n{out}");
    }
    for method in [
        "IngestEvent",
        "IngestToolOutput",
        "IngestObservation",
        "IngestOutcome",
        "IngestWorkingState",
        "Retrieve",
        "RetrieveById",
        "History",
        "Supersede",
        "Fork",
        "Retract",
        "Merge",
        "Contest",
        "Reinforce",
        "Penalize",
        "GetMetrics",
    ] {
        assert!(out.contains(&format!("method mneme.v1.Memory/{method} ")), "{method} missing:\n{out}");
    }
    assert!(out.contains("method mneme.v1.Hooks/SessionStart mneme.v1.SessionStartRequest"), "{out}");
    let mut health = HealthClient::new(d.channel().await);
    let status =
        health.check(tonic_health::pb::HealthCheckRequest { service: "mneme.v1.Memory".into() }).await.expect("health").into_inner().status;
    assert_eq!(status, ServingStatus::Serving as i32);
    d.stop().await;
}

const VALIDATE: &str = r#"
import sys, json
from openapi_spec_validator import validate
validate(json.load(sys.stdin))
print("valid")
"#;

#[tokio::test]
async fn openapi_document_validates_and_covers_every_route() {
    let d = TestDaemon::start().await;
    let (s, doc) = d.get("/openapi.json").await;
    assert_eq!(s, 200);
    let text = doc.to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(mneme_testkit::python())
            .arg("-c")
            .arg(VALIDATE)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), text.as_bytes()).expect("write");
        child.wait_with_output().expect("output")
    })
    .await
    .expect("python");
    assert!(out.status.success(), "invalid OpenAPI: {}", String::from_utf8_lossy(&out.stderr));
    // Every route the router serves is documented.
    let src = include_str!("../../src/http.rs");
    for line in src.lines().filter(|l| l.trim_start().starts_with(".route(\"")) {
        let path = line.split('"').nth(1).expect("path");
        assert!(doc["paths"].get(path).is_some(), "{path} is not in /openapi.json");
    }
    d.stop().await;
}

/// Refusals that depend on the daemon's state or on one field against another, which
/// OpenAPI 3.0 cannot say: a schema-valid request to these may still be refused 400 (a
/// fact's valid_from after its valid_to, in an ingest or a revision; a model without an LLM
/// endpoint; a path the inner-life job may not write; a priority outside the module's
/// manifest range; a domain nothing in the logs mentions).
const SCHEMATHESIS_TOML: &str = r#"
[[operations]]
include-operation-id = ["IngestObservation", "Supersede", "Fork", "Merge", "RelayConfigure", "InnerWrite", "ModuleChange", "ModuleExtract"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]
"#;

/// schemathesis (property-based, from the pinned test tools) against a live daemon, in
/// `--mode all` with every check and the stateful phase: a schema-valid request is
/// accepted (but for the state-dependent refusals above), a schema-violating one refused,
/// every response documented, matching its schema and never a server error. Bounded: a
/// fixed seed and example count, no shrinking. One worker: with two, Hypothesis describing
/// its strategies parses source in parallel threads, which CPython 3.11's `ast` does not
/// survive ("AST constructor recursion depth mismatch", seen once in a CI run).
#[tokio::test]
async fn schemathesis_finds_no_disagreement_between_the_openapi_document_and_the_server() {
    let d = TestDaemon::start().await;
    // A few records, so that list and search responses carry real records.
    for text in ["the kettle needs descaling", "Howard moved to Hamburg"] {
        let (s, _) = d.post("/v1/ingest/event", serde_json::json!({ "event": { "event_kind": "message", "text": text } })).await;
        assert_eq!(s, 200);
    }
    let url = d.url("/openapi.json");
    // Its report, configuration and example database go to the test's directory, not the
    // source tree.
    let work = d.dir.path().join("schemathesis");
    std::fs::create_dir_all(&work).expect("work dir");
    let config = work.join("schemathesis.toml");
    std::fs::write(&config, SCHEMATHESIS_TOML).expect("config");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(mneme_testkit::python())
            .args(["-m", "schemathesis.cli", "--config-file"])
            .arg(&config)
            .args(["run", &url, "--mode", "all", "--checks", "all"])
            .args(["--max-examples", "15", "--seed", "20261126", "--no-shrink", "--workers", "1", "--request-timeout", "10"])
            .args(["--phases", "examples,coverage,fuzzing,stateful", "--suppress-health-check", "all"])
            .arg("--report-dir")
            .arg(&work)
            .env("NO_COLOR", "1")
            .current_dir(&work)
            .output()
            .expect("schemathesis runs")
    })
    .await
    .expect("schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "schemathesis failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    d.stop().await;
}
