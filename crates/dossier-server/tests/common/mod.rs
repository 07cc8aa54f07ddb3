//! The loopback-server harness of the integration tests: the shared scenario corpus
//! (shop + acme) ingested with the hash embedder, a keys file, and a real server on a
//! `127.0.0.1` port with a client and graceful shutdown.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

pub mod masks;
pub mod world;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dossier_engine::Engine;
use dossier_server::{hash_key, AppState, KeyStore, ServerConfig};
use serde_json::Value;
use tempfile::TempDir;

/// One API key of a test server: (key, principal, admin).
pub type Key = (&'static str, &'static str, bool);

pub fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios")
}

/// A new store in its own directory with shop and acme ingested: for tests that write.
/// The directory must outlive the engine.
pub fn fresh_engine() -> (TempDir, Arc<Engine>) {
    let dir = tempfile::tempdir().unwrap();
    let engine = hash_engine(
        &dir.path().join("store"),
        &[scenarios().join("shop"), scenarios().join("acme")],
    );
    (dir, Arc::new(engine))
}

/// A store at `store` with the 64-dimension hash embedder and `paths` ingested, which
/// must ingest without a problem.
pub fn hash_engine(store: &Path, paths: &[PathBuf]) -> Engine {
    // The engine blocks (a shared store's database client even runs its own runtime),
    // so it is built off any async runtime, as `dossier serve` builds it.
    let (store, paths) = (store.to_path_buf(), paths.to_vec());
    std::thread::spawn(move || {
        let engine = Engine::with_embedder(
            dossier_engine::dossier_store::testing::location(&store),
            "hash:64",
            Box::new(dossier_embed::HashEmbedder::new(64)),
        )
        .unwrap();
        let report = engine.ingest(&paths, &mut ()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        engine
    })
    .join()
    .unwrap()
}

/// A configuration whose rate limits never refuse a request of a test that sends
/// hundreds (so every compared pair is a real answer, not two 429s).
pub fn unthrottled() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.limits.rate_per_sec = 10_000.0;
    config.limits.burst = 10_000;
    config
}

/// `s` percent-encoded for one path segment (everything but RFC 3986's unreserved
/// characters).
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One engine for the whole test binary, for the tests that do not write (the store is
/// single-process).
pub fn shared_engine() -> Arc<Engine> {
    static ENGINE: OnceLock<(TempDir, Arc<Engine>)> = OnceLock::new();
    ENGINE.get_or_init(fresh_engine).1.clone()
}

/// Writes `keys` as a keys file: beside `path` and renamed over it, as a rotation would.
pub fn write_keys(path: &Path, keys: &[(&str, &str, bool)]) {
    let mut text = String::new();
    for (key, principal, admin) in keys {
        text.push_str(&format!(
            "- {{key_sha256: {}, principal: {principal}, admin: {admin}}}\n",
            hash_key(key)
        ));
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Adds an admin key for `principal` to the keys file at `path` — with the operator
/// scope (store-wide operations such as a reindex) when `operator` — as a rotation
/// would; the server picks the change up on the next request.
pub fn add_admin_key(path: &Path, key: &str, principal: &str, operator: bool) {
    let mut text = std::fs::read_to_string(path).unwrap();
    text.push_str(&format!(
        "- {{key_sha256: {}, principal: {principal}, admin: true, operator: {operator}}}\n",
        hash_key(key)
    ));
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A server on a loopback port, until `stop`.
pub struct Server {
    pub base: String,
    pub client: reqwest::Client,
    /// The server's state, shared with it: limits, cache, jobs, `stopping`, the engine.
    pub state: AppState,
    /// The keys file the server reads (and rereads on change or SIGHUP).
    pub keys_path: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: TempDir,
}

/// One response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub request_id: String,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON, or `Null` when it is not JSON.
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body without its request id: what two answers must share to read the same.
    pub fn sans_id(&self) -> Value {
        let mut b = self.body.clone();
        if let Some(o) = b.as_object_mut() {
            o.remove("request_id");
        }
        b
    }
}

impl Server {
    /// A server on `engine` with the default configuration and no model.
    pub async fn start(engine: Arc<Engine>, keys: &[Key]) -> Server {
        Server::start_with(engine, keys, ServerConfig::default(), None).await
    }

    pub async fn start_with(
        engine: Arc<Engine>,
        keys: &[Key],
        config: ServerConfig,
        model: Option<Arc<dyn dossier_llm::ChatModel>>,
    ) -> Server {
        // Tests send bursts from one key; a principal's own quota is tested on its own
        // (protection.rs). Unless a test set principal limits, each principal may use
        // its tenant's whole rate and slots.
        let mut config = config;
        let d = dossier_server::LimitConfig::default();
        let l = &mut config.limits;
        if (
            l.principal_rate_per_sec,
            l.principal_burst,
            l.principal_concurrency,
        ) == (
            d.principal_rate_per_sec,
            d.principal_burst,
            d.principal_concurrency,
        ) {
            l.principal_rate_per_sec = l.rate_per_sec;
            l.principal_burst = l.burst;
            l.principal_concurrency = l.expensive_concurrency;
        }
        let dir = tempfile::tempdir().unwrap();
        let keys_path = dir.path().join("keys.yaml");
        write_keys(&keys_path, keys);
        let keys = KeyStore::load(&keys_path).unwrap();
        let mut state = AppState::with_config(engine, Arc::new(keys), config);
        if let Some(model) = model {
            state = state.with_model(model);
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(dossier_server::serve_on(
            listener,
            state.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            base,
            client: reqwest::Client::new(),
            state,
            keys_path,
            stop: tx,
            handle,
            _dir: dir,
        }
    }

    /// Sends `req`, with `key` as its bearer token if there is one.
    pub async fn send<'k>(
        &self,
        req: reqwest::RequestBuilder,
        key: impl Into<Option<&'k str>>,
    ) -> Reply {
        let req = match key.into() {
            Some(k) => req.bearer_auth(k),
            None => req,
        };
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
        let request_id = header("x-request-id").expect("every response carries x-request-id");
        let content_type = header("content-type").unwrap_or_default();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            request_id,
            content_type,
            headers,
            body,
            text,
        }
    }

    pub async fn get<'k>(&self, path: &str, key: impl Into<Option<&'k str>>) -> Reply {
        self.send(self.client.get(format!("{}{path}", self.base)), key)
            .await
    }

    pub async fn post<'k>(
        &self,
        path: &str,
        key: impl Into<Option<&'k str>>,
        body: Value,
    ) -> Reply {
        let req = self.client.post(format!("{}{path}", self.base)).json(&body);
        self.send(req, key).await
    }

    pub async fn put<'k>(&self, path: &str, key: impl Into<Option<&'k str>>, body: Value) -> Reply {
        let req = self.client.put(format!("{}{path}", self.base)).json(&body);
        self.send(req, key).await
    }

    pub async fn delete<'k>(&self, path: &str, key: impl Into<Option<&'k str>>) -> Reply {
        self.send(self.client.delete(format!("{}{path}", self.base)), key)
            .await
    }

    /// Graceful shutdown: serving returns once in-flight work has drained. Panics if it
    /// failed.
    pub async fn stop(self) {
        self.shutdown().await.unwrap().unwrap();
    }

    /// Graceful shutdown, returning what the serve task ended with.
    pub async fn shutdown(self) -> Result<std::io::Result<()>, tokio::task::JoinError> {
        let _ = self.stop.send(());
        self.handle.await
    }
}
