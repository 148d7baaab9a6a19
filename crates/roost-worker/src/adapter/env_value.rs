//! `adapterConfig.env` as the cluster stores it: each value a plain string,
//! `{"type":"plain","value":"..."}` or `{"type":"secret","value":"..."}`
//! (`roost_core::adapter_config`). The APIs never show a secret's value, but the worker gets the
//! stored configuration and hands the agent the real value either way.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum EnvValue {
    Text(String),
    Tagged(Tagged),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tagged {
    #[serde(rename = "type")]
    kind: Kind,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Plain,
    Secret,
}

/// The environment variables, each with its value whatever its shape. An error names the
/// variable, never a value.
pub(crate) fn env_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
    raw.into_iter()
        .map(|(key, value)| match EnvValue::deserialize(value) {
            Ok(EnvValue::Text(text)) => Ok((key, text)),
            Ok(EnvValue::Tagged(Tagged {
                kind: Kind::Plain | Kind::Secret,
                value,
            })) => Ok((key, value)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "env.{key} must be a string or {{\"type\":\"plain\"|\"secret\",\"value\":\"...\"}}"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize)]
    struct Config {
        #[serde(deserialize_with = "env_map")]
        env: BTreeMap<String, String>,
    }

    #[test]
    fn secret_and_plain_env_values_reach_the_agent_as_their_text() {
        let config: Config = serde_json::from_value(json!({ "env": {
            "A": "one",
            "B": { "type": "plain", "value": "two" },
            "C": { "type": "secret", "value": "three" },
        }}))
        .expect("every shape");
        let values: Vec<&str> = config.env.values().map(String::as_str).collect();
        assert_eq!(values, ["one", "two", "three"]);
    }

    #[test]
    fn a_malformed_env_value_names_the_variable_but_not_the_value() {
        for bad in [
            json!({ "env": { "K": { "type": "secret", "redacted": true } } }),
            json!({ "env": { "K": { "type": "other", "value": "hunter2" } } }),
            json!({ "env": { "K": 7 } }),
        ] {
            let error = serde_json::from_value::<Config>(bad)
                .err()
                .expect("refused")
                .to_string();
            assert!(error.contains("env.K"), "{error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }
}
