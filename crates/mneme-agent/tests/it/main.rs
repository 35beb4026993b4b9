//! mneme-agent's integration tests: the shared LLM client against a scripted
//! OpenAI-compatible server on loopback.

mod config;
mod llm;
mod parsers;
mod reflect;
mod truth;
