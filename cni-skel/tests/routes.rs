//! Moving default routes against the real kernel, in namespaces of the test's own (root only;
//! `BRAID_REQUIRE_ROOT_TESTS=1` turns the skip into a failure).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_skel::routes::{default_routes_in, move_default_routes};
use cni_skel::testing::{require_root, TempNetns};

#[test]
fn default_routes_move_to_the_chosen_interface_and_others_stay() {
    if !require_root("default_routes_move_to_the_chosen_interface_and_others_stay") {
        return;
    }
    let ns = TempNetns::new("routes");
    for (a, b, net) in [("rta", "rtap", "198.18.200"), ("rtb", "rtbp", "198.18.201"), ("rtc", "rtcp", "198.18.202")] {
        ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        ns.ip(&["link", "set", a, "up"]);
        ns.ip(&["link", "set", b, "up"]);
        ns.ip(&["addr", "add", &format!("{net}.2/24"), "dev", a]);
    }
    ns.ip(&["-6", "addr", "add", "2001:db8:200::2/64", "dev", "rta", "nodad"]);
    ns.ip(&["route", "add", "default", "via", "198.18.200.1", "dev", "rta"]);
    ns.ip(&["-6", "route", "add", "default", "via", "2001:db8:200::1", "dev", "rta"]);
    // Not ours to touch: a default route with a higher metric on an interface not named.
    ns.ip(&["route", "add", "default", "via", "198.18.202.1", "dev", "rtc", "metric", "500"]);
    let gws = ["198.18.201.1".parse().unwrap()];
    let removed = move_default_routes(&ns.path(), "rtb", &["rta".to_string()], &gws).unwrap();
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(removed.iter().all(|r| r.ifname == "rta"), "{removed:?}");
    let mut now: Vec<(String, String)> = default_routes_in(&ns.path())
        .unwrap()
        .into_iter()
        .map(|r| (r.ifname, r.gateway.map(|g| g.to_string()).unwrap_or_default()))
        .collect();
    now.sort();
    assert_eq!(now, [("rtb".to_string(), "198.18.201.1".to_string()), ("rtc".to_string(), "198.18.202.1".to_string())]);
    // Again: nothing to delete, the route exists already.
    assert!(move_default_routes(&ns.path(), "rtb", &["rta".to_string()], &gws).unwrap().is_empty());
    // An unreachable gateway and an unknown interface are named.
    let e = move_default_routes(&ns.path(), "rtb", &[], &["198.18.250.1".parse().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("via 198.18.250.1 on rtb"), "{e}");
    let e = move_default_routes(&ns.path(), "nosuch", &[], &[]).unwrap_err();
    assert!(e.to_string().contains("interface nosuch is not in netns"), "{e}");
}
