//! OpenAI-protocol upstreams (OpenAI, Azure, DeepSeek, Qwen compatible-mode,
//! GLM, Kimi, Groq, vLLM, Ollama…): their error rules. Bodies and streams are
//! handled by the shared `body`, `convert` and `stream` modules.

pub mod errors;
