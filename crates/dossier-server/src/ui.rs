//! The web UI, served by the same binary: `GET /` is the page, `GET /ui/{file}` its
//! script, style sheet and icon. Every file is compiled into the binary
//! (`include_str!`), so nothing is read from disk at run time and nothing is fetched
//! from elsewhere: the UI works offline.
//!
//! The files need no API key (they hold no data); the page asks for the key and sends
//! it on every API call it makes. Each response carries a strict
//! `Content-Security-Policy` (scripts only from this origin, no inline script or
//! style, no frames, no plug-ins, fetches only to this origin), `Cache-Control:
//! no-cache` and an `ETag`, so a browser revalidates and a new binary's UI is never
//! mixed with an old one's.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, Failure};
use crate::request_id::RequestId;
use crate::AppState;

/// What the UI's pages may load and do.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../ui/index.html"),
};

const ASSETS: [Asset; 4] = [
    INDEX,
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../ui/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../ui/style.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../ui/favicon.svg"),
    },
];

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn asset(rid: RequestId, Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => serve(a, &headers),
        None => ApiError::new(&rid, Failure::NoRoute).into_response(),
    }
}

/// The strong validator of an asset: a hash of its bytes, computed once.
fn etag(asset: &Asset) -> &'static str {
    static TAGS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body.as_bytes());
                let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
                (a.name, format!("\"{hex}\""))
            })
            .collect()
    });
    tags.iter()
        .find(|(n, _)| *n == asset.name)
        .map_or("", |(_, t)| t.as_str())
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let tag = etag(asset);
    let fresh = request
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(CONTENT_TYPE, HeaderValue::from_static(asset.content_type))],
            asset.body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
    );
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(ETAG, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_script_and_style_and_has_no_inline_code() {
        let html = INDEX.body;
        assert!(html.contains(r#"<script src="/ui/app.js""#));
        assert!(html.contains(r#"href="/ui/style.css""#));
        // Every <script> has a src (no inline code, which the policy would block).
        for (i, _) in html.match_indices("<script") {
            let tag = &html[i..html[i..].find('>').map_or(html.len(), |e| i + e)];
            assert!(tag.contains("src="), "inline script: {tag}");
        }
        for banned in [
            " onclick=",
            " onload=",
            " onerror=",
            " style=",
            "javascript:",
        ] {
            assert!(!html.contains(banned), "inline {banned} in index.html");
        }
        // Nothing from another origin: the only absolute URL is the SVG namespace name.
        for a in &ASSETS {
            let rest = a.body.replace("http://www.w3.org/2000/svg", "");
            assert!(!rest.contains("http://"), "{} names an http URL", a.name);
            assert!(!rest.contains("https://"), "{} names an https URL", a.name);
            assert!(!rest.contains("\"//"), "{} names another host", a.name);
        }
    }

    #[test]
    fn the_script_never_writes_html_from_strings() {
        let js = ASSETS.iter().find(|a| a.name == "app.js").unwrap().body;
        for banned in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!js.contains(banned), "app.js uses {banned}");
        }
    }

    #[test]
    fn etags_differ_per_file_and_are_quoted() {
        let tags: Vec<&str> = ASSETS.iter().map(etag).collect();
        for t in &tags {
            assert!(
                t.starts_with('"') && t.ends_with('"') && t.len() == 26,
                "{t}"
            );
        }
        let mut unique = tags.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), tags.len());
    }
}
