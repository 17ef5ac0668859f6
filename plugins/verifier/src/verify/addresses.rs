//! An IP of the result: on the interface its `interface` index names, settled (IPv6 DAD).

use super::{Finding, Item, Options, Place, Subject};
use crate::kernel;
use cni_types::ip::IpNet;
use std::net::IpAddr;

pub(super) fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        IpAddr::V4(v4) => v4.is_link_local(),
    }
}

pub(super) fn check_address(s: &Subject<'_>, (name, place): (&str, Place), want: IpNet, opts: Options) -> Item {
    let subject = if place == Place::Host { format!("{name} (host)") } else { name.to_string() };
    let claim = format!("address {want}");
    let view = match place {
        Place::Elsewhere => {
            return Item::new(
                subject,
                claim,
                Finding::Skipped("not checked: its interface is in another sandbox".into()),
            )
        }
        Place::Host if !opts.check_host => {
            return Item::new(subject, claim, Finding::Skipped("not checked: checkHost is false".into()))
        }
        _ => s.view(place),
    };
    let Some(view) = view else {
        return Item::new(subject, claim, Finding::Skipped("not checked: host namespace not read".into()));
    };
    let Some(link) = view.link(name) else {
        return Item::new(subject, claim, Finding::Mismatch(format!("missing: no link {name}")));
    };
    let on_link = |a: &&kernel::Addr| a.ifindex == link.index;
    let found = view.addrs.iter().filter(on_link).find(|a| a.net == want);
    match found {
        Some(a) if a.dadfailed => {
            Item::new(subject, claim, Finding::Mismatch("present but failed duplicate address detection".into()))
        }
        Some(a) if a.tentative => Item::new(subject, claim, Finding::Pending("still tentative (IPv6 DAD)".into())),
        Some(_) => Item::new(subject, claim, Finding::Ok),
        None => {
            let has: Vec<String> = view
                .addrs
                .iter()
                .filter(on_link)
                .filter(|a| {
                    a.net.is_ipv4() == want.is_ipv4() && (!is_link_local(a.net.addr()) || is_link_local(want.addr()))
                })
                .map(|a| a.net.to_string())
                .collect();
            let elsewhere: Vec<String> = view
                .addrs
                .iter()
                .filter(|a| a.net.addr() == want.addr() && a.ifindex != link.index)
                .map(|a| format!("{} on {}", a.net, view.link_name(a.ifindex)))
                .collect();
            let mut why =
                format!("missing (has: {})", if has.is_empty() { "none".to_string() } else { has.join(", ") });
            if !elsewhere.is_empty() {
                why.push_str(&format!("; found {}", elsewhere.join(", ")));
            }
            Item::new(subject, claim, Finding::Mismatch(why))
        }
    }
}
