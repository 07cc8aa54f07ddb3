//! Dossier's seam to chat models.
//!
//! Everything in Dossier that asks a language model something goes through
//! [`ChatModel`]: one blocking call that takes a [`ChatRequest`] (messages, optional
//! tools, optional JSON schema for the answer) and returns a [`ChatResponse`] (text
//! and/or tool calls, token usage, wall time). Implementations:
//!
//! - [`OpenAiChat`]: any OpenAI-compatible `POST /v1/chat/completions` endpoint
//!   (OpenAI itself, llama.cpp's `llama-server`, vLLM, Ollama, …), with tools sent
//!   as OpenAI `tools` and a JSON schema as `response_format`;
//! - [`ScriptedChat`]: a test double that replays queued responses and records the
//!   requests it got, for unit tests of code that sits on this seam;
//! - [`LocalServer`] is not a model but starts one: the `llama-server` binary and a
//!   Qwen2.5-Coder-Instruct GGUF that `scripts/setup-llm` installs into `.tools/` (the
//!   0.5B always, the 1.5B with `--with-1.5b`; [`LocalModel`] picks one), on a free
//!   localhost port, ready for an [`OpenAiChat`] ([`LocalServer::chat_model`]).
//!
//! [`LlmSpec::parse`] reads the `--llm` values that name a model: `none`, `local` (the
//! 1.5B when installed, else the 0.5B), `local:0.5b`, `local:1.5b`, or a URL.
//!
//! Environment: `DOSSIER_LLAMA_SERVER` and `DOSSIER_LLM_GGUF` point [`LocalServer`] at
//! another binary or model (the model for [`LocalServer::start`] and `--llm local`),
//! `DOSSIER_LLM_THREADS` sets its CPU threads (default 2).
//!
//! ```no_run
//! use std::time::Duration;
//! use dossier_llm::{ChatModel, ChatRequest, LocalServer, Message};
//!
//! let server = LocalServer::start()?;
//! let model = server.chat_model(Duration::from_secs(120))?;
//! let answer = model.chat(&ChatRequest::new(vec![Message::user("Say hi.")]))?;
//! println!("{}", answer.content.unwrap_or_default());
//! # Ok::<(), dossier_llm::LlmError>(())
//! ```
//!
//! **Architecture invariant:** this crate knows nothing about documents, indexes or
//! prompts; it moves messages to a model and answers back, and reports failures
//! precisely enough for a caller to decide whether to retry.

mod local;
mod openai;
mod scripted;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use local::{
    LlmSpec, LocalModel, LocalServer, LocalServerConfig, DEFAULT_GGUF_NAME, GGUF_1_5B_NAME,
    SETUP_HINT, SETUP_HINT_1_5B,
};
pub use openai::OpenAiChat;
pub use scripted::ScriptedChat;

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person (or program) asking.
    User,
    /// The model; may carry [`ToolCall`]s instead of, or besides, text.
    Assistant,
    /// The result of one tool call, answering the call named by `tool_call_id`.
    Tool,
}

impl Role {
    /// The wire name: `system`, `user`, `assistant` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text; may be empty for an assistant message that only calls tools.
    pub content: String,
    /// Tool calls made by an assistant message (empty for other roles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the [`ToolCall::id`] it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    /// An assistant message that calls tools (what a [`ChatResponse`] with tool calls
    /// becomes in the history sent back to the model).
    pub fn assistant_tool_calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Function name, as the model will write it in [`ToolCall::name`].
    pub name: String,
    /// What the function does and when to use it; the model reads this.
    pub description: String,
    /// JSON schema of the arguments object, e.g.
    /// `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`.
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// A call of a [`ToolSpec`] made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Identifier to answer with [`Message::tool_result`]; generated (`call_N`) when
    /// the server sent none.
    pub id: String,
    /// The function called.
    pub name: String,
    /// The arguments, parsed. Servers send them as a JSON string (OpenAI) or as an
    /// object; either way they land here. `Value::Null` when the model wrote text that
    /// is not JSON; the text is then in [`raw_arguments`](Self::raw_arguments).
    pub arguments: Value,
    /// The arguments exactly as the model wrote them, kept only when they were not
    /// valid JSON (so `arguments` is `Null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

impl ToolCall {
    /// A call with already parsed arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            raw_arguments: None,
        }
    }

    /// Whether the arguments parsed as JSON (whatever their shape).
    pub fn arguments_parsed(&self) -> bool {
        self.raw_arguments.is_none()
    }

    /// The arguments as the JSON text sent back to a server: the raw text when it did
    /// not parse, else the serialised value.
    pub fn arguments_text(&self) -> String {
        match &self.raw_arguments {
            Some(raw) => raw.clone(),
            None => self.arguments.to_string(),
        }
    }
}

/// One chat completion request. Build with [`ChatRequest::new`] and the `with_*`
/// methods; unset options are left to the server's defaults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// Functions the model may call; none when empty.
    pub tools: Vec<ToolSpec>,
    /// When set, the answer must be JSON matching this schema (sent as
    /// `response_format: {"type": "json_schema", …}`; llama-server enforces it with a
    /// grammar, hosted APIs with their structured-output mode).
    pub json_schema: Option<Value>,
    /// Upper bound on generated tokens.
    pub max_tokens: Option<u32>,
    /// Sampling temperature; `0.0` for the most deterministic answers.
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A request with these messages and no options.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Offers these tools.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Requires a JSON answer matching `schema`.
    pub fn with_json_schema(mut self, schema: Value) -> Self {
        self.json_schema = Some(schema);
        self
    }

    /// Caps the answer at `max_tokens` tokens.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
}

/// Token counts reported by the server; zero when it reported none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt (messages, tools and template).
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
}

/// The model's answer to a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    /// The text answer; `None` when the server sent no text, or only whitespace
    /// (typically a pure tool call). With a JSON schema, this is the JSON text.
    pub content: Option<String>,
    /// Tool calls, in the order the model made them. [`OpenAiChat`] also recovers
    /// calls that a small model wrote as plain JSON text (see
    /// [`OpenAiChat::with_tool_call_recovery`]).
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    pub usage: Usage,
    /// Why generation stopped, as the server said it (`stop`, `length`, `tool_calls`,
    /// …). `length` means the answer was cut by `max_tokens` or the context size.
    pub finish_reason: Option<String>,
    /// Wall time of the call, measured by the client.
    pub elapsed: Duration,
}

impl ChatResponse {
    /// A text answer (handy for [`ScriptedChat`]).
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: Some(content.into()),
            finish_reason: Some("stop".into()),
            ..Self::default()
        }
    }

    /// An answer made of tool calls (handy for [`ScriptedChat`]).
    pub fn calls(tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            finish_reason: Some("tool_calls".into()),
            ..Self::default()
        }
    }

    /// The assistant message to append to the history before answering the tool calls.
    pub fn to_message(&self) -> Message {
        Message::assistant_tool_calls(
            self.content.clone().unwrap_or_default(),
            self.tool_calls.clone(),
        )
    }
}

/// Why a chat call failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// No complete answer within the client's timeout. Worth retrying with a longer
    /// timeout or a smaller request.
    #[error("chat request to {url} timed out after {after:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// The server answered with a non-success HTTP status.
    #[error("chat request to {url} failed with HTTP {status}: {body}")]
    Http {
        /// The endpoint.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (the server's error message, usually).
        body: String,
    },
    /// The server could not be reached, or the connection broke (not a timeout).
    #[error("chat request to {url} failed: {message}")]
    Transport {
        /// The endpoint.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The server answered 2xx with something that is not a chat completion.
    #[error("malformed chat response from {url}: {message}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong, with an excerpt of the body.
        message: String,
    },
    /// The local model is not installed, or a client could not be built. The message
    /// says what to do (for the local model: run `scripts/setup-llm`).
    #[error("{0}")]
    Setup(String),
    /// `llama-server` did not start or did not become healthy; the message carries the
    /// tail of its log.
    #[error("{0}")]
    Startup(String),
    /// A [`ScriptedChat`] was called more often than it was scripted for.
    #[error("scripted chat model: {0}")]
    Script(String),
}

/// A chat model: one blocking request, one answer.
///
/// Implementations must be usable from several threads; each call is independent
/// (no hidden conversation state: the whole history is in the request).
pub trait ChatModel: Send + Sync {
    /// Sends the request and returns the model's answer.
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// A short name for logs and provenance, e.g. `openai:qwen2.5-coder-0.5b-instruct`.
    fn name(&self) -> String;
}

impl<M: ChatModel + ?Sized> ChatModel for Box<M> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(req)
    }

    fn name(&self) -> String {
        (**self).name()
    }
}

impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(req)
    }

    fn name(&self) -> String {
        (**self).name()
    }
}

/// At most `max` characters of `s` (on a char boundary), with `…` when cut.
pub(crate) fn excerpt(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}
