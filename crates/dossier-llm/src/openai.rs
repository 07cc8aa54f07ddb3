//! OpenAI-compatible chat completions over HTTP.

use dossier_core::error::error_chain;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::{
    excerpt, ChatModel, ChatRequest, ChatResponse, LlmError, Message, ToolCall, ToolSpec, Usage,
};

/// Characters of a response body quoted in errors.
const BODY_EXCERPT: usize = 500;

/// The most bytes of a response body read: far above any chat completion, low enough
/// that a broken or hostile server cannot fill memory.
const MAX_RESPONSE_BYTES: u64 = 32 << 20;

/// The HTTP client of the chat and embedding providers: ureq, synchronous on the calling
/// thread, with `timeout` for the whole request and at most 10 s of it to connect.
///
/// Why ureq and not reqwest's blocking client: [`ChatModel::chat`] is a blocking call,
/// and the server (tokio) makes it on its blocking pool. reqwest's blocking client runs
/// a private tokio runtime on a thread of its own, one per client, and hands each
/// request to it; inside the server that is a second runtime beside the server's, and
/// constructing or dropping one on a runtime thread panics. ureq does blocking I/O on
/// the caller's thread with no runtime at all, so the same client is right in the CLI
/// (no runtime) and on the server's blocking pool. An async client would tie
/// [`ChatModel`] to one runtime and make the CLI start one.
pub(crate) fn http_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout.min(Duration::from_secs(10))))
        // A 4xx or 5xx is an answer to report with its body, not a transport failure.
        .http_status_as_error(false)
        .build()
        .into()
}

/// Whether a ureq error is a timeout (the whole request's, or a socket's).
pub(crate) fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        ),
        _ => false,
    }
}

/// A chat model behind an OpenAI-compatible `POST /v1/chat/completions` endpoint.
///
/// One request per [`chat`](ChatModel::chat) call, no retries: a failure comes back as
/// [`LlmError::Timeout`], [`LlmError::Http`], [`LlmError::Transport`] or
/// [`LlmError::Malformed`] for the caller to judge. Its `Debug` output hides the API key.
///
/// Blocking: each call does its I/O on the calling thread (ureq, with no async runtime
/// of its own). Inside an async runtime, call it from a blocking thread
/// (`tokio::task::spawn_blocking`), as the server does.
#[derive(Clone)]
pub struct OpenAiChat {
    url: String,
    model: String,
    timeout: Duration,
    api_key: Option<String>,
    recover_tool_calls: bool,
    client: ureq::Agent,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("recover_tool_calls", &self.recover_tool_calls)
            .finish()
    }
}

impl OpenAiChat {
    /// A client for `model` at `base_url` (the server root, with or without the
    /// trailing `/v1`), giving up on a request after `timeout` (the whole request:
    /// connecting, the prompt, the generation). No API key.
    pub fn new(base_url: &str, model: &str, timeout: Duration) -> Result<Self, LlmError> {
        let base = base_url.trim_end_matches('/');
        let url = format!(
            "{}/v1/chat/completions",
            base.strip_suffix("/v1").unwrap_or(base)
        );
        Ok(Self {
            url,
            model: model.into(),
            timeout,
            api_key: None,
            recover_tool_calls: true,
            client: http_agent(timeout),
        })
    }

    /// Whether to recover tool calls written as text (on by default).
    ///
    /// Small local models often answer a tools request with the call as plain JSON,
    /// e.g. `{"name": "record", "arguments": {"key": "k"}}`, bare or in a ```` ```json ````
    /// fence, instead of the `<tool_call>` markup the server parses into `tool_calls`
    /// (Qwen2.5-Coder-0.5B does so almost always). With recovery on, when tools were
    /// offered and the server returned no tool calls, a text answer that consists of
    /// nothing but such objects (one or more, or an array of them, each naming an
    /// offered tool with an object of arguments, optionally inside `<tool_call>` tags or
    /// code fences) becomes those tool calls, with ids `call_0`, `call_1`, … and no
    /// content. Any other text, prose around the JSON included, is left as it is, and so
    /// is every answer to a request with a [`json_schema`](ChatRequest::json_schema).
    pub fn with_tool_call_recovery(mut self, on: bool) -> Self {
        self.recover_tool_calls = on;
        self
    }

    /// Sends `Authorization: Bearer <key>` with each request.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Takes the API key from the environment variable `var` when it is set and not
    /// empty; otherwise sends none (local servers need none).
    pub fn with_api_key_env(mut self, var: &str) -> Self {
        self.api_key = std::env::var(var).ok().filter(|k| !k.trim().is_empty());
        self
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `model` field of each request.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn transport(&self, e: ureq::Error) -> LlmError {
        if is_timeout(&e) {
            LlmError::Timeout {
                url: self.url.clone(),
                after: self.timeout,
            }
        } else {
            // The chain says what actually failed (refused, reset, DNS…).
            LlmError::Transport {
                url: self.url.clone(),
                message: error_chain(&e),
            }
        }
    }
}

impl ChatModel for OpenAiChat {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let mut http = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            http = http.header("Authorization", format!("Bearer {key}"));
        }
        let mut resp = http
            .send(request_body(&self.model, req).to_string())
            .map_err(|e| self.transport(e))?;
        let status = resp.status();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(|e| self.transport(e))?;
        if !status.is_success() {
            return Err(LlmError::Http {
                url: self.url.clone(),
                status: status.as_u16(),
                body: excerpt(&body, BODY_EXCERPT),
            });
        }
        let mut out = parse_response(&body).map_err(|message| LlmError::Malformed {
            url: self.url.clone(),
            message,
        })?;
        if self.recover_tool_calls && req.json_schema.is_none() {
            recover_tool_calls(&mut out, &req.tools);
        }
        out.elapsed = started.elapsed();
        Ok(out)
    }

    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }
}

/// The JSON body of a chat completion request.
pub(crate) fn request_body(model: &str, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        req.messages.iter().map(message_json).collect(),
    );
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), tools);
    }
    if let Some(schema) = &req.json_schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": { "name": "response", "strict": true, "schema": schema }
            }),
        );
    }
    if let Some(n) = req.max_tokens {
        body.insert("max_tokens".into(), n.into());
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), t.into());
    }
    Value::Object(body)
}

fn message_json(m: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), m.role.as_str().into());
    if m.tool_calls.is_empty() || !m.content.is_empty() {
        out.insert("content".into(), m.content.clone().into());
    } else {
        // OpenAI's convention for an assistant turn that only calls tools.
        out.insert("content".into(), Value::Null);
    }
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments_text() }
                })
            })
            .collect();
        out.insert("tool_calls".into(), calls);
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), id.clone().into());
    }
    Value::Object(out)
}

/// Parses a chat completion body (the first choice). `elapsed` is left at zero.
/// The error is a message for [`LlmError::Malformed`].
pub(crate) fn parse_response(body: &str) -> Result<ChatResponse, String> {
    let quoted = || excerpt(body, BODY_EXCERPT);
    let v: Value =
        serde_json::from_str(body).map_err(|e| format!("body is not JSON ({e}): {}", quoted()))?;
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(format!(
            "server reported an error: {}",
            excerpt(&msg, BODY_EXCERPT)
        ));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| format!("no choices: {}", quoted()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| format!("first choice has no message: {}", quoted()))?;

    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Content parts: [{"type": "text", "text": "…"}, …].
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<String>(),
        ),
        Some(other) => return Err(format!("message content is neither text nor null: {other}")),
    }
    .filter(|s| !s.trim().is_empty());

    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(i, c)| parse_tool_call(i, c))
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("tool_calls is not an array: {other}")),
    };

    let count = |key: &str| {
        v.get("usage")
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(ChatResponse {
        content,
        tool_calls,
        usage: Usage {
            prompt_tokens: count("prompt_tokens"),
            completion_tokens: count("completion_tokens"),
        },
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        elapsed: Duration::ZERO,
    })
}

fn parse_tool_call(index: usize, c: &Value) -> Result<ToolCall, String> {
    let function = c
        .get("function")
        .ok_or_else(|| format!("tool call {index} has no function: {c}"))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("tool call {index} has no function name: {c}"))?;
    let id = c
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("call_{index}"));
    let (arguments, raw_arguments) = match function.get("arguments") {
        None | Some(Value::Null) => (Value::Object(Map::new()), None),
        Some(Value::String(s)) if s.trim().is_empty() => (Value::Object(Map::new()), None),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(parsed) => (parsed, None),
            Err(_) => (Value::Null, Some(s.clone())),
        },
        Some(other) => (other.clone(), None),
    };
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
        raw_arguments,
    })
}

/// Turns a text answer that is nothing but tool-call JSON into tool calls (see
/// [`OpenAiChat::with_tool_call_recovery`]). Returns whether it did.
pub(crate) fn recover_tool_calls(resp: &mut ChatResponse, tools: &[ToolSpec]) -> bool {
    if tools.is_empty() || !resp.tool_calls.is_empty() {
        return false;
    }
    let Some(content) = &resp.content else {
        return false;
    };
    // Drop code-fence lines and <tool_call> tags; what remains must be JSON values only.
    let text = content
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("<tool_call>", "\n")
        .replace("</tool_call>", "\n");
    let mut values = Vec::new();
    for value in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
        match value {
            Ok(Value::Array(items)) => values.extend(items),
            Ok(v) => values.push(v),
            Err(_) => return false,
        }
    }
    if values.is_empty() {
        return false;
    }
    let mut calls = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        // {"name", "arguments"} or OpenAI's {"type": "function", "function": {…}}.
        let call = v.get("function").filter(|f| f.is_object()).unwrap_or(v);
        let Some(name) = call.get("name").and_then(Value::as_str) else {
            return false;
        };
        if !tools.iter().any(|t| t.name == name) {
            return false;
        }
        let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
            None => Value::Object(Map::new()),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(parsed @ Value::Object(_)) => parsed,
                _ => return false,
            },
            Some(obj @ Value::Object(_)) => obj.clone(),
            Some(_) => return false,
        };
        calls.push(ToolCall::new(format!("call_{i}"), name, arguments));
    }
    resp.tool_calls = calls;
    resp.content = None;
    true
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;
    use crate::ToolSpec;

    fn record_tool() -> ToolSpec {
        ToolSpec::new(
            "record",
            "Fetch one record",
            json!({"type": "object", "properties": {"table": {"type": "string"}, "key": {"type": "string"}}, "required": ["table", "key"]}),
        )
    }

    #[test]
    fn minimal_request_has_only_model_and_messages() {
        let body = request_body("m", &ChatRequest::new(vec![Message::user("hi")]));
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn full_request_serialises_tools_schema_and_options() {
        let schema = json!({"type": "object", "required": ["a"]});
        let req = ChatRequest::new(vec![Message::system("be brief"), Message::user("q")])
            .with_tools(vec![record_tool()])
            .with_json_schema(schema.clone())
            .with_max_tokens(64)
            .with_temperature(0.0);
        let body = request_body("qwen", &req);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "record",
                "description": "Fetch one record",
                "parameters": record_tool().parameters,
            }}])
        );
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["temperature"], 0.0);
    }

    #[test]
    fn tool_history_serialises_calls_as_argument_strings() {
        let call = ToolCall::new("c1", "record", json!({"table": "t", "key": "k"}));
        let broken = ToolCall {
            raw_arguments: Some("{not json".into()),
            ..ToolCall::new("c2", "record", Value::Null)
        };
        let req = ChatRequest::new(vec![
            Message::user("q"),
            Message::assistant_tool_calls("", vec![call, broken]),
            Message::tool_result("c1", "{\"value\": 3}"),
        ]);
        let body = request_body("m", &req);
        let assistant = &body["messages"][1];
        assert_eq!(assistant["role"], "assistant");
        assert_eq!(assistant["content"], Value::Null);
        let args = assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .expect("arguments travel as a string");
        assert_eq!(
            serde_json::from_str::<Value>(args).unwrap(),
            json!({"table": "t", "key": "k"})
        );
        assert_eq!(assistant["tool_calls"][0]["type"], "function");
        assert_eq!(
            assistant["tool_calls"][1]["function"]["arguments"],
            "{not json"
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "content": "{\"value\": 3}", "tool_call_id": "c1"})
        );
    }

    #[test]
    fn parses_text_answer_with_usage() {
        let r = parse_response(
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("Hello"));
        assert!(r.tool_calls.is_empty());
        assert_eq!(
            r.usage,
            Usage {
                prompt_tokens: 12,
                completion_tokens: 3
            }
        );
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn parses_tool_calls_with_string_object_and_broken_arguments() {
        let r = parse_response(
            r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
                {"id":"a","type":"function","function":{"name":"record","arguments":"{\"table\":\"t\",\"key\":\"k\"}"}},
                {"type":"function","function":{"name":"record","arguments":{"table":"u"}}},
                {"id":"c","type":"function","function":{"name":"record","arguments":"{\"table\": "}},
                {"id":"d","type":"function","function":{"name":"now","arguments":""}}
            ]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(r.content, None);
        assert_eq!(r.tool_calls.len(), 4);
        assert_eq!(
            r.tool_calls[0],
            ToolCall::new("a", "record", json!({"table": "t", "key": "k"}))
        );
        assert_eq!(r.tool_calls[1].id, "call_1", "missing ids are generated");
        assert_eq!(r.tool_calls[1].arguments, json!({"table": "u"}));
        assert!(!r.tool_calls[2].arguments_parsed());
        assert_eq!(r.tool_calls[2].arguments, Value::Null);
        assert_eq!(
            r.tool_calls[2].raw_arguments.as_deref(),
            Some("{\"table\": ")
        );
        assert_eq!(r.tool_calls[2].arguments_text(), "{\"table\": ");
        assert_eq!(r.tool_calls[3].arguments, json!({}));
        assert_eq!(r.usage, Usage::default(), "missing usage counts as zero");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn empty_content_and_content_parts() {
        let r = parse_response(r#"{"choices":[{"message":{"content":"  "}}]}"#).unwrap();
        assert_eq!(r.content, None);
        assert_eq!(r.finish_reason, None);
        let r = parse_response(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("ab"));
    }

    #[test]
    fn malformed_bodies_are_errors_with_excerpts() {
        let e = parse_response("<html>gateway</html>").unwrap_err();
        assert!(e.contains("not JSON") && e.contains("<html>gateway"), "{e}");
        let e = parse_response(r#"{"choices":[]}"#).unwrap_err();
        assert!(e.contains("no choices"), "{e}");
        let e = parse_response(r#"{"choices":[{"text":"legacy"}]}"#).unwrap_err();
        assert!(e.contains("no message"), "{e}");
        let e = parse_response(r#"{"error":{"message":"context too long"}}"#).unwrap_err();
        assert!(e.contains("context too long"), "{e}");
        let e = parse_response(r#"{"choices":[{"message":{"tool_calls":[{"function":{}}]}}]}"#)
            .unwrap_err();
        assert!(e.contains("no function name"), "{e}");
    }

    /// A one-shot HTTP stub: answers the first request with `response` after `delay`,
    /// and hands the request it got back through the join handle.
    fn stub(response: String, delay: Duration) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Read headers, then the body by Content-Length.
            loop {
                let n = conn.read(&mut buf).unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            std::thread::sleep(delay);
            let _ = conn.write_all(response.as_bytes());
            String::from_utf8_lossy(&request).to_string()
        });
        (url, handle)
    }

    fn http(status: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn posts_to_chat_completions_with_key_and_measures_time() {
        let (url, server) = stub(
            http("200 OK", r#"{"choices":[{"message":{"content":"pong"}}]}"#),
            Duration::from_millis(20),
        );
        let chat = OpenAiChat::new(&format!("{url}/v1/"), "m", Duration::from_secs(5))
            .unwrap()
            .with_api_key("sekrit");
        assert!(!format!("{chat:?}").contains("sekrit"));
        let r = chat
            .chat(&ChatRequest::new(vec![Message::user("ping")]))
            .unwrap();
        assert_eq!(r.content.as_deref(), Some("pong"));
        assert!(r.elapsed >= Duration::from_millis(20));
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /v1/chat/completions "),
            "{request}"
        );
        assert!(request
            .to_ascii_lowercase()
            .contains("authorization: bearer sekrit"));
        assert!(request.contains(r#""content":"ping""#), "{request}");
        assert_eq!(chat.name(), "openai:m");
    }

    #[test]
    fn api_key_from_an_unset_variable_is_none() {
        let chat = OpenAiChat::new("http://127.0.0.1:1", "m", Duration::from_secs(1))
            .unwrap()
            .with_api_key_env("DOSSIER_LLM_SURELY_UNSET_VARIABLE");
        assert!(chat.api_key.is_none());
        assert_eq!(chat.url(), "http://127.0.0.1:1/v1/chat/completions");
    }

    #[test]
    fn http_errors_carry_status_and_body() {
        let (url, server) = stub(
            http(
                "503 Service Unavailable",
                r#"{"error":{"message":"Loading model"}}"#,
            ),
            Duration::ZERO,
        );
        let chat = OpenAiChat::new(&url, "m", Duration::from_secs(5)).unwrap();
        let e = chat
            .chat(&ChatRequest::new(vec![Message::user("x")]))
            .unwrap_err();
        server.join().unwrap();
        match e {
            LlmError::Http { status, body, .. } => {
                assert_eq!(status, 503);
                assert!(body.contains("Loading model"), "{body}");
            }
            other => panic!("expected Http, got {other:?}"),
        }
    }

    #[test]
    fn slow_servers_time_out() {
        let (url, server) = stub(http("200 OK", "{}"), Duration::from_millis(1500));
        let chat = OpenAiChat::new(&url, "m", Duration::from_millis(300)).unwrap();
        let e = chat
            .chat(&ChatRequest::new(vec![Message::user("x")]))
            .unwrap_err();
        assert!(
            matches!(e, LlmError::Timeout { .. }),
            "expected Timeout, got {e:?}"
        );
        server.join().unwrap();
    }

    #[test]
    fn unreachable_servers_are_transport_errors() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let chat = OpenAiChat::new(
            &format!("http://127.0.0.1:{port}"),
            "m",
            Duration::from_secs(5),
        )
        .unwrap();
        let e = chat
            .chat(&ChatRequest::new(vec![Message::user("x")]))
            .unwrap_err();
        assert!(
            matches!(e, LlmError::Transport { .. }),
            "expected Transport, got {e:?}"
        );
    }

    #[test]
    fn success_with_garbage_is_malformed() {
        let (url, server) = stub(http("200 OK", "not json at all"), Duration::ZERO);
        let chat = OpenAiChat::new(&url, "m", Duration::from_secs(5)).unwrap();
        let e = chat
            .chat(&ChatRequest::new(vec![Message::user("x")]))
            .unwrap_err();
        server.join().unwrap();
        match e {
            LlmError::Malformed { message, .. } => assert!(message.contains("not json at all")),
            other => panic!("expected Malformed, got {other:?}"),
        }
    }
    fn answer(content: &str) -> ChatResponse {
        ChatResponse::text(content)
    }

    #[test]
    fn recovers_tool_calls_written_as_json_text() {
        let tools = [record_tool()];
        for text in [
            r#"{"name": "record", "arguments": {"table": "t", "key": "k"}}"#,
            "```json\n{\n  \"name\": \"record\",\n  \"arguments\": {\"table\": \"t\", \"key\": \"k\"}\n}\n```",
            "<tool_call>\n{\"name\": \"record\", \"arguments\": \"{\\\"table\\\": \\\"t\\\", \\\"key\\\": \\\"k\\\"}\"}\n</tool_call>",
            r#"[{"type": "function", "function": {"name": "record", "arguments": {"table": "t", "key": "k"}}}]"#,
        ] {
            let mut r = answer(text);
            assert!(recover_tool_calls(&mut r, &tools), "{text}");
            assert_eq!(r.content, None);
            assert_eq!(
                r.tool_calls,
                vec![ToolCall::new("call_0", "record", json!({"table": "t", "key": "k"}))],
                "{text}"
            );
        }
        let mut r = answer(
            "{\"name\": \"record\", \"arguments\": {\"key\": \"a\"}}\n{\"name\": \"record\", \"arguments\": {\"key\": \"b\"}}",
        );
        assert!(recover_tool_calls(&mut r, &tools));
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[1].id, "call_1");
        assert_eq!(r.tool_calls[1].arguments, json!({"key": "b"}));
    }

    #[test]
    fn leaves_other_text_alone() {
        let tools = [record_tool()];
        for text in [
            "The amount is 12.",
            r#"Sure: {"name": "record", "arguments": {"key": "k"}}"#,
            r#"{"name": "delete_everything", "arguments": {}}"#,
            r#"{"name": "record", "arguments": "not json"}"#,
            r#"{"name": "record", "arguments": [1, 2]}"#,
            r#"{"title": "a JSON answer", "year": 1969}"#,
            r#"{"name": "record", "arguments": {"key": "k"}"#,
            "```json\n```",
        ] {
            let mut r = answer(text);
            assert!(!recover_tool_calls(&mut r, &tools), "{text}");
            assert_eq!(r.content.as_deref(), Some(text));
            assert!(r.tool_calls.is_empty());
        }
        // Not without tools, and never over real tool calls.
        let text = r#"{"name": "record", "arguments": {}}"#;
        assert!(!recover_tool_calls(&mut answer(text), &[]));
        let mut r = answer(text);
        r.tool_calls = vec![ToolCall::new("x", "record", json!({}))];
        assert!(!recover_tool_calls(&mut r, &tools));
        assert_eq!(r.tool_calls[0].id, "x");
    }

    #[test]
    fn recovery_applies_in_chat_unless_disabled() {
        let body = r#"{"choices":[{"message":{"content":"{\"name\": \"record\", \"arguments\": {\"key\": \"k\"}}"},"finish_reason":"stop"}]}"#;
        let req = ChatRequest::new(vec![Message::user("x")]).with_tools(vec![record_tool()]);
        for recover in [true, false] {
            let (url, server) = stub(http("200 OK", body), Duration::ZERO);
            let chat = OpenAiChat::new(&url, "m", Duration::from_secs(5))
                .unwrap()
                .with_tool_call_recovery(recover);
            let r = chat.chat(&req).unwrap();
            server.join().unwrap();
            assert_eq!(
                r.tool_calls.len(),
                usize::from(recover),
                "recover={recover}"
            );
            assert_eq!(r.content.is_none(), recover);
        }
    }
}
