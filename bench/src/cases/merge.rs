//! The merge of many results, in process (the plugins' allocator is this program's too).

use super::World;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use cni_types::merge::{merge, Attachment};
use cni_types::AnyResult;
use std::time::Instant;

/// The merge of 1,000 attachments, in process.
pub fn merge_1000(w: &World) -> (Vec<Sample>, Vec<Verdict>) {
    let one = AnyResult::from_bytes(
        br#"{"cniVersion":"1.0.0","interfaces":[{"name":"x","sandbox":"/run/netns/p"}],
             "ips":[{"address":"198.18.0.2/24","interface":0}],"routes":[{"dst":"0.0.0.0/0","gw":"198.18.0.1"}],
             "dns":{"nameservers":["198.18.0.53"]}}"#,
    );
    let mut s = Sample::new("merge, in process", "1,000 attachments", "ms");
    let Ok(one) = one else {
        return (vec![s], Vec::new());
    };
    let names: Vec<String> = (0..1000).map(|i| format!("net{i}")).collect();
    let atts: Vec<Attachment> =
        names.iter().map(|n| Attachment { result: &one, ifname: n, sandbox: "/run/netns/p" }).collect();
    for _ in 0..10 {
        std::hint::black_box(merge(std::hint::black_box(&atts)));
    }
    for _ in 0..w.reps(300) {
        let t = Instant::now();
        std::hint::black_box(merge(std::hint::black_box(&atts)));
        s.push(t.elapsed());
    }
    let v = Verdict::at_most("merge of 1,000 attachments", Estimate::median(&s.values, ALPHA), Limit::Ms(1.0));
    (vec![s], vec![v])
}
