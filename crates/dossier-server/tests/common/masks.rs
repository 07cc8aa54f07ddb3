//! Whole responses made comparable: status, headers (less `date`, `x-request-id` and
//! `content-length`) and body, with an identifier, the request id and every timing or
//! clock field masked. The oracle tests compare two requests' responses this way.

use serde_json::Value;

use super::Reply;

/// A masked response: status, sorted headers, body.
pub type Masked = (u16, Vec<(String, String)>, Value);

/// Names whose values are timings or clocks: masked, since they may differ run to run.
pub fn is_timing(key: &str) -> bool {
    key.ends_with("_ms")
        || key.ends_with("_secs")
        || key.ends_with("_at")
        || matches!(
            key,
            "elapsed" | "created" | "max_wall" | "id" | "system_fingerprint"
        )
}

pub fn mask_value(v: &mut Value, subs: &[(&str, &str)]) {
    match v {
        // JSON carried as text (an MCP tool result's content) is masked as JSON.
        Value::String(s) if s.starts_with('{') && serde_json::from_str::<Value>(s).is_ok() => {
            let mut inner: Value = serde_json::from_str(s).unwrap();
            mask_value(&mut inner, subs);
            *v = inner;
        }
        Value::String(s) => {
            for (from, to) in subs {
                if !from.is_empty() && s.contains(from) {
                    *s = s.replace(from, to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask_value(x, subs)),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if is_timing(k) && (x.is_number() || x.is_string()) {
                    *x = Value::Null;
                } else {
                    mask_value(x, subs);
                }
            }
        }
        _ => {}
    }
}

/// Status, headers (less `date`; `content-length` follows from the body) and the body
/// with `id` and the request id masked.
pub fn masked(r: &Reply, id: &str) -> Masked {
    let rid = r.request_id.clone();
    let subs = [(id, "<ID>"), (rid.as_str(), "<RID>")];
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "date" | "x-request-id" | "content-length"))
        .map(|(k, v)| {
            let v = v.to_str().unwrap_or("<binary>").replace(id, "<ID>");
            (k.as_str().to_string(), v)
        })
        .collect();
    headers.sort();
    let mut body = if r.body.is_null() {
        Value::String(r.text.clone())
    } else {
        r.body.clone()
    };
    mask_value(&mut body, &subs);
    (r.status, headers, body)
}
