//! How the connection to PostgreSQL is secured, from the URL's `sslmode`.
//!
//! - `disable`: plain TCP.
//! - `prefer` (the driver's default): TLS if the server offers it, else plain.
//! - `require`, `verify-ca`, `verify-full`: TLS or no connection.
//!
//! Whenever TLS is used, the server's certificate is verified (chain and host
//! name) against the system's roots, or against the operator's CA file when
//! one is given. That is stricter than libpq's `require`, which encrypts
//! without verifying: an unverified channel is open to whoever sits on the
//! path, and this connection carries key hashes and the audit log. A
//! private CA is named with `ca_file` instead.

use std::path::Path;

use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The TLS connector for a config, or `None` for `sslmode=disable`.
pub fn connector(mode: SslMode, ca_file: Option<&Path>) -> anyhow::Result<Option<MakeRustlsConnect>> {
    if mode == SslMode::Disable {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read the PostgreSQL CA file {}: {e}", path.display()))?;
            for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| anyhow::anyhow!("the PostgreSQL CA file {} is not PEM: {e}", path.display()))?;
                roots.add(cert).map_err(|e| anyhow::anyhow!("the PostgreSQL CA file {}: {e}", path.display()))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                // A system root rustls cannot parse is skipped, as every rustls client does.
                let _ = roots.add(cert);
            }
        }
    }
    if roots.is_empty() {
        anyhow::bail!("no CA certificate to verify PostgreSQL's with: name one with the store's CA file option");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// Read `sslmode` from a URL the driver parses: it knows `disable`, `prefer`
/// and `require`; `verify-ca` and `verify-full` (libpq's names for verified
/// TLS, which is what `require` does here) are mapped to `require`.
pub fn normalise_url(url: &str) -> String {
    url.replace("sslmode=verify-full", "sslmode=require").replace("sslmode=verify-ca", "sslmode=require")
}
