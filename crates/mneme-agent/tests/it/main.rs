//! mneme-agent's integration tests: the shared LLM client and the reflection heartbeat
//! against scripted OpenAI-compatible servers on loopback.

mod inner;
mod llm;
mod modules;
mod reflect;
mod reflect_model;
mod relay;
mod truth;
