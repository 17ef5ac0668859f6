//! Reading a plugin's own configuration keys: absent or `null` means the default, anything
//! else of the wrong kind is a code-7 error that names the key and what it accepts.

use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::{CniError, NetConf};
use serde_json::Value;
use std::time::Duration;

/// A string key naming one of `choices` (`"name"` → value).
pub fn choice<T: Copy>(conf: &NetConf, key: &str, choices: &[(&str, T)], default: T) -> Result<T, CniError> {
    let v = match conf.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(v) => v,
    };
    if let Some((_, t)) = v.as_str().and_then(|s| choices.iter().find(|(name, _)| *name == s)) {
        return Ok(*t);
    }
    let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
    let accepted = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "nothing".to_string(),
    };
    Err(CniError::new(INVALID_NETWORK_CONFIG, format!("{key} must be {accepted}, not {v}")))
}

/// A boolean key.
pub fn flag(conf: &NetConf, key: &str, default: bool) -> Result<bool, CniError> {
    match conf.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(CniError::new(INVALID_NETWORK_CONFIG, format!("{key} must be true or false, not {v}"))),
    }
}

/// A key naming a path: a non-empty string (`stateDir`, `confDir`).
pub fn path(conf: &NetConf, key: &str, default: &str) -> Result<std::path::PathBuf, CniError> {
    match conf.get(key) {
        None | Some(Value::Null) => Ok(default.into()),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.into()),
        Some(v) => Err(CniError::new(INVALID_NETWORK_CONFIG, format!("{key} must be a non-empty path, not {v}"))),
    }
}

/// A key giving a duration in seconds, `0 < t < max` (fractions allowed).
pub fn seconds(conf: &NetConf, key: &str, default: Duration, max: u64) -> Result<Duration, CniError> {
    let v = match conf.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(v) => v,
    };
    match v.as_f64() {
        Some(s) if s > 0.0 && s < max as f64 => Ok(Duration::from_secs_f64(s)),
        _ => Err(CniError::new(
            INVALID_NETWORK_CONFIG,
            format!("{key} must be a number of seconds (0 < t < {max}), not {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(json: &str) -> NetConf {
        NetConf::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn choices_and_flags() {
        let modes = [("a", 1), ("b", 2), ("c", 3)];
        assert_eq!(choice(&conf(r#"{"m":"b"}"#), "m", &modes, 0).unwrap(), 2);
        assert_eq!(choice(&conf(r#"{"m":null}"#), "m", &modes, 0).unwrap(), 0);
        assert_eq!(choice(&conf("{}"), "m", &modes, 0).unwrap(), 0);
        let e = choice(&conf(r#"{"m":5}"#), "m", &modes, 0).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (7, r#"m must be "a", "b" or "c", not 5"#));
        let e = choice(&conf(r#"{"m":"B"}"#), "m", &modes[..2], 0).unwrap_err();
        assert_eq!(e.msg, r#"m must be "a" or "b", not "B""#);
        assert!(flag(&conf(r#"{"f":false}"#), "f", true).is_ok_and(|b| !b));
        assert!(flag(&conf("{}"), "f", true).is_ok_and(|b| b));
        assert_eq!(flag(&conf(r#"{"f":"yes"}"#), "f", true).unwrap_err().msg, r#"f must be true or false, not "yes""#);
    }

    #[test]
    fn paths_and_seconds_take_null_as_the_default() {
        let d = Duration::from_secs(60);
        assert_eq!(path(&conf(r#"{"p":null}"#), "p", "/x").unwrap(), std::path::PathBuf::from("/x"));
        assert_eq!(path(&conf(r#"{"p":"/y"}"#), "p", "/x").unwrap(), std::path::PathBuf::from("/y"));
        assert_eq!(path(&conf(r#"{"p":""}"#), "p", "/x").unwrap_err().msg, r#"p must be a non-empty path, not """#);
        assert_eq!(seconds(&conf(r#"{"t":null}"#), "t", d, 86_400).unwrap(), d);
        assert_eq!(seconds(&conf(r#"{"t":0.5}"#), "t", d, 86_400).unwrap(), Duration::from_millis(500));
        let e = seconds(&conf(r#"{"t":-1}"#), "t", d, 86_400).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (7, "t must be a number of seconds (0 < t < 86400), not -1"));
    }
}
