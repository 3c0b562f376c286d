//! Upstreams over HTTPS with a CA file named in the config, and through
//! `HTTPS_PROXY`: a TLS terminator with a self-signed certificate in front
//! of the mock upstream, and a CONNECT proxy that counts its tunnels.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gatehouse_tests::mock_upstream::MockUpstream;
use gatehouse_tests::{Server, ServerBuilder};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A TLS endpoint for `localhost` forwarding to `backend`; returns its port and the CA PEM.
async fn tls_front(backend: std::net::SocketAddr) -> (u16, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("cert");
    let pem = cert.pem();
    let cert_der = cert.der().clone();
    let key_der = tokio_rustls::rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key der");
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert_der], key_der)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut back) = TcpStream::connect(backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
            });
        }
    });
    (port, pem)
}

/// A CONNECT proxy; counts tunnels.
async fn connect_proxy() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let c = c.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(tcp);
                let mut line = String::new();
                if reader.read_line(&mut line).await.is_err() {
                    return;
                }
                let target = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).await.unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let mut client = reader.into_inner();
                let Ok(mut upstream) = TcpStream::connect(target.replace("localhost", "127.0.0.1")).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                c.fetch_add(1, Ordering::SeqCst);
                if client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").await.is_err() {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (port, count)
}

fn builder(ca_path: &std::path::Path, port: u16) -> ServerBuilder {
    Server::builder().plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm").toml(&format!(
        "[policies]\ndefault = \"open\"\n[upstream]\nca_file = \"{}\"\n\
         [providers.secure]\nplugin = \"provider-openai\"\nbase_url = \"https://localhost:{port}/v1\"\n",
        ca_path.display()
    ))
}

async fn ask(s: &Server) -> (u16, Value) {
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"index": "Zero-Knowledge", "model": "secure/ok-a", "prompt": "over tls"}))
        .send()
        .await
        .expect("send");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

#[tokio::test]
async fn https_upstreams_use_the_configured_ca_and_the_proxy() {
    let mock = MockUpstream::start().await;
    let (port, pem) = tls_front(mock.addr()).await;
    let dir = tempfile::tempdir().expect("tmp");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pem).expect("write ca");

    // Trusted through the CA file.
    let s = builder(&ca, port).start();
    let (st, v) = ask(&s).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "mock answer to: over tls");
    drop(s);

    // Without the CA file the certificate is refused: a server error, not an answer.
    let untrusted = dir.path().join("other.pem");
    let other = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .self_signed(&rcgen::KeyPair::generate().expect("key"))
        .expect("cert");
    std::fs::write(&untrusted, other.pem()).expect("write");
    let s = builder(&untrusted, port).start();
    let (st, v) = ask(&s).await;
    assert_eq!(st, 502, "{v}");
    drop(s);

    // Through HTTPS_PROXY.
    let (proxy_port, tunnels) = connect_proxy().await;
    let s = builder(&ca, port).env("HTTPS_PROXY", &format!("http://127.0.0.1:{proxy_port}")).env("NO_PROXY", "").start();
    let (st, v) = ask(&s).await;
    assert_eq!(st, 200, "{v}");
    assert!(tunnels.load(Ordering::SeqCst) >= 1, "the request went through the proxy");
}
