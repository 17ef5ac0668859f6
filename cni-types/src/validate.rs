//! The validators libcni and the skel apply to container IDs, network names and interface names,
//! with Go's rules and messages (`pkg/utils/utils.go`: `ValidateContainerID`, `ValidateNetworkName`,
//! `ValidateInterfaceName`); and Kubernetes' DNS-1123 label, which names namespaces and
//! networks.

use crate::error::{CniError, INVALID_ENVIRONMENT_VARIABLES, INVALID_NETWORK_CONFIG, UNKNOWN_CONTAINER};

/// Linux `IFNAMSIZ` less the terminating NUL: the longest interface name, in bytes.
pub const MAX_IFNAME_LEN: usize = 15;

/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`, ASCII only: container IDs and network names.
fn is_id(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() => {
            bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        }
        _ => false,
    }
}

/// Validates `CNI_CONTAINERID`. Empty is code 3 `missing containerID` (only reachable from a
/// runtime: the skel treats an empty variable as missing).
pub fn container_id(id: &str) -> Result<(), CniError> {
    if id.is_empty() {
        return Err(CniError::new(UNKNOWN_CONTAINER, "missing containerID"));
    }
    if !is_id(id) {
        return Err(CniError::with_details(INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID", id));
    }
    Ok(())
}

/// Validates a network name as libcni does. (The skel reports an empty name as
/// `missing network name` without the colon; see [`network_name_skel`].)
pub fn network_name(name: &str) -> Result<(), CniError> {
    if name.is_empty() {
        return Err(CniError::new(INVALID_NETWORK_CONFIG, "missing network name:"));
    }
    network_name_chars(name)
}

/// The skel's network-name check: `missing network name` (no colon) when empty.
pub fn network_name_skel(name: &str) -> Result<(), CniError> {
    if name.is_empty() {
        return Err(CniError::new(INVALID_NETWORK_CONFIG, "missing network name"));
    }
    network_name_chars(name)
}

fn network_name_chars(name: &str) -> Result<(), CniError> {
    if !is_id(name) {
        return Err(CniError::with_details(INVALID_NETWORK_CONFIG, "invalid characters found in network name", name));
    }
    Ok(())
}

/// Validates an interface name: non-empty, at most 15 *bytes*, not `.`/`..`, and free of `/`,
/// `:` and Unicode whitespace (NBSP included), in that order of checks.
pub fn interface_name(name: &str) -> Result<(), CniError> {
    let code = INVALID_ENVIRONMENT_VARIABLES;
    if name.is_empty() {
        return Err(CniError::new(code, "interface name is empty"));
    }
    if name.len() > MAX_IFNAME_LEN {
        return Err(CniError::with_details(
            code,
            "interface name is too long",
            "interface name should be less than 16 characters",
        ));
    }
    if name == "." || name == ".." {
        return Err(CniError::new(code, "interface name is . or .."));
    }
    if name.chars().any(|c| c == '/' || c == ':' || is_go_space(c)) {
        return Err(CniError::new(code, "interface name contains / or : or whitespace characters"));
    }
    Ok(())
}

/// Go's `unicode.IsSpace`.
fn is_go_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}')
        || (c as u32 > 0xff && c.is_whitespace())
}

/// Whether `s` is a DNS-1123 label (Kubernetes' `validation.IsDNS1123Label`):
/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 bytes — a namespace name, or a network name
/// that also names a file.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(ok)
        && b.last().is_some_and(ok)
        && b.iter().all(|c| ok(c) || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for ok in ["a", "a-b", "0", "x1", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "é", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
