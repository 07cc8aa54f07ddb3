//! Spans to an OpenTelemetry collector: a `tracing` layer that keeps each span's name,
//! parent, times, fields and events, and an exporter thread that posts finished spans as
//! OTLP/HTTP JSON (`POST {endpoint}/v1/traces`, the collector's port 4318 protocol).
//!
//! Dossier's own encoder and a blocking `ureq` client, rather than the OpenTelemetry
//! SDK: the format is small and stable, and this way the export has no runtime of its
//! own and cannot block a request (spans are handed over on a bounded channel; when it
//! is full they are dropped and counted, never waited for).
//!
//! **Invariant:** spans carry what the access log and the trace metrics carry: routes
//! without query strings, statuses as the caller sees them, counts and timings. No
//! question, query, document text or record field goes into a span, and a tool that
//! was refused reads `no_hit` there as it does to the caller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Spans waiting for the exporter; more are dropped (and counted).
const QUEUE: usize = 8192;
/// Spans per export request.
const BATCH: usize = 512;
/// How long finished spans may wait before they are sent.
const FLUSH: Duration = Duration::from_millis(200);

/// Counters of the export, for `/metrics`.
#[derive(Debug, Default)]
pub struct ExportStats {
    pub exported: AtomicU64,
    pub dropped: AtomicU64,
    pub failed_batches: AtomicU64,
}

/// One span as it is kept until it ends.
struct SpanData {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: &'static str,
    start: u64,
    attributes: Vec<(String, Value)>,
    events: Vec<Value>,
}

/// The layer: install it on a `tracing_subscriber::registry()`.
pub struct OtlpLayer {
    tx: SyncSender<Value>,
    stats: Arc<ExportStats>,
}

impl OtlpLayer {
    /// A layer exporting to `endpoint` (e.g. `http://127.0.0.1:4318`) as `service`.
    pub fn new(endpoint: &str, service: &str) -> (OtlpLayer, Arc<ExportStats>) {
        let (tx, rx) = sync_channel(QUEUE);
        let stats = Arc::new(ExportStats::default());
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let service = service.to_string();
        let s = stats.clone();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || export_loop(rx, &url, &service, &s))
            .expect("spawn the OTLP exporter thread");
        (
            OtlpLayer {
                tx,
                stats: stats.clone(),
            },
            stats,
        )
    }
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Field values as OTLP attribute values.
struct Fields<'a>(&'a mut Vec<(String, Value)>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.push((f.name().into(), json!({"stringValue": v})));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.0
            .push((f.name().into(), json!({"intValue": v.to_string()})));
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0
            .push((f.name().into(), json!({"intValue": v.to_string()})));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.0.push((f.name().into(), json!({"boolValue": v})));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.0.push((f.name().into(), json!({"doubleValue": v})));
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0
            .push((f.name().into(), json!({"stringValue": format!("{v:?}")})));
    }
}

fn attributes(list: Vec<(String, Value)>) -> Value {
    // A field recorded twice keeps its last value.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Value> = Vec::new();
    for (k, v) in list {
        match seen.get(&k) {
            Some(&i) => out[i] = json!({"key": k, "value": v}),
            None => {
                seen.insert(k.clone(), out.len());
                out.push(json!({"key": k, "value": v}));
            }
        }
    }
    Value::Array(out)
}

impl<S> Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<SpanData>()
                .map(|d| (d.trace_id, d.span_id))
        });
        let mut data = SpanData {
            trace_id: parent.map_or_else(rand::random, |p| p.0),
            span_id: rand::random(),
            parent: parent.map(|p| p.1),
            name: attrs.metadata().name(),
            start: now_nanos(),
            attributes: Vec::new(),
            events: Vec::new(),
        };
        attrs.record(&mut Fields(&mut data.attributes));
        span.extensions_mut().insert(data);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(d) = span.extensions_mut().get_mut::<SpanData>() {
                values.record(&mut Fields(&mut d.attributes));
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        let name = fields
            .iter()
            .position(|(k, _)| k == "message")
            .map(|i| {
                fields.remove(i).1["stringValue"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_else(|| event.metadata().name().to_string());
        let mut ext = span.extensions_mut();
        if let Some(d) = ext.get_mut::<SpanData>() {
            d.events.push(json!({
                "timeUnixNano": now_nanos().to_string(),
                "name": name,
                "attributes": attributes(fields),
            }));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(d) = span.extensions_mut().remove::<SpanData>() else {
            return;
        };
        let mut v = json!({
            "traceId": hex(&d.trace_id),
            "spanId": hex(&d.span_id),
            "name": d.name,
            // SERVER for the request span, INTERNAL for the stages inside it.
            "kind": if d.parent.is_none() { 2 } else { 1 },
            "startTimeUnixNano": d.start.to_string(),
            "endTimeUnixNano": now_nanos().to_string(),
            "attributes": attributes(d.attributes),
            "events": d.events,
            "status": {},
        });
        if let Some(p) = d.parent {
            v["parentSpanId"] = json!(hex(&p));
        }
        if self.tx.try_send(v).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn export_loop(rx: Receiver<Value>, url: &str, service: &str, stats: &ExportStats) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut batch = Vec::new();
    let mut warned = false;
    loop {
        let done = match rx.recv_timeout(FLUSH) {
            Ok(span) => {
                batch.push(span);
                if batch.len() < BATCH {
                    continue;
                }
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        if !batch.is_empty() {
            let n = batch.len() as u64;
            let body = json!({"resourceSpans": [{
                "resource": {"attributes": [
                    {"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "dossier"}, "spans": std::mem::take(&mut batch)}],
            }]});
            let sent = agent
                .post(url)
                .header("content-type", "application/json")
                .send(body.to_string());
            match sent {
                Ok(r) if r.status().is_success() => {
                    stats.exported.fetch_add(n, Ordering::Relaxed);
                }
                other => {
                    stats.failed_batches.fetch_add(1, Ordering::Relaxed);
                    if !warned {
                        warned = true;
                        let why = match other {
                            Ok(r) => format!("HTTP {}", r.status()),
                            Err(e) => e.to_string(),
                        };
                        eprintln!("dossier-server: OTLP export to {url} failed ({why}); spans are dropped until it answers");
                    }
                }
            }
        }
        if done {
            return;
        }
    }
}

/// Installs the OTLP layer as the process's subscriber, exporting to `endpoint`.
/// Without it (no endpoint configured), spans cost one disabled-callsite check each.
pub fn install(endpoint: &str) -> Result<Arc<ExportStats>, String> {
    use tracing_subscriber::layer::SubscriberExt;
    let (layer, stats) = OtlpLayer::new(endpoint, "dossier");
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| format!("a tracing subscriber is already installed: {e}"))?;
    Ok(stats)
}
