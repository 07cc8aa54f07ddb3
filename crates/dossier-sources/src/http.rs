//! HTTP JSON sources: `GET base + path` with the key in the path (percent-encoded) and
//! the caller's identity in headers; the service decides what the caller may read.
//!
//! ureq does its blocking I/O on the caller's thread with no async runtime of its own,
//! so the same client is right in the CLI and on the server's blocking pool (a blocking
//! reqwest client would start a second runtime inside the server's, and constructing or
//! dropping one on a runtime thread panics).

use std::time::Duration;

use crate::{Attempt, ConnectionSpec, Fetched, Reader, MAX_ROW_BYTES};

pub(crate) struct Client {
    base: String,
    headers: Vec<(String, String)>,
    agent: ureq::Agent,
}

impl Client {
    pub(crate) fn new(spec: &ConnectionSpec) -> Result<Client, String> {
        let mut headers = Vec::new();
        for (k, v) in &spec.headers {
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                return Err(format!("header {k:?}: not a valid header name"));
            }
            if v.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
                return Err(format!("header {k}: not a valid header value"));
            }
            headers.push((k.clone(), v.clone()));
        }
        let agent = ureq::Agent::config_builder()
            // A redirect could take the caller's identity to another host.
            .max_redirects(0)
            // A 4xx or 5xx is an answer to read (404 is "no such row"), not a transport error.
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Client {
            base: spec.url.trim_end_matches('/').to_string(),
            headers,
            agent,
        })
    }

    pub(crate) fn fetch(&self, path: &str, key: &str, reader: &Reader, left: Duration) -> Attempt {
        let url = format!("{}{}", self.base, path.replace("{key}", &encoded(key)));
        let mut req = self.agent.get(&url);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let sent = req
            .header("X-Dossier-Principal", reader.principal)
            .header("X-Dossier-Tenant", reader.tenant)
            .header("X-Dossier-Groups", reader.groups.join(","))
            .header("Accept", "application/json")
            .config()
            .timeout_global(Some(left))
            .build()
            .call();
        let timed_out = || Attempt::Timeout(format!("no answer within {} ms", left.as_millis()));
        let mut resp = match sent {
            Ok(r) => r,
            Err(e) if is_timeout(&e) => return timed_out(),
            Err(
                e
                @ (ureq::Error::ConnectionFailed | ureq::Error::HostNotFound | ureq::Error::Io(_)),
            ) => return Attempt::Transient(format!("cannot connect: {e}")),
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        let status = resp.status().as_u16();
        match status {
            200 => {}
            // "Not there" and "not yours" read the same.
            403 | 404 | 410 => return Attempt::Done(Fetched::Missing),
            429 | 500..=599 => return Attempt::Transient(format!("HTTP {status}")),
            s => return Attempt::Failed(format!("HTTP {s}")),
        }
        let body = match resp
            .body_mut()
            .with_config()
            .limit(MAX_ROW_BYTES as u64)
            .read_to_vec()
        {
            Ok(b) => b,
            Err(e) if is_timeout(&e) => return timed_out(),
            Err(ureq::Error::BodyExceedsLimit(_)) => {
                return Attempt::Failed(format!("a row over {MAX_ROW_BYTES} bytes"))
            }
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(serde_json::Value::Object(fields)) => Attempt::Done(Fetched::Row(fields)),
            Ok(_) => Attempt::Failed("the answer is not a JSON object".into()),
            Err(e) => Attempt::Failed(format!("the answer is not JSON: {e}")),
        }
    }
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        ),
        _ => false,
    }
}

/// `key` percent-encoded for one path segment.
fn encoded(key: &str) -> String {
    key.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
