//! A scripted chat model for unit tests of code that talks to a [`ChatModel`].

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError};

/// A [`ChatModel`] that replays queued answers in order and records every request.
///
/// ```
/// use dossier_llm::{ChatModel, ChatRequest, ChatResponse, Message, ScriptedChat};
///
/// let model = ScriptedChat::new([ChatResponse::text("42")]);
/// let answer = model.chat(&ChatRequest::new(vec![Message::user("6 x 7?")])).unwrap();
/// assert_eq!(answer.content.as_deref(), Some("42"));
/// assert_eq!(model.requests()[0].messages[0].content, "6 x 7?");
/// assert!(model.chat(&ChatRequest::default()).is_err(), "the script ran out");
/// ```
#[derive(Debug, Default)]
pub struct ScriptedChat {
    name: String,
    script: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
    requests: Mutex<Vec<ChatRequest>>,
    /// Standing answers: a request whose messages contain the marker gets the answer,
    /// and the script is not consumed.
    standing: Vec<(String, ChatResponse)>,
}

/// Locks, ignoring poisoning: a panicking test thread must not hide what was recorded.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ScriptedChat {
    /// A model that answers with `responses`, one per call, then fails with
    /// [`LlmError::Script`].
    pub fn new(responses: impl IntoIterator<Item = ChatResponse>) -> Self {
        Self {
            name: "scripted".into(),
            script: Mutex::new(responses.into_iter().map(Ok).collect()),
            requests: Mutex::default(),
            standing: vec![],
        }
    }

    /// Answers every request whose messages contain `marker` with `response`, outside
    /// the script (for calls a test does not count, such as a reranker's judgements).
    pub fn answering(mut self, marker: impl Into<String>, response: ChatResponse) -> Self {
        self.standing.push((marker.into(), response));
        self
    }

    /// Renames it (what [`ChatModel::name`] returns; `scripted` by default).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Queues one more answer.
    pub fn push(&self, response: ChatResponse) {
        lock(&self.script).push_back(Ok(response));
    }

    /// Queues a failure, to test how callers handle errors.
    pub fn push_error(&self, error: LlmError) {
        lock(&self.script).push_back(Err(error));
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// How many queued answers are left.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

impl ChatModel for ScriptedChat {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let call = {
            let mut requests = lock(&self.requests);
            requests.push(req.clone());
            requests.len()
        };
        if let Some((_, r)) = self
            .standing
            .iter()
            .find(|(m, _)| req.messages.iter().any(|x| x.content.contains(m.as_str())))
        {
            return Ok(r.clone());
        }
        lock(&self.script).pop_front().unwrap_or_else(|| {
            Err(LlmError::Script(format!(
                "call {call} has no scripted response left"
            )))
        })
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Message, ToolCall};

    #[test]
    fn replays_in_order_records_requests_and_scripts_errors() {
        let model = ScriptedChat::new([ChatResponse::calls(vec![ToolCall::new(
            "c1",
            "record",
            json!({"key": "k"}),
        )])])
        .named("fake");
        model.push_error(LlmError::Http {
            url: "u".into(),
            status: 500,
            body: "boom".into(),
        });
        model.push(ChatResponse::text("done"));
        assert_eq!(model.remaining(), 3);

        let first = model
            .chat(&ChatRequest::new(vec![Message::user("a")]))
            .unwrap();
        assert_eq!(first.tool_calls[0].name, "record");
        assert!(matches!(
            model.chat(&ChatRequest::default()),
            Err(LlmError::Http { status: 500, .. })
        ));
        assert_eq!(
            model
                .chat(&ChatRequest::default())
                .unwrap()
                .content
                .as_deref(),
            Some("done")
        );
        let e = model.chat(&ChatRequest::default()).unwrap_err();
        assert!(e.to_string().contains("call 4"), "{e}");

        assert_eq!(model.requests().len(), 4);
        assert_eq!(model.requests()[0].messages, vec![Message::user("a")]);
        assert_eq!(model.name(), "fake");
    }

    #[test]
    fn usable_as_a_shared_trait_object() {
        let model: std::sync::Arc<dyn ChatModel> = std::sync::Arc::new(ScriptedChat::new([
            ChatResponse::text("x"),
            ChatResponse::text("y"),
        ]));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let m = model.clone();
                std::thread::spawn(move || m.chat(&ChatRequest::default()).unwrap().content)
            })
            .collect();
        let mut got: Vec<_> = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, ["x", "y"]);
    }
}
