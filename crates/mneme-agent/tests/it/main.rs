//! mneme-agent's integration tests: the shared LLM client and the reflection heartbeat
//! against scripted OpenAI-compatible servers on loopback.

mod config;
mod inner;
mod llm;
mod modules;
mod parsers;
mod reflect;
mod reflect_model;
mod relay;
mod truth;
