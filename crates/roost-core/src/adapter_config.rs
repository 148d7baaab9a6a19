//! `adapterConfig` seen from outside: secret `env` values, and the names of what a change
//! touched.
//!
//! An `env` value is a plain string, `{"type":"plain","value":"..."}` or
//! `{"type":"secret","value":"..."}`. A secret is kept in the replicated state (the worker needs
//! it to start the agent) but no API shows it: [`redact`] puts [`redacted_secret`] in its place.
//! A change that sends that marker back (or `{"type":"secret"}` without a value) keeps the value
//! stored for the key ([`resolve`]), so an operator can edit a configuration read from the API
//! without wiping its secrets. Resolving is part of apply, so every replica stores the same.

use serde_json::{json, Map, Value};

use crate::error::DomainError;

const ENV: &str = "env";
const TYPE: &str = "type";
const VALUE: &str = "value";
const REDACTED: &str = "redacted";
const PLAIN: &str = "plain";
const SECRET: &str = "secret";

const SHAPES: &str =
    "must be a string, {\"type\":\"plain\",\"value\":\"...\"} or {\"type\":\"secret\",\"value\":\"...\"}";

/// What every API shows in place of a secret `env` value.
pub fn redacted_secret() -> Value {
    json!({ TYPE: SECRET, REDACTED: true })
}

/// One `env` entry as sent.
enum EnvValue<'a> {
    Plain,
    Secret(&'a str),
    /// A secret named without its value: keep the stored one.
    KeepSecret,
}

fn field(key: &str) -> String {
    format!("adapterConfig.env.{key}")
}

/// Reads one entry; an error names the key, never the value.
fn parse_entry<'a>(key: &str, value: &'a Value) -> Result<EnvValue<'a>, DomainError> {
    let object = match value {
        Value::String(_) => return Ok(EnvValue::Plain),
        Value::Object(object) => object,
        _ => return Err(DomainError::invalid(field(key), SHAPES)),
    };
    if let Some(unknown) = object
        .keys()
        .find(|k| ![TYPE, VALUE, REDACTED].contains(&k.as_str()))
    {
        return Err(DomainError::invalid(
            field(key),
            format!("has an unknown key {unknown:?}; it {SHAPES}"),
        ));
    }
    let text = match object.get(VALUE) {
        None => None,
        Some(Value::String(text)) => Some(text.as_str()),
        Some(_) => return Err(DomainError::invalid(field(key), "value must be a string")),
    };
    match (object.get(TYPE).and_then(Value::as_str), text) {
        (Some(PLAIN), Some(_)) if !object.contains_key(REDACTED) => Ok(EnvValue::Plain),
        (Some(SECRET), Some(text)) => Ok(EnvValue::Secret(text)),
        (Some(SECRET), None) if object.get(REDACTED).is_none_or(|r| r == &json!(true)) => {
            Ok(EnvValue::KeepSecret)
        }
        _ => Err(DomainError::invalid(field(key), SHAPES)),
    }
}

/// The text of a stored entry, whatever its shape.
fn stored_text(value: &Value) -> Option<&str> {
    match value {
        Value::String(text) => Some(text),
        Value::Object(object) => object.get(VALUE).and_then(Value::as_str),
        _ => None,
    }
}

fn secret(text: &str) -> Value {
    json!({ TYPE: SECRET, VALUE: text })
}

/// Checks `config` and returns what to store: secrets in one shape, and each secret named
/// without a value replaced by the value `stored` holds for its key (made secret if it was
/// plain). A key with nothing stored to keep is refused.
pub fn resolve(config: &Value, stored: Option<&Value>) -> Result<Value, DomainError> {
    let Value::Object(object) = config else {
        return Err(DomainError::invalid(
            "adapterConfig",
            "must be a JSON object",
        ));
    };
    let Some(env) = object.get(ENV) else {
        return Ok(config.clone());
    };
    let Value::Object(env) = env else {
        return Err(DomainError::invalid(
            "adapterConfig.env",
            "must be an object of environment variables",
        ));
    };
    let stored_env = stored.and_then(|c| c.get(ENV)).and_then(Value::as_object);
    let mut resolved = Map::new();
    for (key, value) in env {
        let entry = match parse_entry(key, value)? {
            EnvValue::Plain => value.clone(),
            EnvValue::Secret(text) => secret(text),
            EnvValue::KeepSecret => {
                let kept = stored_env
                    .and_then(|e| e.get(key))
                    .and_then(stored_text)
                    .ok_or_else(|| {
                        DomainError::invalid(
                            field(key),
                            "is a secret without a value and the agent has none stored for it; \
                             send its value",
                        )
                    })?;
                secret(kept)
            }
        };
        resolved.insert(key.clone(), entry);
    }
    let mut config = object.clone();
    config.insert(ENV.into(), Value::Object(resolved));
    Ok(Value::Object(config))
}

/// `config` as an API shows it: every secret `env` value replaced by [`redacted_secret`].
pub fn redact(config: &Value) -> Value {
    let mut config = config.clone();
    if let Some(env) = config.get_mut(ENV).and_then(Value::as_object_mut) {
        for value in env.values_mut() {
            if value.get(TYPE).and_then(Value::as_str) == Some(SECRET) {
                *value = redacted_secret();
            }
        }
    }
    config
}

/// The dotted paths under `prefix` whose values differ between `old` and `new`, sorted: what
/// the activity log records of a configuration change (names only, values never). An `env`
/// variable is named whole, whatever the shape of its value.
pub fn changed_paths(prefix: &str, old: &Value, new: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    collect_changes(prefix, old, new, &format!("{prefix}.{ENV}"), &mut paths);
    paths.sort();
    paths
}

fn collect_changes(path: &str, old: &Value, new: &Value, leaf_parent: &str, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in new {
                let child = format!("{path}.{key}");
                match old.get(key) {
                    Some(before) if path == leaf_parent => {
                        if before != value {
                            out.push(child);
                        }
                    }
                    Some(before) => collect_changes(&child, before, value, leaf_parent, out),
                    None => out.push(child),
                }
            }
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                out.push(format!("{path}.{key}"));
            }
        }
        _ if old != new => out.push(path.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_of_env_value_is_accepted_and_secrets_are_stored_in_one_shape() {
        let config = json!({ "command": "run", "env": {
            "A": "plain text",
            "B": { "type": "plain", "value": "also plain" },
            "C": { "type": "secret", "value": "s3cret", "redacted": true },
        }});
        let stored = resolve(&config, None).expect("valid");
        assert_eq!(stored["env"]["A"], "plain text");
        assert_eq!(
            stored["env"]["B"],
            json!({ "type": "plain", "value": "also plain" })
        );
        assert_eq!(
            stored["env"]["C"],
            json!({ "type": "secret", "value": "s3cret" })
        );
        assert_eq!(stored["command"], "run");
    }

    #[test]
    fn a_redacted_secret_sent_back_keeps_the_stored_value() {
        let stored = json!({ "env": {
            "KEY": { "type": "secret", "value": "sk-live" },
            "WAS_PLAIN": "visible",
        }});
        let shown = redact(&stored);
        assert_eq!(shown["env"]["KEY"], redacted_secret());
        let mut patch = shown.clone();
        patch["env"]["WAS_PLAIN"] = json!({ "type": "secret" });
        patch["command"] = json!("new");
        let next = resolve(&patch, Some(&stored)).expect("kept");
        assert_eq!(
            next["env"]["KEY"],
            json!({ "type": "secret", "value": "sk-live" })
        );
        assert_eq!(
            next["env"]["WAS_PLAIN"],
            json!({ "type": "secret", "value": "visible" }),
            "a value named secret without a new value is kept and becomes secret"
        );
    }

    #[test]
    fn a_redacted_secret_without_a_stored_value_is_refused_without_echoing_values() {
        let patch = json!({ "env": { "NEW": { "type": "secret", "redacted": true } } });
        let refused = resolve(&patch, Some(&json!({ "env": {} }))).expect_err("nothing to keep");
        assert!(
            matches!(&refused, DomainError::Invalid { field, .. } if field == "adapterConfig.env.NEW")
        );
        for bad in [
            json!({ "env": { "X": 42 } }),
            json!({ "env": { "X": { "type": "secret", "value": 1 } } }),
            json!({ "env": { "X": { "type": "plain" } } }),
            json!({ "env": { "X": { "type": "other", "value": "hunter2" } } }),
            json!({ "env": { "X": { "type": "secret", "value": "hunter2", "extra": "y" } } }),
            json!({ "env": ["hunter2"] }),
            json!("hunter2"),
        ] {
            let error = resolve(&bad, None).expect_err("invalid");
            assert!(!error.to_string().contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn changed_paths_name_every_changed_leaf_and_nothing_else() {
        let old = json!({ "command": "a", "env": { "K": "1", "GONE": "x",
            "S": { "type": "secret", "value": "1" } }, "args": [1], "deep": { "a": { "b": 1 } } });
        let new = json!({ "command": "a", "env": { "K": "2", "NEW": "y",
            "S": { "type": "secret", "value": "2" } }, "args": [1, 2], "deep": { "a": { "b": 2 } } });
        assert_eq!(
            changed_paths("adapterConfig", &old, &new),
            [
                "adapterConfig.args",
                "adapterConfig.deep.a.b",
                "adapterConfig.env.GONE",
                "adapterConfig.env.K",
                "adapterConfig.env.NEW",
                "adapterConfig.env.S",
            ]
        );
        assert!(changed_paths("adapterConfig", &old, &old).is_empty());
    }
}
