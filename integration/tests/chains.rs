//! braid composed with the chained plugins operators run: each of the reference chained plugins
//! (Debian's containernetworking-plugins) after braid's two merged layouts —
//! `[delegator{bridge}, merger{ptp}, P, verifier]` and `[delegator merged {bridge, ptp}, P,
//! verifier]` — through ADD, CHECK and DEL. What P did is read from the kernel: it acted on
//! the cluster interface (`eth0`), not on `net1`; DEL leaves no link, reservation, state,
//! iptables rule, policy rule or qdisc. sbr also runs inside the secondary network's own
//! conflist, its usual place.
//!
//! CHECK: where P's CHECK fails in the plain chain `[bridge, P]` too (an upstream quirk of this
//! release, named at each test), braid's CHECK must fail with that very error — braid adds no
//! failure of its own and hides none — and the verifier, run on the final result, passes.
//! `docs/chaining.md` says where each plugin goes and why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness, Netns};
use cni_runtime::chain::{ChainError, RuntimeConf};
use cni_types::version::Command;
use cni_types::CniResult;
use serde_json::{json, Value};

/// The two ways braid hands a chain a merged result.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `[delegator{bridge}, merger{ptp}]`.
    DelegatorThenMerger,
    /// `[delegator merged {bridge, ptp}]`.
    Merged,
}

const LAYOUTS: [Layout; 2] = [Layout::DelegatorThenMerger, Layout::Merged];

/// Every chain of a test shares the network name, the container ID, the bridge's name and the
/// subnets — each in a world of its own (host namespace, IPAM, state, cache) — so that the
/// plain chain's errors and braid's are comparable word for word (portmap names its chain
/// after the network and the container).
struct Names {
    id: String,
    bridge: String,
    /// The cluster network is 198.18.`n`.0/24, net1's 198.18.`n+1`.0/24.
    n: u8,
}

impl Names {
    fn new(n: u8) -> Names {
        Names { id: unique("ctr"), bridge: unique("br"), n }
    }

    fn cluster(&self, h: &Harness) -> Value {
        json!({"name": "cluster", "type": "bridge", "bridge": self.bridge, "isDefaultGateway": true, "ipam": h.host_local(self.n)})
    }

    fn side(&self, h: &Harness) -> Value {
        json!({"name": "side", "type": "ptp", "ipam": h.host_local(self.n + 1)})
    }

    /// braid's plugins giving `layout`'s merged result, `secondary` as net1.
    fn braid(&self, h: &Harness, layout: Layout, secondary: Value) -> Vec<Value> {
        match layout {
            Layout::DelegatorThenMerger => vec![
                json!({"type": "delegator", "stateDir": h.dir.path().join("dstate"), "delegates": [self.cluster(h)]}),
                json!({"type": "merger", "stateDir": h.dir.path().join("mstate"), "delegates": [secondary]}),
            ],
            Layout::Merged => vec![json!({"type": "delegator", "stateDir": h.dir.path().join("dstate"),
                "result": "merged", "delegates": [self.cluster(h), secondary]})],
        }
    }
}

/// One chain in a world of its own.
struct Run {
    h: Harness,
    ctr: Netns,
    rt: RuntimeConf,
    list: Value,
    what: String,
}

impl Run {
    /// `plugins(h)` as the conflist `chain` (1.0.0: what Debian's plugins speak), for `ifname`,
    /// with the runtime's capability arguments `caps`.
    fn new(what: &str, names: &Names, ifname: &str, caps: &Value, plugins: impl FnOnce(&Harness) -> Vec<Value>) -> Run {
        let h = Harness::new("chn");
        let ctr = h.container("chn");
        let mut rt = h.runtime(&ctr, &names.id, ifname);
        rt.capability_args = caps.as_object().cloned().unwrap_or_default();
        let list = json!({"cniVersion": "1.0.0", "name": "chain", "plugins": plugins(&h)});
        Run { h, ctr, rt, list, what: what.to_string() }
    }

    fn add(&self) -> CniResult {
        self.h.add(&self.list, &self.rt).unwrap_or_else(|e| panic!("{}: ADD: {e}", self.what)).to_latest()
    }

    fn check(&self) -> Result<(), ChainError> {
        self.h.check(&self.list, &self.rt)
    }

    /// The verifier's CHECK of the chain's final result, as the chain would run it last (a
    /// failing CHECK earlier in the chain stops the chain before it).
    fn verifier_check(&self, result: &CniResult) {
        let prev = cni_types::AnyResult::V1(result.clone()).to_value();
        let conf = json!({"cniVersion": "1.0.0", "name": "chain", "type": "verifier", "prevResult": prev});
        self.h
            .exec_plugin("verifier", Command::Check, &self.rt, &serde_json::to_vec(&conf).unwrap())
            .unwrap_or_else(|e| panic!("{}: the verifier's CHECK of the final result: {e}", self.what));
    }

    /// DEL, then nothing is left: no link but `lo` in the pod and the bridge (which upstream's
    /// bridge never deletes) on the host; no reservation, braid state or cache entry; no
    /// iptables rule naming the pod's addresses or the container; no policy rule beyond the
    /// kernel's own; no shaping qdisc; no file of tuning's.
    fn del_leaves_nothing(&self, result: &CniResult, bridge: &str) {
        let what = &self.what;
        self.h.del(&self.list, &self.rt).unwrap_or_else(|e| panic!("{what}: DEL: {e}"));
        assert_eq!(self.ctr.links(), ["lo"], "{what}: pod links left");
        let host = self.h.host.links();
        assert!(host.iter().all(|l| l == "lo" || l == bridge), "{what}: host links left: {host:?}");
        assert!(self.h.reservations().is_empty(), "{what}: {:?}", self.h.reservations());
        assert!(self.h.state_files().is_empty(), "{what}: {:?}", self.h.state_files());
        let cache: Vec<String> = self.h.dir.files().into_iter().filter(|f| f.starts_with("cache/")).collect();
        assert!(cache.is_empty(), "{what}: {cache:?}");
        let tuning: Vec<String> = self.h.dir.files().into_iter().filter(|f| f.starts_with("tuning/")).collect();
        assert!(tuning.is_empty(), "{what}: tuning's saved state left: {tuning:?}");
        for tool in ["iptables-save", "ip6tables-save"] {
            let rules = self.h.host.exec(tool, &[]);
            for ip in &result.ips {
                let addr = format!("{}/", ip.address.addr());
                assert!(!rules.contains(&addr), "{what}: {tool} still names {addr}:\n{rules}");
            }
            assert!(!rules.contains(&self.rt.container_id), "{what}: {tool} still names the container:\n{rules}");
            assert!(!rules.contains(":CNI-DN-"), "{what}: a per-container portmap chain is left:\n{rules}");
        }
        for family in ["-4", "-6"] {
            let rules = self.ctr.ip_json(&[family, "rule", "show"]);
            let extra: Vec<&Value> = rules
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| ![0, 32766, 32767].contains(&r["priority"].as_u64().unwrap_or(0)))
                .collect();
            assert!(extra.is_empty(), "{what}: policy rules left: {extra:?}");
        }
        let qdiscs = self.h.host.exec("tc", &["qdisc", "show"]);
        for kind in ["tbf", "ingress", "clsact", "htb"] {
            assert!(!qdiscs.contains(&format!("qdisc {kind} ")), "{what}: {kind} qdisc left:\n{qdiscs}");
        }
    }

    /// The name of the host side of the pod's veth `name`.
    fn host_peer(&self, name: &str) -> String {
        let peer = self.ctr.link(name).unwrap()["link_index"].as_u64().unwrap();
        let links = self.h.host.ip_json(&["link", "show"]);
        let link = links.as_array().unwrap().iter().find(|l| l["ifindex"].as_u64() == Some(peer));
        link.and_then(|l| l["ifname"].as_str())
            .unwrap_or_else(|| panic!("{}: no host peer of {name}", self.what))
            .into()
    }
}

/// What the plain chain's CHECK does under this release.
enum Plain {
    /// It passes: braid's must too.
    Passes,
    /// It fails with an upstream quirk (the message contains this): braid's must fail with the
    /// same error, no other.
    Quirk(&'static str),
}

/// Runs the plain chain `[bridge, plugin]` (or what `plugins` builds) through ADD, CHECK, DEL
/// and returns its CHECK's outcome, after asserting it is the one `expect` says.
fn plain_check(
    names: &Names,
    ifname: &str,
    caps: &Value,
    expect: &Plain,
    plugins: impl FnOnce(&Harness) -> Vec<Value>,
) -> Result<(), ChainError> {
    let run = Run::new("plain chain", names, ifname, caps, plugins);
    let r = run.add();
    let check = run.check();
    match (expect, &check) {
        (Plain::Passes, Ok(())) => {}
        (Plain::Quirk(words), Err(e)) if e.cause().is_some_and(|c| c.msg.contains(words)) => {}
        (_, other) => panic!("the plain chain's CHECK changed under this release: {other:?}"),
    }
    run.del_leaves_nothing(&r, &names.bridge);
    check
}

/// braid's CHECK against the plain chain's: both pass, or both fail with the failing plugin's
/// same error (braid's may carry the delegate that failed in front).
fn assert_same_check(what: &str, braid: Result<(), ChainError>, plain: &Result<(), ChainError>) {
    match (&braid, plain) {
        (Ok(()), Ok(())) => {}
        (Err(b), Err(p)) => {
            let (b, p) = (b.cause().unwrap(), p.cause().unwrap());
            assert_eq!(b.code, p.code, "{what}: braid's CHECK {b:?}, the plain chain's {p:?}");
            assert!(
                b.msg == p.msg || b.msg.ends_with(&format!(": {}", p.msg)),
                "{what}: braid's CHECK fails with {:?}, the plain chain's with {:?}",
                b.msg,
                p.msg
            );
        }
        _ => panic!("{what}: braid's CHECK {braid:?}, the plain chain's {plain:?}: braid must add no failure"),
    }
}

fn addr(r: &CniResult, i: usize) -> String {
    r.ips[i].address.addr().to_string()
}

/// The pod's IPs in braid's merged result: the cluster network's first, indexed to eth0, then
/// net1's — what every chained plugin after braid relies on.
fn assert_layout(what: &str, r: &CniResult) {
    let names: Vec<&str> = r.ips.iter().map(|ip| r.interfaces[ip.interface.unwrap() as usize].name.as_str()).collect();
    assert_eq!(names, ["eth0", "net1"], "{what}");
}

/// portmap DNATs the host port to the cluster interface's address only. CHECK passes as in the
/// plain `[bridge, portmap]` chain.
///
/// Changed since 1.1.1 (Debian's package, which this suite ran until issue 47): there CHECK
/// looked for the IPv6 DNAT chain even when the pod had no IPv6 address and failed with "could
/// not check ipv6 dnat: chain CNI-DN-… not found in iptables table nat", in the plain chain as
/// well; v1.10.0 checks only the families the pod has.
#[test]
fn portmap_after_merged_results() {
    if !require_root("portmap_after_merged_results") {
        return;
    }
    let names = Names::new(150);
    let caps = json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]});
    let portmap = json!({"type": "portmap", "capabilities": {"portMappings": true}});
    let plain = plain_check(&names, "eth0", &caps, &Plain::Passes, |h| vec![names.cluster(h), portmap.clone()]);
    for layout in LAYOUTS {
        let what = format!("portmap after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &caps, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([portmap.clone(), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        let nat = run.h.host.exec("iptables-save", &["-t", "nat"]);
        let dnat: Vec<&str> = nat.lines().filter(|l| l.contains("-j DNAT")).collect();
        assert_eq!(dnat.len(), 1, "{what}:\n{nat}");
        assert!(dnat[0].ends_with(&format!("--to-destination {}:80", addr(&r, 0))), "{what}: {}", dnat[0]);
        assert!(!nat.contains(&addr(&r, 1)), "{what}: net1's address in the nat table:\n{nat}");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}

/// bandwidth shapes the host side of the cluster interface's veth (tbf on it, its ingress
/// redirected to an ifb with tbf), not net1's. CHECK passes as in `[bridge, bandwidth]`.
#[test]
fn bandwidth_after_merged_results() {
    if !require_root("bandwidth_after_merged_results") {
        return;
    }
    let names = Names::new(152);
    let caps = json!({"bandwidth": {"ingressRate": 8_000_000, "ingressBurst": 16_000_000, "egressRate": 8_000_000, "egressBurst": 16_000_000}});
    let bandwidth = json!({"type": "bandwidth", "capabilities": {"bandwidth": true}});
    let plain = plain_check(&names, "eth0", &caps, &Plain::Passes, |h| vec![names.cluster(h), bandwidth.clone()]);
    for layout in LAYOUTS {
        let what = format!("bandwidth after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &caps, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([bandwidth.clone(), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        let kinds = |dev: &str| -> Vec<String> {
            let q: Value = serde_json::from_str(&run.h.host.exec("tc", &["-j", "qdisc", "show", "dev", dev])).unwrap();
            q.as_array().unwrap().iter().map(|x| x["kind"].as_str().unwrap().to_string()).collect()
        };
        let (eth0_host, net1_host) = (run.host_peer("eth0"), run.host_peer("net1"));
        let on_eth0 = kinds(&eth0_host);
        assert!(on_eth0.contains(&"tbf".into()) && on_eth0.contains(&"ingress".into()), "{what}: {on_eth0:?}");
        let on_net1 = kinds(&net1_host);
        assert!(!on_net1.iter().any(|k| k == "tbf" || k == "ingress"), "{what}: net1's host veth shaped: {on_net1:?}");
        let ifbs: Vec<String> = run.h.host.links().into_iter().filter(|l| l.starts_with("bwp")).collect();
        assert_eq!(ifbs.len(), 1, "{what}: {:?}", run.h.host.links());
        assert!(kinds(&ifbs[0]).contains(&"tbf".into()), "{what}");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}

/// firewall (iptables backend) accepts forwarding to and from **every IP of its prevResult**
/// (upstream `plugins/meta/firewall/iptables.go`, `addRules`, walks `result.IPs` without
/// looking at their interface): after a merged result, net1's address too — what the same
/// plugin would do in net1's own chain. CHECK passes.
///
/// To open the cluster network's address only, firewall goes inside the cluster network's own
/// conflist (braid's delegate `{"plugins": [bridge, firewall]}`): braid replays its CHECK and
/// DEL with that conflist's own result. Not before the merger: libcni sends every plugin the
/// chain's *final* result on CHECK and DEL, so there it CHECKs net1's address, which it never
/// opened (`docs/chaining.md`).
#[test]
fn firewall_after_merged_results_and_in_the_cluster_conflist() {
    if !require_root("firewall_after_merged_results_and_in_the_cluster_conflist") {
        return;
    }
    let names = Names::new(154);
    let none = json!({});
    let firewall = json!({"type": "firewall"});
    let plain = plain_check(&names, "eth0", &none, &Plain::Passes, |h| vec![names.cluster(h), firewall.clone()]);
    let accepted = |run: &Run, ip: &str| {
        let filter = run.h.host.exec("iptables-save", &["-t", "filter"]);
        filter.lines().any(|l| l == format!("-A CNI-FORWARD -s {ip}/32 -j ACCEPT"))
    };
    for layout in LAYOUTS {
        let what = format!("firewall after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &none, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([firewall.clone(), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        assert!(accepted(&run, &addr(&r, 0)), "{what}: eth0's address");
        assert!(accepted(&run, &addr(&r, 1)), "{what}: upstream's firewall acts on every IP of the result");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
    // In the cluster network's conflist: eth0's address only, CHECK clean.
    let what = "[delegator merged {{[bridge, firewall]}, ptp}, verifier]";
    let run = Run::new(what, &names, "eth0", &none, |h| {
        let mut bridge = names.cluster(h);
        bridge.as_object_mut().unwrap().remove("name");
        let cluster = json!({"name": "cluster", "plugins": [bridge, firewall.clone()]});
        vec![
            json!({"type": "delegator", "stateDir": h.dir.path().join("dstate"), "result": "merged",
                "delegates": [cluster, names.side(h)]}),
            json!({"type": "verifier"}),
        ]
    });
    let r = run.add();
    assert_layout(what, &r);
    assert!(accepted(&run, &addr(&r, 0)) && !accepted(&run, &addr(&r, 1)), "{what}");
    assert_same_check(what, run.check(), &plain);
    run.verifier_check(&r);
    run.del_leaves_nothing(&r, &names.bridge);
    // Before the merger: ADD sees eth0 alone, but CHECK gets the final result, net1 included.
    let what = "[delegator{bridge}, firewall, merger{ptp}, verifier]";
    let run = Run::new(what, &names, "eth0", &none, |h| {
        let mut p = names.braid(h, Layout::DelegatorThenMerger, names.side(h));
        p.insert(1, firewall.clone());
        p.push(json!({"type": "verifier"}));
        p
    });
    let r = run.add();
    assert!(accepted(&run, &addr(&r, 0)) && !accepted(&run, &addr(&r, 1)), "{what}");
    let e = run.check().expect_err("firewall before the merger CHECKs the final result");
    let want =
        format!("expected rule [-d {}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT] not found", addr(&r, 1));
    assert_eq!(e.cause().unwrap().msg, want, "{what}");
    run.del_leaves_nothing(&r, &names.bridge);
}

/// tuning changes `CNI_IFNAME` — eth0 — only; its saved state (for DEL's restore) is gone
/// after DEL. CHECK passes.
#[test]
fn tuning_after_merged_results() {
    if !require_root("tuning_after_merged_results") {
        return;
    }
    let names = Names::new(156);
    let none = json!({});
    let tuning = |h: &Harness| json!({"type": "tuning", "mtu": 1400, "dataDir": h.dir.path().join("tuning")});
    let plain = plain_check(&names, "eth0", &none, &Plain::Passes, |h| vec![names.cluster(h), tuning(h)]);
    for layout in LAYOUTS {
        let what = format!("tuning after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &none, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([tuning(h), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        let mtu = |ns: &Netns, name: &str| ns.link(name).unwrap()["mtu"].as_u64().unwrap();
        assert_eq!(mtu(&run.ctr, "eth0"), 1400, "{what}");
        assert_eq!(mtu(&run.ctr, "net1"), 1500, "{what}: net1 changed");
        assert_eq!(mtu(&run.h.host, &run.host_peer("eth0")), 1500, "{what}: the host side changed");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}

/// `(priority, table)` of the pod's rules whose source is `ip`.
fn rules_from(ctr: &Netns, ip: &str) -> Vec<(u64, String)> {
    let rules = ctr.ip_json(&["rule", "show"]);
    let mine = rules.as_array().unwrap().iter().filter(|r| r["src"] == ip);
    mine.map(|r| (r["priority"].as_u64().unwrap(), r["table"].as_str().unwrap().to_string())).collect()
}

/// The devices of the routes of one table of the pod (IPv4).
fn route_devs(ctr: &Netns, table: &str) -> Vec<String> {
    let routes = ctr.ip_json(&["-4", "route", "show", "table", table]);
    routes.as_array().unwrap().iter().map(|r| r["dev"].as_str().unwrap_or_default().to_string()).collect()
}

/// sbr adds a rule for `CNI_IFNAME`'s addresses only — eth0's — and moves eth0's routes (the
/// default route with them) to table 100; net1's stay in main. The verifier, last, finds
/// eth0's routes through the rule (ADD enforces it).
///
/// Quirk (1.1.1): every main plugin's CHECK looks for its gateway and routes in the main table
/// (`pkg/ip/utils.go`, `ValidateExpectedRoute`; bridge's and ptp's `cmdCheck`), where sbr no
/// longer leaves them: the plain `[bridge, sbr]` chain's CHECK fails with "Failed to find
/// Gateway … for interface eth0", and braid's with the same error of its bridge delegate.
#[test]
fn sbr_after_merged_results() {
    if !require_root("sbr_after_merged_results") {
        return;
    }
    let names = Names::new(158);
    let none = json!({});
    let sbr = json!({"type": "sbr"});
    let plain = plain_check(&names, "eth0", &none, &Plain::Quirk("Failed to find Gateway"), |h| {
        vec![names.cluster(h), sbr.clone()]
    });
    for layout in LAYOUTS {
        let what = format!("sbr after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &none, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([sbr.clone(), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        assert_eq!(rules_from(&run.ctr, &addr(&r, 0)), [(32765, "100".to_string())], "{what}");
        assert!(rules_from(&run.ctr, &addr(&r, 1)).is_empty(), "{what}: a rule for net1's address");
        let table = route_devs(&run.ctr, "100");
        assert!(!table.is_empty() && table.iter().all(|d| d == "eth0"), "{what}: table 100: {table:?}");
        let main = route_devs(&run.ctr, "main");
        assert!(main.contains(&"net1".to_string()) && !main.contains(&"eth0".to_string()), "{what}: main: {main:?}");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}

/// sbr in the secondary network's own conflist (`{"plugins": [ptp, sbr]}` as braid's delegate):
/// a rule for net1's address, net1's routes in table 100, eth0's untouched in main. Its CHECK
/// fails as in the plain `[ptp, sbr]` chain on net1 (the quirk above, from ptp).
#[test]
fn sbr_in_a_secondary_networks_own_conflist() {
    if !require_root("sbr_in_a_secondary_networks_own_conflist") {
        return;
    }
    let names = Names::new(160);
    let none = json!({});
    let sbr = json!({"type": "sbr"});
    let plain = plain_check(&names, "net1", &none, &Plain::Quirk("Failed to find Gateway"), |h| {
        vec![names.side(h), sbr.clone()]
    });
    for layout in LAYOUTS {
        let what = format!("[ptp, sbr] as net1 in {layout:?}");
        let run = Run::new(&what, &names, "eth0", &none, |h| {
            let mut side = names.side(h);
            side.as_object_mut().unwrap().remove("type");
            let ipam = side.as_object_mut().unwrap().remove("ipam").unwrap();
            let secondary = json!({"name": "side", "plugins": [{"type": "ptp", "ipam": ipam}, sbr.clone()]});
            let mut p = names.braid(h, layout, secondary);
            p.push(json!({"type": "verifier"}));
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        assert_eq!(rules_from(&run.ctr, &addr(&r, 1)), [(32765, "100".to_string())], "{what}");
        assert!(rules_from(&run.ctr, &addr(&r, 0)).is_empty(), "{what}: a rule for eth0's address");
        let table = route_devs(&run.ctr, "100");
        assert!(!table.is_empty() && table.iter().all(|d| d == "net1"), "{what}: table 100: {table:?}");
        let main = route_devs(&run.ctr, "main");
        assert!(main.contains(&"eth0".to_string()) && !main.contains(&"net1".to_string()), "{what}: main: {main:?}");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}

/// vrf enslaves `CNI_IFNAME` — eth0 — to a VRF whose table holds its routes; net1 stays out.
/// The verifier finds eth0's routes in the VRF's table. Needs a kernel with VRF support: where
/// the kernel has none, a loud SKIPPED line (not a pass, not a failure even under
/// `BRAID_REQUIRE_ROOT_TESTS=1`: root cannot add a kernel feature).
#[test]
fn vrf_after_merged_results() {
    const TEST: &str = "vrf_after_merged_results";
    if !require_root(TEST) {
        return;
    }
    if let Err(why) = braid_integration::kernel_supports_link(&["vrf", "table", "10"]) {
        braid_integration::skip_for_kernel(TEST, &format!("no VRF support (`ip link add type vrf`: {why})"));
        return;
    }
    let names = Names::new(162);
    let none = json!({});
    let vrf = json!({"type": "vrf", "vrfname": "blue"});
    let plain = {
        let run = Run::new("plain chain", &names, "eth0", &none, |h| vec![names.cluster(h), vrf.clone()]);
        let r = run.add();
        let check = run.check();
        run.del_leaves_nothing(&r, &names.bridge);
        check
    };
    for layout in LAYOUTS {
        let what = format!("vrf after {layout:?}");
        let run = Run::new(&what, &names, "eth0", &none, |h| {
            let mut p = names.braid(h, layout, names.side(h));
            p.extend([vrf.clone(), json!({"type": "verifier"})]);
            p
        });
        let r = run.add();
        assert_layout(&what, &r);
        assert_eq!(run.ctr.link("eth0").unwrap()["master"], "blue", "{what}");
        assert!(run.ctr.link("net1").unwrap().get("master").is_none(), "{what}: net1 enslaved");
        assert_same_check(&what, run.check(), &plain);
        run.verifier_check(&r);
        run.del_leaves_nothing(&r, &names.bridge);
    }
}
