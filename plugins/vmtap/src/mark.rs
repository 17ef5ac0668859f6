//! The mark vmtap leaves on each tap it makes: its `IFLA_IFALIAS`, which says whose tap it is
//! and what vmtap did to the pod interface — state that lives and dies with the namespace.
//!
//! The mark is written while the tap is still non-persistent (it vanishes if vmtap dies before
//! that), and before the pod interface is touched. So a DEL — with or without `prevResult`,
//! after a crash at any point of ADD — finds every tap of its attachment, the pod interface it
//! was joined to, and whether the pod interface's ingress qdisc was vmtap's to remove; it
//! touches nothing unmarked.
//!
//! Format: `vmtap container=<CNI_CONTAINERID> ifname=<CNI_IFNAME> pod=<interface> ingress=<made|kept>`
//! (container IDs and interface names hold no spaces; `IFALIASZ` is 256 bytes).

/// The longest alias the kernel keeps (`IFALIASZ` − 1), as cni-netlink sends aliases.
pub use cni_netlink::links::MAX_ALIAS;

/// The mark of one tap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// `CNI_CONTAINERID` of the ADD that made it.
    pub container: String,
    /// `CNI_IFNAME` of that ADD (one attachment: container ID and ifname).
    pub ifname: String,
    /// The pod interface it is joined to.
    pub pod: String,
    /// vmtap added the pod interface's ingress qdisc — this attachment, or another one whose
    /// tap is joined to the same pod interface — and so removes it once no filter is left.
    pub made_ingress: bool,
}

impl Mark {
    /// The alias text.
    pub fn to_alias(&self) -> String {
        let ingress = if self.made_ingress { "made" } else { "kept" };
        format!("vmtap container={} ifname={} pod={} ingress={ingress}", self.container, self.ifname, self.pod)
    }

    /// Reads an alias; `None` for anything vmtap did not write.
    pub fn parse(alias: &str) -> Option<Mark> {
        let mut words = alias.split(' ');
        if words.next() != Some("vmtap") {
            return None;
        }
        let mut field = |key: &str| words.next()?.strip_prefix(key)?.strip_prefix('=').map(str::to_string);
        let container = field("container")?;
        let ifname = field("ifname")?;
        let pod = field("pod")?;
        let made_ingress = match field("ingress")?.as_str() {
            "made" => true,
            "kept" => false,
            _ => return None,
        };
        if words.next().is_some() {
            return None;
        }
        Some(Mark { container, ifname, pod, made_ingress })
    }

    /// Whether this tap belongs to the attachment (container ID, ifname).
    pub fn belongs_to(&self, container: &str, ifname: &str) -> bool {
        self.container == container && self.ifname == ifname
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_nothing_else_reads_as_one() {
        let m = Mark { container: "c0ffee".into(), ifname: "eth0".into(), pod: "net1".into(), made_ingress: true };
        assert_eq!(m.to_alias(), "vmtap container=c0ffee ifname=eth0 pod=net1 ingress=made");
        assert_eq!(Mark::parse(&m.to_alias()), Some(m.clone()));
        let kept = Mark { made_ingress: false, ..m.clone() };
        assert_eq!(Mark::parse(&kept.to_alias()), Some(kept));
        for other in [
            "",
            "vmtap",
            "my tap",
            "vmtap container=a ifname=b pod=c",
            "vmtap container=a ifname=b pod=c ingress=x",
            "vmtap container=a ifname=b pod=c ingress=made extra",
            "vmtap ifname=b container=a pod=c ingress=made",
        ] {
            assert_eq!(Mark::parse(other), None, "{other:?}");
        }
        assert!(m.belongs_to("c0ffee", "eth0"));
        assert!(!m.belongs_to("c0ffee", "net1"));
    }
}
