//! An interface of the result: present where its `sandbox` says, with its MAC and MTU.

use super::{Finding, Item, Options, Place, Subject};
use crate::kernel::Snapshot;
use cni_types::ip::Mac;
use cni_types::result::Interface;

pub(super) fn subject_of(iface: &Interface, place: Place) -> String {
    match place {
        Place::Host => format!("{} (host)", iface.name),
        _ => iface.name.clone(),
    }
}

pub(super) fn names(snap: &Snapshot) -> String {
    let n: Vec<&str> = snap.links.iter().map(|l| l.name.as_str()).collect();
    if n.is_empty() {
        "no links".into()
    } else {
        n.join(", ")
    }
}

pub(super) fn check_interface(s: &Subject<'_>, iface: &Interface, opts: Options) -> Vec<Item> {
    let place = s.place(iface);
    let subject = subject_of(iface, place);
    let view = match place {
        Place::Elsewhere => {
            let why = format!("not checked: sandbox {:?} is not namespace {}", iface.sandbox, s.netns);
            return vec![Item::new(subject, "link", Finding::Skipped(why))];
        }
        Place::Host if !opts.check_host => {
            return vec![Item::new(subject, "link", Finding::Skipped("not checked: checkHost is false".into()))];
        }
        _ => s.view(place),
    };
    let Some(view) = view else {
        return vec![Item::new(subject, "link", Finding::Skipped("not checked: host namespace not read".into()))];
    };
    let Some(link) = view.link(&iface.name) else {
        let where_ = if place == Place::Host { "the plugin's namespace".to_string() } else { s.netns.to_string() };
        let why = format!("missing in {where_} (has: {})", names(view));
        return vec![Item::new(subject, "link", Finding::Mismatch(why))];
    };
    let mut items = vec![Item::new(subject.clone(), "link present", Finding::Ok)];
    if !iface.mac.is_empty() {
        let found = Mac::from_bytes(&link.mac);
        let finding = match Mac::parse(&iface.mac) {
            Ok(want) if want == found => Finding::Ok,
            Ok(_) => Finding::Mismatch(format!("expected, has {found}")),
            Err(e) => Finding::Mismatch(format!("cannot be compared: {e}")),
        };
        items.push(Item::new(subject.clone(), format!("mac {}", iface.mac), finding));
    }
    if iface.mtu > 0 {
        let finding = if i64::from(link.mtu) == iface.mtu {
            Finding::Ok
        } else {
            Finding::Mismatch(format!("expected, has {}", link.mtu))
        };
        items.push(Item::new(subject, format!("mtu {}", iface.mtu), finding));
    }
    items
}
