//! The Model Context Protocol server: search, ask, record lookup, graph neighbours and
//! document sections as MCP tools, at `POST /mcp` (streamable HTTP, one JSON response
//! per request, no session state — any replica answers any message) and over stdio
//! (`dossier mcp`, see [`serve_stdio`]).
//!
//! MCP is a protocol adapter here, not a second API: every tool call is sent through the
//! API's own router as the request the tool names, carrying the key the MCP session was
//! opened with. Authentication, scope, limits, deadlines, caching, traces and the
//! "not yours" = "does not exist" rule are therefore exactly those of the HTTP routes.
//! The identity is never a tool argument: tools declare the arguments they take and
//! anything else (a `principal`, a `tenant`, a `groups`) is refused.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use crate::auth::Caller;
use crate::request_id::RequestId;
use crate::AppState;

/// Protocol revisions this server speaks; an `initialize` naming another is answered
/// with the newest.
const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The longest JSON-RPC message read from stdio (the HTTP route has the API's body limit).
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The most bytes of a route's answer a tool result carries.
const MAX_RESULT_BYTES: usize = 8 << 20;

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/mcp",
        post(http_message).get(not_offered).delete(not_offered),
    )
}

/// A tool: its name, what it is for, its arguments (JSON schema properties) and which
/// of them are required.
struct Tool {
    name: &'static str,
    description: &'static str,
    properties: fn() -> Value,
    required: &'static [&'static str],
    route: Route,
}

/// The API route a tool call is sent as.
enum Route {
    /// `POST` with the arguments as the JSON body.
    Post(&'static str),
    /// `GET` of `prefix`, then each argument of `in_path` as a path segment in turn; the
    /// other arguments go into the query string.
    Get {
        prefix: &'static str,
        in_path: &'static [&'static str],
    },
}

fn date_props() -> Map<String, Value> {
    let date = |what: &str| json!({"type": "string", "format": "date", "description": what});
    let mut m = Map::new();
    m.insert(
        "now".into(),
        date("The business date (default: today); sets each version's status."),
    );
    m.insert(
        "as_of".into(),
        date("Judge the document versions in force on this date."),
    );
    m.insert(
        "kb".into(),
        json!({"type": "array", "items": {"type": "string"}, "maxItems": crate::routes::MAX_KBS,
               "description": "Only documents of these knowledge bases (within the key's own)."}),
    );
    m
}

fn with_dates(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.extend(date_props());
    }
    v
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "search",
        description: "Search the documents the key's principal may read (tenant, access \
                      groups and version validity are applied before ranking). Returns \
                      hits with chunk ids, text, section paths and citations.",
        properties: || {
            with_dates(json!({
                "query": {"type": "string", "description": "What to look for."},
                "mode": {"type": "string", "enum": ["bm25", "vector", "hybrid", "local", "graph", "global", "drift"], "description": "Retrieval mode (default graph)."},
                "k": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Results wanted (default 5)."}
            }))
        },
        required: &["query"],
        route: Route::Post("/v1/search"),
    },
    Tool {
        name: "ask",
        description: "Answer a question from the documents and records the key's \
                      principal may read, every claim cited to the version it came from; \
                      says plainly when the evidence is not sufficient.",
        properties: || {
            with_dates(json!({
                "question": {"type": "string"},
                "mode": {"type": "string", "enum": ["global"], "description": "Only `global` (ask the community reports); absent: the agent picks its tools."}
            }))
        },
        required: &["question"],
        route: Route::Post("/v1/ask"),
    },
    Tool {
        name: "record_lookup",
        description: "One business record by table and key, if the key's principal may \
                      read it (a row of another owner and no row at all get the same \
                      answer).",
        properties: || {
            json!({
                "table": {"type": "string", "description": "Record table, e.g. orders."},
                "key": {"type": "string", "description": "The row's key, e.g. A123."}
            })
        },
        required: &["table", "key"],
        route: Route::Get {
            prefix: "/v1/records",
            in_path: &["table", "key"],
        },
    },
    Tool {
        name: "graph_neighbors",
        description: "An entity's neighbourhood in the knowledge graph as the key's \
                      principal may see it, every edge with its provenance.",
        properties: || {
            with_dates(json!({
                "name": {"type": "string", "description": "Entity name, alias or id."},
                "hops": {"type": "integer", "minimum": 1, "maximum": 3, "description": "Edges away from the entity (default 1)."}
            }))
        },
        required: &["name"],
        route: Route::Get {
            prefix: "/v1/graph/neighbors",
            in_path: &["name"],
        },
    },
    Tool {
        name: "document_section",
        description: "The section a cited chunk belongs to (`DOC@VERSION#N`, as in \
                      citations), with its neighbouring chunks.",
        properties: || {
            with_dates(json!({
                "chunk_id": {"type": "string", "description": "A chunk id from a citation or a hit."}
            }))
        },
        required: &["chunk_id"],
        route: Route::Get {
            prefix: "/v1/sections",
            in_path: &["chunk_id"],
        },
    },
];

fn tool_list() -> Value {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": {
                    "type": "object",
                    "properties": (t.properties)(),
                    "required": t.required,
                    "additionalProperties": false
                }
            })
        })
        .collect();
    json!({ "tools": tools })
}

/// A JSON-RPC error: code and message.
struct RpcError(i64, String);

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

fn rpc_error(id: Value, e: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.0, "message": e.1}})
}

/// What one incoming message asks for.
enum Incoming {
    /// A request: answer it.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification or a response to us: nothing to answer.
    Nothing,
}

fn classify(msg: &Value) -> Result<Incoming, RpcError> {
    let Value::Object(m) = msg else {
        let what = if msg.is_array() {
            "batches are not supported: send one message at a time"
        } else {
            "a message is a JSON object"
        };
        return Err(RpcError(INVALID_REQUEST, what.into()));
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError(INVALID_REQUEST, "jsonrpc must be \"2.0\"".into()));
    }
    let Some(method) = m.get("method") else {
        // A response (result or error) to a request of ours: we send none, so ignore.
        return Ok(Incoming::Nothing);
    };
    let Some(method) = method.as_str() else {
        return Err(RpcError(INVALID_REQUEST, "method must be a string".into()));
    };
    match m.get("id") {
        None => Ok(Incoming::Nothing),
        Some(id @ (Value::String(_) | Value::Number(_))) => Ok(Incoming::Request {
            id: id.clone(),
            method: method.to_string(),
            params: m.get("params").cloned().unwrap_or(Value::Null),
        }),
        Some(_) => Err(RpcError(
            INVALID_REQUEST,
            "id must be a string or a number".into(),
        )),
    }
}

/// Answers one message for the holder of `key` (already authenticated by the caller of
/// this function); `None` for notifications.
pub(crate) async fn answer(
    state: &AppState,
    key: &str,
    rid: &RequestId,
    msg: &Value,
) -> Option<Value> {
    let (id, method, params) = match classify(msg) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Nothing) => return None,
        Err(e) => return Some(rpc_error(Value::Null, e)),
    };
    let result = match method.as_str() {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tool_list()),
        "tools/call" => call_tool(state, key, rid, &params).await,
        other => Err(RpcError(
            METHOD_NOT_FOUND,
            format!("no method {other}: this server offers tools only"),
        )),
    };
    Some(match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err(e) => rpc_error(id, e),
    })
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "dossier", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Dossier answers from an organisation's documents and records, \
                         as the principal of the API key this session was opened with: \
                         cite what you use, and say so when the evidence is not sufficient."
    })
}

fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The API request a tool call stands for: method, path and query, JSON body.
fn request_for(
    tool: &Tool,
    args: &Map<String, Value>,
) -> Result<(Method, String, Option<Value>), RpcError> {
    let text = |k: &str| -> Result<String, RpcError> {
        match args.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(RpcError(INVALID_PARAMS, format!("`{k}` must be a string"))),
        }
    };
    // The remaining (optional) arguments of the GET tools go into the query string.
    let query = |taken: &[&str]| -> Result<String, RpcError> {
        let pairs: Vec<(String, String)> = args
            .iter()
            .filter(|(k, _)| !taken.contains(&k.as_str()))
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                // A list (`kb`) goes comma-separated, as the GET routes read it.
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().filter(|s| !s.contains(',')))
                    .collect::<Option<Vec<_>>>()
                    .map(|list| (k.clone(), list.join(",")))
                    .ok_or_else(|| {
                        RpcError(
                            INVALID_PARAMS,
                            format!("`{k}` must be a list of strings without commas"),
                        )
                    }),
                _ => Err(RpcError(
                    INVALID_PARAMS,
                    format!("`{k}` must be a string, a number or a list of strings"),
                )),
            })
            .collect::<Result<_, _>>()?;
        if pairs.is_empty() {
            return Ok(String::new());
        }
        serde_urlencoded::to_string(pairs)
            .map(|q| format!("?{q}"))
            .map_err(|e| RpcError(INVALID_PARAMS, e.to_string()))
    };
    match tool.route {
        Route::Post(path) => Ok((Method::POST, path.into(), Some(Value::Object(args.clone())))),
        Route::Get { prefix, in_path } => {
            let mut uri = prefix.to_string();
            for k in in_path {
                uri.push('/');
                uri.push_str(&segment(&text(k)?));
            }
            uri.push_str(&query(in_path)?);
            Ok((Method::GET, uri, None))
        }
    }
}

async fn call_tool(
    state: &AppState,
    key: &str,
    rid: &RequestId,
    params: &Value,
) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError(INVALID_PARAMS, "tools/call needs a tool `name`".into()))?;
    let tool = TOOLS
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| RpcError(INVALID_PARAMS, format!("no tool {name}")))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(RpcError(
                INVALID_PARAMS,
                "`arguments` must be an object".into(),
            ))
        }
    };
    let declared = (tool.properties)();
    for k in args.keys() {
        if declared.get(k).is_none() {
            return Err(RpcError(
                INVALID_PARAMS,
                format!(
                    "{name} takes no argument `{k}`; the identity is the API key this \
                     session was opened with"
                ),
            ));
        }
    }
    for k in tool.required {
        if !args.contains_key(*k) {
            return Err(RpcError(INVALID_PARAMS, format!("{name} needs `{k}`")));
        }
    }
    let (method, uri, body) = request_for(tool, &args)?;
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {key}"));
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let mut req = req
        .body(body)
        .map_err(|e| RpcError(INVALID_PARAMS, e.to_string()))?;
    // The tool's request is part of this message's request: one id in traces and logs.
    req.extensions_mut().insert(rid.clone());
    let resp = crate::api_router(state.clone())
        .oneshot(req)
        .await
        .unwrap_or_else(|never| match never {});
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), MAX_RESULT_BYTES)
        .await
        .map_err(|e| RpcError(-32603, format!("reading the tool's answer: {e}")))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut result = json!({
        "content": [{"type": "text", "text": text}],
        "isError": !status.is_success(),
    });
    if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(&bytes) {
        result["structuredContent"] = v;
    }
    Ok(result)
}

/// `POST /mcp`: one JSON-RPC message from the holder of the bearer key.
async fn http_message(
    State(state): State<AppState>,
    caller: Caller,
    req: Request<Body>,
) -> Response {
    let rid = caller.request_id.clone();
    let key = crate::auth::bearer_of(req.headers())
        .unwrap_or_default()
        .to_string();
    let bytes: Bytes =
        match axum::body::to_bytes(req.into_body(), crate::routes::MAX_JSON_BODY).await {
            Ok(b) => b,
            Err(_) => {
                let e = RpcError(INVALID_REQUEST, "the message is too large".into());
                return json_response(StatusCode::PAYLOAD_TOO_LARGE, &rpc_error(Value::Null, e));
            }
        };
    let msg: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            let e = RpcError(PARSE_ERROR, format!("not JSON: {e}"));
            return json_response(StatusCode::BAD_REQUEST, &rpc_error(Value::Null, e));
        }
    };
    match answer(&state, &key, &rid, &msg).await {
        None => StatusCode::ACCEPTED.into_response(),
        Some(reply) if reply.get("error").is_some() && reply["id"].is_null() => {
            json_response(StatusCode::BAD_REQUEST, &reply)
        }
        Some(reply) => json_response(StatusCode::OK, &reply),
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = (status, v.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `GET /mcp` (an event stream for messages the server sends unasked) and `DELETE /mcp`
/// (ending a session): this server sends nothing unasked and keeps no sessions.
async fn not_offered() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// Checks that `key` is a key of `state`'s key file whose principal the store holds
/// (what every HTTP request checks), for a stdio session before it starts.
pub fn check_key(state: &AppState, key: &str) -> Result<(), String> {
    let entry = state
        .keys
        .lookup(key)
        .ok_or("DOSSIER_API_KEY is not a key of the keys file")?;
    let today = chrono::Local::now().date_naive();
    state
        .engine
        .scope(&entry.principal, today)
        .map(|_| ())
        .map_err(|e| format!("the key's principal {}: {e}", entry.principal))
}

/// Serves MCP over stdin/stdout for the holder of `key` (checked by the caller): one
/// JSON-RPC message per line each way; diagnostics go to stderr. Returns at the end of
/// input.
pub async fn serve_stdio(state: AppState, key: String) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let mut input = BufReader::new(tokio::io::stdin());
    let mut out = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input)
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        let reply = if line.len() > MAX_MESSAGE_BYTES && !line.ends_with(b"\n") {
            // Skip the rest of the oversized line before answering.
            let mut rest = Vec::new();
            input.read_until(b'\n', &mut rest).await?;
            Some(rpc_error(
                Value::Null,
                RpcError(
                    INVALID_REQUEST,
                    format!("a message is at most {MAX_MESSAGE_BYTES} bytes"),
                ),
            ))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match serde_json::from_slice::<Value>(&line) {
                Ok(msg) => answer(&state, &key, &RequestId::generate(), &msg).await,
                Err(e) => Some(rpc_error(
                    Value::Null,
                    RpcError(PARSE_ERROR, format!("not JSON: {e}")),
                )),
            }
        };
        if let Some(reply) = reply {
            let mut text = reply.to_string();
            text.push('\n');
            out.write_all(text.as_bytes()).await?;
            out.flush().await?;
        }
    }
}
