//! The connection to PostgreSQL under each `sslmode`, against a server with
//! TLS on and a certificate for 127.0.0.1 and `localhost`: TLS is used
//! whenever asked for, and the server's certificate is always verified
//! (against the CA file given, else the system's roots, which do not know
//! this one).

use gatehouse_store::postgres::{PgOptions, PgStore};

use gatehouse_pg_harness::{TempPostgres, give_to_server};

async fn uses_tls(store: &PgStore) -> bool {
    let client = store.pool().get().await.expect("client");
    client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.expect("pg_stat_ssl").get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sslmode_connects_as_it_says_and_verifies_the_server() {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let ca_dir = tempfile::tempdir().expect("temp dir");
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, cert.pem()).expect("write CA");
    let pg = TempPostgres::start_with(|dir| {
        let (crt, key_file) = (dir.join("server.crt"), dir.join("server.key"));
        std::fs::write(&crt, cert.pem()).expect("write cert");
        std::fs::write(&key_file, key.serialize_pem()).expect("write key");
        std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("key mode");
        give_to_server(&crt);
        give_to_server(&key_file);
        format!("-c ssl=on -c ssl_cert_file='{}' -c ssl_key_file='{}'", crt.display(), key_file.display())
    });
    let url = pg.create_database("tls");
    let with = |mode: &str, ca: bool| {
        let mut o = PgOptions::new(format!("{url}?sslmode={mode}"));
        o.ca_file = ca.then(|| ca_file.clone());
        o
    };

    for mode in ["require", "verify-full", "verify-ca", "prefer"] {
        let store = PgStore::connect(with(mode, true)).await.unwrap_or_else(|e| panic!("sslmode={mode} with the CA: {e:#}"));
        assert!(uses_tls(&store).await, "sslmode={mode} uses TLS");
    }
    let plain = PgStore::connect(with("disable", false)).await.expect("sslmode=disable");
    assert!(!uses_tls(&plain).await, "sslmode=disable does not");

    // Not signed by anything the system trusts: refused, never used unverified (nor, under `prefer`, dropped to plain TCP).
    for mode in ["require", "prefer"] {
        let refused =
            PgStore::connect(with(mode, false)).await.err().unwrap_or_else(|| panic!("sslmode={mode}: an unknown certificate is refused"));
        assert!(format!("{refused:#}").to_lowercase().contains("certificate"), "{refused:#}");
    }
    // The same server under a name its certificate does not carry is refused too.
    let other_name = format!("{}?sslmode=require&hostaddr=127.0.0.1", url.replace("127.0.0.1", "db.example.invalid"));
    let refused = PgStore::connect(PgOptions { url: other_name, ..with("require", true) }).await.err().expect("another name is refused");
    assert!(format!("{refused:#}").to_lowercase().contains("certificate"), "{refused:#}");
}
