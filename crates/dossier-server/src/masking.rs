//! The response-side gate of the PII policy: every JSON (or plain-text) response to a
//! caller whose scope masks sensitive values is masked once more as a whole, on every
//! route — MCP tool calls included, since they are sent through these routes.
//!
//! The engine masks what it hands out (hits, records, reports) and the agent masks what
//! it sends a model; this pass catches what neither shaped: a trace read back, a graph
//! node's name, an echoed question. The caller's masker reaches it through a slot the
//! middleware puts in the request and [`crate::auth::Caller`]'s extractor fills, so no
//! route has to remember it. A streamed chat completion (`text/event-stream`) is built
//! whole before it is sent, so each of its `data:` events is masked as JSON too (and
//! its content was masked before it was split into deltas).

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dossier_core::pii::Masker;

/// Largest response body masked in one piece; larger ones (none of the API's) are
/// refused rather than passed unmasked.
const MAX_MASKED_BODY: usize = 64 << 20;

/// Where the extractor leaves the caller's masker for the response pass.
#[derive(Clone, Default)]
pub(crate) struct MaskSlot(Arc<OnceLock<Arc<Masker>>>);

impl MaskSlot {
    pub(crate) fn set(&self, masker: Arc<Masker>) {
        let _ = self.0.set(masker);
    }
}

/// Left on a response whose caller's values are masked, for the access log line and the
/// request span written outside the router (a path can carry a value: an entity name,
/// a record key).
#[derive(Clone)]
pub(crate) struct MaskedFor(pub Arc<Masker>);

impl MaskedFor {
    /// `path`, percent-decoded and masked.
    pub(crate) fn path(&self, path: &str) -> String {
        self.0.mask(&percent_decoded(path)).into_owned()
    }
}

/// `%XX` sequences decoded (invalid UTF-8 replaced), the rest as it is.
fn percent_decoded(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) async fn guard(mut req: Request, next: Next) -> Response {
    let slot = MaskSlot::default();
    req.extensions_mut().insert(slot.clone());
    let mut resp = next.run(req).await;
    let Some(masker) = slot.0.get().cloned() else {
        return resp;
    };
    resp.extensions_mut().insert(MaskedFor(masker.clone()));
    let kind = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let json = kind.starts_with("application/json");
    let text = kind.starts_with("text/plain") || kind.starts_with("text/markdown");
    let events = kind.starts_with("text/event-stream");
    if !(json || text || events) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_MASKED_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return crate::error::ApiError::new(
                &crate::request_id::RequestId::generate(),
                crate::error::Failure::Internal("response too large to mask".into()),
            )
            .into_response()
        }
    };
    let masked: Vec<u8> = if events {
        masked_events(&masker, &String::from_utf8_lossy(&bytes)).into_bytes()
    } else if json {
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(mut v) => {
                masker.mask_json(&mut v);
                serde_json::to_vec(&v).unwrap_or_else(|_| bytes.to_vec())
            }
            Err(_) => masker
                .mask(&String::from_utf8_lossy(&bytes))
                .into_owned()
                .into_bytes(),
        }
    } else {
        masker
            .mask(&String::from_utf8_lossy(&bytes))
            .into_owned()
            .into_bytes()
    };
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(masked))
}

/// Server-Sent Events with each `data:` payload masked: as JSON when it is JSON (the
/// chunks), as text otherwise (`[DONE]` stays as it is).
fn masked_events(masker: &Masker, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        match body.strip_prefix("data:") {
            Some(data) => {
                let payload = data.trim_start();
                let masked = match serde_json::from_str::<serde_json::Value>(payload) {
                    Ok(mut v) => {
                        masker.mask_json(&mut v);
                        serde_json::to_string(&v).unwrap_or_else(|_| payload.to_string())
                    }
                    Err(_) => masker.mask(payload).into_owned(),
                };
                out.push_str("data: ");
                out.push_str(&masked);
            }
            None => out.push_str(&masker.mask(body)),
        }
        out.push_str(end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use dossier_core::pii::{samples, PiiPolicy, PolicySpec, TenantSpec};
    use tower::ServiceExt;

    fn masker() -> Arc<Masker> {
        let spec = PolicySpec {
            tenants: [(
                "t".to_string(),
                TenantSpec {
                    mask: vec!["phone".into(), "email".into()],
                    ..TenantSpec::default()
                },
            )]
            .into(),
        };
        PiiPolicy::compile(&spec)
            .unwrap()
            .masker_for("t", &[])
            .unwrap()
    }

    /// A route that hands out raw values, as a route the engine did not shape would:
    /// with the caller's masker in the slot, every JSON string and plain text is masked;
    /// without it, nothing is touched.
    #[tokio::test]
    async fn every_string_of_a_response_is_masked_for_a_masked_caller() {
        let phone = samples::cn_mobile(3);
        let email = samples::email(4);
        for (masked_caller, path) in [(true, "/json"), (true, "/text"), (false, "/json")] {
            let (p, e) = (phone.clone(), email.clone());
            let (p2, e2) = (phone.clone(), email.clone());
            let app = Router::new()
                .route(
                    "/json",
                    get(move |req: Request| async move {
                        if masked_caller {
                            req.extensions().get::<MaskSlot>().unwrap().set(masker());
                        }
                        axum::Json(serde_json::json!({"a": [p.clone(), {e.clone(): "x"}]}))
                    }),
                )
                .route(
                    "/text",
                    get(move |req: Request| async move {
                        req.extensions().get::<MaskSlot>().unwrap().set(masker());
                        format!("call {p2} or mail {e2}")
                    }),
                )
                .layer(axum::middleware::from_fn(guard));
            let resp = app
                .oneshot(Request::get(path).body(Body::empty()).unwrap())
                .await
                .unwrap();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let text = String::from_utf8(body.to_vec()).unwrap();
            assert_eq!(
                !text.contains(&phone) && !text.contains(&email),
                masked_caller,
                "{path}: {text}"
            );
        }
    }

    #[test]
    fn every_event_of_a_stream_is_masked() {
        let phone = samples::cn_mobile(5);
        let stream = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"call {phone}\\n\"}}}}]}}\n\n\
             data: not json {phone}\n\ndata: [DONE]\n\n"
        );
        let masked = masked_events(&masker(), &stream);
        assert!(!masked.contains(&phone), "{masked}");
        assert!(masked.ends_with("data: [DONE]\n\n"), "{masked}");
        assert_eq!(masked.matches("data: ").count(), 3, "{masked}");
        let first: serde_json::Value = serde_json::from_str(
            masked
                .lines()
                .next()
                .unwrap()
                .strip_prefix("data: ")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(first["choices"][0]["delta"]["content"], "call [phone]\n");
    }
}
