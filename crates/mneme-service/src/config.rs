//! `ServiceConfig`: the engine's settings, from built-in defaults overlaid by a TOML file.
//!
//! ```toml
//! [decay]
//! prune_threshold = 0.05
//! [decay.half_life_days]      # all five keys when the table is given
//! episodic = 3.0
//! semantic = 180.0
//! competence = 365.0
//! working = 1.0
//! plan_graph = 14.0
//!
//! [retrieval]
//! relevance = 0.75
//! salience = 0.15
//! recency = 0.10
//! recency_half_life_days = 30.0
//! candidate_pool = 200
//!
//! [access]
//! default_max_sensitivity = "medium"
//!
//! [limits]
//! max_payload_bytes = 262144
//! ```

use mneme_core::{DecayConfig, Limits, RankWeights, Sensitivity};
use serde::{Deserialize, Serialize};

use crate::error::{ServiceError, ServiceResult};

/// Read-side defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessConfig {
    /// Sensitivity ceiling of a retrieval that does not name one. Default `medium`:
    /// `high` and `critical` records are only returned when asked for explicitly.
    pub default_max_sensitivity: Sensitivity,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig { default_max_sensitivity: Sensitivity::Medium }
    }
}

/// Everything the memory engine is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    pub decay: DecayConfig,
    pub retrieval: RankWeights,
    pub access: AccessConfig,
    pub limits: Limits,
}

impl ServiceConfig {
    /// Parses and validates TOML; `source` names the file in errors.
    pub fn from_toml(text: &str, source: &str) -> ServiceResult<Self> {
        let config: ServiceConfig =
            toml::from_str(text).map_err(|e| ServiceError::Config(format!("{source}: {}", e.to_string().trim_end())))?;
        config.validate().map_err(|e| match e {
            ServiceError::Config(msg) => ServiceError::Config(format!("{source}: {msg}")),
            other => other,
        })?;
        Ok(config)
    }

    pub fn validate(&self) -> ServiceResult<()> {
        self.decay.validate().map_err(|e| ServiceError::Config(e.to_string()))?;
        self.retrieval.validate().map_err(|e| ServiceError::Config(e.to_string()))?;
        if self.limits.max_limit == 0 {
            return Err(ServiceError::Config("invalid limits.max_limit: 0 (must be at least 1)".into()));
        }
        Ok(())
    }
}
