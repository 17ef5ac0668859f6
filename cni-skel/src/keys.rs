//! Reading a plugin's own configuration keys: absent or `null` means the default, anything
//! else of the wrong kind is a code-7 error that names the key and what it accepts.

use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::{CniError, NetConf};
use serde_json::Value;

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
}
