//! The last gate before a model: every prompt a reader's ask (or an administrative
//! pass) sends is masked with the reader's [`Masker`], whatever built it — hits and
//! records are masked by the engine already, but a question, a sub-question or a model's
//! own earlier tool call may carry a value too.

use std::sync::Arc;

use dossier_core::pii::Masker;
use dossier_llm::{ChatModel, ChatRequest, ChatResponse, LlmError};

/// `inner`, seeing only masked text.
pub struct MaskingModel<'a> {
    pub inner: &'a dyn ChatModel,
    pub masker: Arc<Masker>,
}

impl ChatModel for MaskingModel<'_> {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut req = req.clone();
        for m in &mut req.messages {
            if let std::borrow::Cow::Owned(masked) = self.masker.mask(&m.content) {
                m.content = masked;
            }
            for call in &mut m.tool_calls {
                self.masker.mask_json(&mut call.arguments);
                if let Some(raw) = &mut call.raw_arguments {
                    *raw = self.masker.mask(raw).into_owned();
                }
            }
        }
        self.inner.chat(&req)
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}
