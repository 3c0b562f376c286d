//! A plugin's writable cache folder through the real server
//! (`[plugins.settings.<name>] writable_cache`): a hybrid knowledge base keeps
//! its passage vectors there, so a restart reads them instead of recomputing
//! them and answers the same; a hostile plugin cannot fill the folder past
//! its cap nor leave it; a plugin without the grant cannot write at all.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gatehouse_tests::mock_upstream::MockUpstream;
use gatehouse_tests::plugins::{self, install};
use gatehouse_tests::{Server, ServerBuilder};
use serde_json::{Value, json};

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn kb(dir: &Path) {
    write(
        dir,
        "billing/refunds.md",
        "# Refunds\n\nMoney goes back to the original card within 14 days of the parcel reaching the warehouse. Reference ZEPHYR-17.\n",
    );
    write(dir, "shipping.txt", "Shipping\n\nParcels leave within two working days; abroad they take up to ten days.\n");
    write(dir, "support/warranty.md", "# Warranty\n\nEvery kettle has a three-year warranty on its heating element.\n");
}

/// The folder of the dense model the repository ships (granted read-only, as an operator would).
fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/retriever-local/model")
}

/// A hybrid knowledge base `shop` over `kb`, and the mock upstream as provider `openai`.
fn hybrid(mock: &MockUpstream, kb: &Path, retriever_settings: &str, index_config: &str) -> ServerBuilder {
    Server::builder()
        .toml(&format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\n\
             [plugins.settings.retriever-local]\nread_only_dirs = [\"{}\"]\n{retriever_settings}\n\
             [indexes.shop]\nretriever = \"retriever-local\"\npath = \"{}\"\ntop_k = 3\n\
             [indexes.shop.config]\ndense_model = \"/model/minilm-static.bin\"\n{index_config}\n",
            mock.openai_base_url(),
            model_dir().display(),
            kb.display()
        ))
        .env("MOCK_OPENAI_KEY", "sk-upstream")
}

/// (sources, the retrieved-documents block of the prompt the upstream received) for one question.
async fn ask(s: &Server, mock: &MockUpstream, question: &str) -> (Value, String) {
    let body = json!({"model": "openai/ok-a", "index": "shop", "messages": [{"role": "user", "content": question}]});
    let (status, v) = s.chat_as(&s.admin_key, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["metadata"]["rag_enabled"], true, "{v}");
    let prompt = mock.last_request().expect("upstream request").prompt_text();
    // The block alone: the system message around it carries a canary that is new for every request.
    let block = prompt
        .find("<retrieved_documents")
        .and_then(|a| prompt[a..].find("</retrieved_documents>").map(|b| prompt[a..a + b].to_owned()))
        .unwrap_or_else(|| panic!("no retrieved documents in the prompt: {prompt}"));
    (v["metadata"]["sources"].clone(), block)
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).and_then(|m| m.modified()).expect("mtime")
}

#[tokio::test]
async fn a_hybrid_knowledge_base_reads_its_vectors_from_the_cache_folder_after_a_restart() {
    let mock = MockUpstream::start().await;
    let docs = tempfile::tempdir().expect("kb");
    kb(docs.path());
    let mut s = hybrid(&mock, docs.path(), "writable_cache = true\ncache_limit_mb = 4", "").start();
    let questions = ["how long until my money is back?", "does the kettle have a guarantee?"];
    let mut before = Vec::new();
    for q in questions {
        before.push(ask(&s, &mock, q).await);
    }
    assert_eq!(before[0].0[0]["source"], "billing/refunds.md", "{}", before[0].0);
    assert!(before[0].1.contains("ZEPHYR-17"), "the passage reached the model: {}", before[0].1);
    // The host made the plugin's folder in the data dir and the plugin wrote its vectors there.
    let file = s.data_dir.join("plugin-cache/retriever-local/shop.vec");
    assert!(file.is_file(), "no vector file; log:\n{}", s.log());
    let log = s.log();
    assert!(log.contains("vector cache /cache: 0 vectors read, file rewritten"), "{log}");
    let (written, size) = (mtime(&file), std::fs::metadata(&file).expect("stat").len());

    s.restart();
    for (q, (sources, prompt)) in questions.iter().zip(&before) {
        let (again, prompt_again) = ask(&s, &mock, q).await;
        assert_eq!(&again, sources, "{q}: the same passages, the same scores");
        assert_eq!(&prompt_again, prompt, "{q}: the same context for the model");
    }
    // Read, not recomputed: the plugin says so, and the file was left as it was.
    let log = s.log();
    let read = log.lines().find(|l| l.contains("vector cache /cache:") && l.contains("file unchanged")).unwrap_or_else(|| panic!("{log}"));
    assert!(!read.contains(": 0 vectors read"), "{read}");
    assert_eq!((mtime(&file), std::fs::metadata(&file).expect("stat").len()), (written, size));
}

/// What the hostile plugin reported, from the chain's first attempt.
fn attempt_message(v: &Value) -> String {
    v["metadata"]["failover"]["attempts"][0]["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_plugin_cannot_fill_its_cache_folder_past_the_cap_nor_leave_it_and_one_without_the_grant_cannot_write() {
    let mock = MockUpstream::start().await;
    let docs = tempfile::tempdir().expect("kb");
    kb(docs.path());
    let data = tempfile::tempdir().expect("data");
    install(plugins::BAD_CACHE, &data.path().join("plugins"), "cache.wasm");
    // retriever-local has no grant here; its index asks for /cache anyway.
    let s = hybrid(&mock, docs.path(), "", "vector_cache = \"/cache\"")
        .data_dir(data.path())
        .toml(
            "[providers.cache]\nplugin = \"bad-cache\"\nbase_url = \"echo://local\"\n\
             [providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\n\
             [plugins.settings.bad-cache]\nwritable_cache = true\ncache_limit_mb = 1\n\
             [plugins]\ncall_timeout_ms = 5000\n",
        )
        .start();
    let body =
        json!({"index": "Zero-Knowledge", "models": ["cache/m", "echo/default"], "prompt": "hello", "prompt_shield": {"enabled": false}});
    let (status, v) = s.chat_as(&s.admin_key, &body).await;
    assert_eq!(status, 200, "the chain falls over to echo: {v}");
    let msg = attempt_message(&v);
    assert!(msg.contains("cache held"), "{msg}\nlog:\n{}", s.log());
    assert!(msg.contains("seed: written"), "the grant works: {msg}");
    assert!(msg.contains("symlink: ") && msg.contains("hard link: ") && msg.contains("outside: refused"), "{msg}");
    let root = data.path().join("plugin-cache");
    let folder = root.join("bad-cache");
    let (mut bytes, mut entries) = (0u64, 0u64);
    for e in std::fs::read_dir(&folder).expect("the folder") {
        let m = e.expect("entry").path().symlink_metadata().expect("stat");
        assert!(!m.file_type().is_symlink(), "no link was made");
        bytes += m.len();
        entries += 1;
    }
    assert!(bytes <= 1024 * 1024, "{bytes} bytes in a folder capped at 1 MiB: {msg}");
    assert!(bytes >= 768 * 1024, "the cap, not something else, stopped it ({bytes} bytes): {msg}");
    assert!(entries <= 1000, "{entries} entries: {msg}");
    // A stream write past the cap fails with `insufficient-space`; wasi-libc reports a failed stream write as EIO.
    assert!(msg.contains("bytes: ") && !msg.contains("never refused"), "the write past the cap was refused: {msg}");
    assert!(msg.contains("made, then No space left on device"), "{msg}");
    let beside: Vec<_> = std::fs::read_dir(&root).expect("root").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(beside, ["bad-cache"], "nothing written beside the plugin's own folder");
    assert!(!data.path().join("outside.txt").exists());

    // The same hostile plugin gets a fresh count from what is on disk: still no room.
    let (_, v) = s.chat_as(&s.admin_key, &body).await;
    let again = attempt_message(&v);
    assert!(again.contains("bytes: 0 written"), "{again}");

    // A retriever without the grant answers, but cannot write its vectors.
    let (sources, _) = ask(&s, &mock, "how long until my money is back?").await;
    assert_eq!(sources[0]["source"], "billing/refunds.md", "{sources}");
    assert!(s.log().contains("cannot write the vector cache /cache/shop.vec"), "{}", s.log());
    assert!(!root.join("retriever-local").exists());
}
