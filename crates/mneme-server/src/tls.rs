//! TLS on the daemon's listeners, and the client side the CLI uses to reach a daemon.
//!
//! - [`ServerTls`]: the certificate and key of `[server] tls_cert_file` / `tls_key_file`
//!   (and the client authority of `tls_client_ca_file`), loaded into one rustls
//!   configuration per listener (ALPN `http/1.1` for the HTTP API and `/mcp`, `h2` for
//!   gRPC). [`ServerTls::reload`] reads the files again and swaps the configuration in
//!   only when they load; new connections use it, open ones keep theirs. The daemon calls
//!   it on SIGHUP (`mneme serve`) and when the files change (`tls_reload_poll`).
//! - [`ClientIdentity`]: the subject of a verified client certificate. The connection
//!   layer (`serve.rs`) hands it to the routers in [`CLIENT_SUBJECT`] / [`CLIENT_CN`]
//!   headers, after removing any a client sent, so only a handshake can set them.
//! - [`client_config`]: the rustls configuration of a client (the CLI, `mneme mcp`): the
//!   system's authorities or a CA file, and a client certificate when one is configured.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::ServerConfig;
use crate::serve::Protocol;

/// Set by the connection layer to the verified client certificate's subject (RFC 4514).
pub const CLIENT_SUBJECT: &str = "x-mneme-tls-client-subject";
/// Set by the connection layer to the verified client certificate's common name.
pub const CLIENT_CN: &str = "x-mneme-tls-client-cn";
/// Set by the connection layer to the peer's IP address (its rate-limit bucket).
pub const CLIENT_PEER: &str = "x-mneme-peer";

/// A verified client certificate's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The whole subject as RFC 4514 writes it (`CN=agent-a,O=Acme`).
    pub subject: String,
    /// Its common name, when it has one.
    pub common_name: Option<String>,
}

impl ClientIdentity {
    /// The subject of a DER certificate (`None` when it does not parse).
    pub fn of(cert: &CertificateDer<'_>) -> Option<Self> {
        use x509_cert::der::Decode as _;
        let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
        let name = &cert.tbs_certificate.subject;
        let cn_oid = x509_cert::der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");
        let common_name = name.0.iter().flat_map(|rdn| rdn.0.iter()).find(|atv| atv.oid == cn_oid).and_then(|atv| {
            use x509_cert::der::asn1::{Ia5StringRef, PrintableStringRef, Utf8StringRef};
            let v = &atv.value;
            Utf8StringRef::try_from(v)
                .map(|s| s.as_str().to_string())
                .or_else(|_| PrintableStringRef::try_from(v).map(|s| s.as_str().to_string()))
                .or_else(|_| Ia5StringRef::try_from(v).map(|s| s.as_str().to_string()))
                .ok()
        });
        Some(ClientIdentity { subject: name.to_string(), common_name })
    }

    /// Whether a configured `tls_client_subject` names this certificate: its common name,
    /// or (with an `=` in it) the whole subject.
    pub fn matches(&self, configured: &str) -> bool {
        let configured = configured.trim();
        if configured.contains('=') { self.subject == configured } else { self.common_name.as_deref() == Some(configured) }
    }
}

/// The files the server's TLS comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl Files {
    fn all(&self) -> impl Iterator<Item = &Path> {
        [self.cert.as_path(), self.key.as_path()].into_iter().chain(self.client_ca.as_deref())
    }

    /// What changes when a file is replaced or rewritten: each one's modification time
    /// and length (a missing file counts as a change once it appears again).
    fn stamp(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.all().map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())))).collect()
    }
}

/// The two listeners' rustls configurations, built from the same files.
#[derive(Debug)]
struct Configs {
    http: Arc<rustls::ServerConfig>,
    grpc: Arc<rustls::ServerConfig>,
}

/// TLS for the daemon's listeners: the current configuration and where it came from.
#[derive(Debug)]
pub struct ServerTls {
    files: Files,
    current: RwLock<Configs>,
    stamp: std::sync::Mutex<Vec<Option<(SystemTime, u64)>>>,
    /// Whether clients must present a certificate.
    pub mutual: bool,
}

impl ServerTls {
    /// TLS as `[server]` configures it: `None` without `tls_cert_file`; an error naming
    /// the file when one does not load (unreadable, no PEM certificate or key, a key that
    /// is not the certificate's).
    pub fn from_config(server: &ServerConfig) -> Result<Option<Arc<ServerTls>>, String> {
        let (Some(cert), Some(key)) = (&server.tls_cert_file, &server.tls_key_file) else { return Ok(None) };
        let files = Files { cert: cert.clone(), key: key.clone(), client_ca: server.tls_client_ca_file.clone() };
        let stamp = files.stamp();
        let configs = load(&files)?;
        Ok(Some(Arc::new(ServerTls {
            mutual: files.client_ca.is_some(),
            files,
            current: RwLock::new(configs),
            stamp: std::sync::Mutex::new(stamp),
        })))
    }

    /// The acceptor for a new connection on a listener of `protocol`.
    pub fn acceptor(&self, protocol: Protocol) -> tokio_rustls::TlsAcceptor {
        let configs = self.current.read().unwrap_or_else(|p| p.into_inner());
        let config = match protocol {
            Protocol::Http1 => configs.http.clone(),
            Protocol::Http2 => configs.grpc.clone(),
        };
        tokio_rustls::TlsAcceptor::from(config)
    }

    /// Reads the files again and, when they load, serves new connections with them; when
    /// they do not, keeps the configuration in use and says why.
    pub fn reload(&self) -> Result<(), String> {
        let stamp = self.files.stamp();
        let configs = load(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = configs;
        *self.stamp.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
        Ok(())
    }

    /// Whether a file changed since the configuration in use was loaded (or a failed
    /// reload was last tried).
    pub fn changed(&self) -> bool {
        let now = self.files.stamp();
        let mut seen = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
        if *seen == now {
            return false;
        }
        *seen = now;
        true
    }

    /// The certificate file, for messages.
    pub fn cert_file(&self) -> &Path {
        &self.files.cert
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The PEM certificates in a file (at least one).
pub fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// The PEM private key in a file.
fn private_key(path: &Path, what: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// A store of the PEM authorities in a file.
fn authorities(path: &Path, what: &str) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(path, what)? {
        roots.add(cert).map_err(|e| format!("{what} {} holds a certificate that is not an authority's: {e}", path.display()))?;
    }
    Ok(roots)
}

fn load(files: &Files) -> Result<Configs, String> {
    let certs = certificates(&files.cert, "server.tls_cert_file")?;
    let key = private_key(&files.key, "server.tls_key_file")?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let roots = authorities(path, "server.tls_client_ca_file")?;
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| format!("server.tls_client_ca_file {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        format!("server.tls_cert_file {} and server.tls_key_file {} do not make a pair: {e}", files.cert.display(), files.key.display())
    })?;
    let with_alpn = |protocol: &[u8]| {
        let mut c = config.clone();
        c.alpn_protocols = vec![protocol.to_vec()];
        Arc::new(c)
    };
    Ok(Configs { http: with_alpn(b"http/1.1"), grpc: with_alpn(b"h2") })
}

/// What a client trusts as the daemon's certificate.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// Certificates the authorities in this file (else the system's) signed for the name
    /// the client connects to: a daemon elsewhere (`[client] daemon_url`).
    Authorities(Option<&'a Path>),
    /// Exactly the certificates in this file (`[server] tls_cert_file`): the daemon that
    /// serves this data directory, which the CLI reaches by its address (often one its
    /// certificate does not name) and whose certificate it can read.
    Pinned(&'a Path),
}

/// A client's TLS: the daemon's certificate checked as `trust` says, and the client
/// certificate in `cert_key` presented when given (`[client] tls_cert_file`).
pub fn client_config(trust: Trust<'_>, cert_key: Option<(&Path, &Path)>) -> Result<rustls::ClientConfig, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?;
    let builder = match trust {
        Trust::Authorities(Some(path)) => builder.with_root_certificates(authorities(path, "client.tls_ca_file")?),
        Trust::Authorities(None) => {
            let mut roots = rustls::RootCertStore::empty();
            // One that does not parse is skipped, as browsers do.
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            builder.with_root_certificates(roots)
        }
        Trust::Pinned(path) => {
            let certs = certificates(path, "server.tls_cert_file")?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(Pinned { certs, provider: provider() }))
        }
    };
    let what = "client";
    match cert_key {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let certs = certificates(cert, &format!("{what}.tls_cert_file"))?;
            let key = private_key(key, &format!("{what}.tls_key_file"))?;
            builder.with_client_auth_cert(certs, key).map_err(|e| format!("{what}.tls_cert_file {}: {e}", cert.display()))
        }
    }
}

/// Accepts exactly the certificates it holds (the daemon's own, read from its file); the
/// handshake's signatures are still checked against them.
#[derive(Debug)]
struct Pinned {
    certs: Vec<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if self.certs.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("the daemon's certificate is not the one in server.tls_cert_file".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
