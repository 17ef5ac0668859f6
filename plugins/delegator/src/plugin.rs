//! The CNI commands of the delegator, on top of the shared attach engine.

use crate::config::{result_mode, ResultMode, RULES};
use crate::kubernetes::{self, default_route, status, Pod, StatusNetwork};
use braid_attach::{MetaCommand, SharedConfig};
use cni_skel::prelude::*;
use cni_types::merge::{merge, Attachment};
use cni_types::result::Route;
use cni_types::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// The plugin.
pub struct Delegator;

/// How ADD reports what its delegates did, decided before anything ran: the result it
/// returns, and the pod's network-status document.
pub(crate) struct Report {
    /// Which result: the primary delegate's or all merged.
    pub(crate) mode: ResultMode,
    /// One per delegate: how it appears in the network-status document.
    pub(crate) networks: Vec<StatusNetwork>,
    /// The network-status document's path (Kubernetes selection on, and a Kubernetes pod).
    pub(crate) status: Option<PathBuf>,
    /// `K8S_POD_UID`, recorded beside the document.
    pub(crate) pod_uid: Option<String>,
    /// The pod's networks annotation as the runtime passed it, recorded beside the document.
    pub(crate) requested: Option<String>,
    /// The default routes a kept attachment's `default-route` replaced before (an update's).
    pub(crate) replaced: Option<status::Replaced>,
    /// The pod's default network (`v1.multus-cni.io/default-network`) that took the cluster
    /// network's place, `namespace/name`: recorded in the status file, so that an update
    /// names the primary as ADD did.
    pub(crate) default_network: Option<String>,
}

impl Plugin for Delegator {
    fn about(&self) -> Option<String> {
        Some("braid delegator: attaches many networks in one ADD".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        Ok(self.add_in_family(args)?.to_latest())
    }

    fn add_in_family(&self, args: &CmdArgs) -> Result<AnyResult, CniError> {
        let mut config = SharedConfig::parse(args, &RULES)?;
        let kube = kubernetes::Config::parse(&config.conf)?;
        let mut networks: Vec<StatusNetwork> = config
            .delegates
            .iter()
            .enumerate()
            .map(|(i, d)| StatusNetwork {
                name: d.name().to_string(),
                default: i == 0,
                default_route: None,
                device_info: None,
                claim: None,
            })
            .collect();
        let mut info = None;
        let mut requested = None;
        let mut devices = None;
        // The selected delegates' resources, from the first selected delegate's index on.
        let mut resources = (0, Vec::new());
        let devinfo = Path::new(kubernetes::devices::DEVINFO_DIR);
        let mut primary = None;
        if let Some(k) = &kube {
            // The pod's own primary in the cluster network's place (its first delegate).
            if let Some(p) = kubernetes::default_network::select(k, &config.conf, &args.args, &args.ifname)? {
                if let (Some(d), Some(n)) = (config.delegates.first_mut(), networks.first_mut()) {
                    primary = Some(format!(
                        "default network {} (pod annotation {}) in place of {}",
                        p.network.name,
                        kubernetes::names::DEFAULT_NETWORK,
                        d.name()
                    ));
                    *d = p.delegate;
                    *n = p.network;
                }
            }
            let mut selection = kubernetes::select(k, &config.conf, &args.args, &config.delegates)?;
            // Only for networks that name a device-plugin resource: otherwise nothing runs.
            devices = kubernetes::devices::assign(&k.kubelet, &args.args, &args.container_id, devinfo, &mut selection)?;
            resources = (config.delegates.len(), selection.resources);
            config.delegates.extend(selection.delegates);
            networks.extend(selection.networks);
            info = selection.info;
            requested = selection.requested;
            braid_attach::delegates::validate(&config.delegates)?;
        }
        let mode = result_mode(&config.conf, config.delegates.len())?;
        let pod = Pod::from_args(&args.args);
        let status = kube.as_ref().and_then(|k| status::path(&k.status_dir, &pod, &args.container_id));
        let default_network = primary.as_ref().map(|_| networks[0].name.clone());
        let mut report =
            Report { mode, networks, status, pod_uid: pod.uid, requested, replaced: None, default_network };
        let staged = devices.is_some();
        let forget = || kubernetes::devices::forget(devinfo, &args.container_id);
        let mut m = MetaCommand::new(config, args, &RULES)?;
        // The device-info files last before the delegates run: every failure from here on
        // removes them.
        if staged {
            let selected = m.config.delegates.iter().skip(resources.0).zip(&resources.1);
            if let Err(e) = kubernetes::devices::stage(devinfo, selected) {
                forget();
                return Err(e);
            }
        }
        if let Some(line) = info {
            m.log.info(line);
        }
        if let Some(line) = primary {
            m.log.info(line);
        }
        if let Some(line) = devices {
            m.log.info(line);
        }
        if kube.is_some() && report.status.is_none() {
            m.log.info("no K8S_POD_NAMESPACE/K8S_POD_NAME in CNI_ARGS: no network-status document written");
        }
        let results = match m.add() {
            Ok(r) => r,
            Err(e) => {
                remove_status(&report, &mut m);
                if staged {
                    forget();
                }
                return Err(e);
            }
        };
        if staged {
            for (n, d) in report.networks.iter_mut().zip(&m.config.delegates) {
                n.device_info = kubernetes::devices::device_info(&d.runtime_config);
            }
        }
        let ifnames: Vec<String> = m.config.delegates.iter().map(|d| d.ifname.clone()).collect();
        let fresh = vec![true; ifnames.len()];
        match finish(&mut m, args, &report, &results, &ifnames, &fresh) {
            Ok(result) => Ok(result),
            Err(e) => {
                // Every delegate is in; undo them all, as for a delegate that failed.
                let mut msg = e.msg;
                if let Err(d) = m.del() {
                    msg.push_str(&format!("; rollback incomplete, state kept for DEL: {}", d.msg));
                }
                remove_status(&report, &mut m);
                if staged {
                    forget();
                }
                let e = CniError { code: e.code, msg, details: e.details };
                m.log.error(&e);
                Err(e)
            }
        }
    }

    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        // The document's path comes from today's configuration and the runtime's CNI_ARGS (the
        // same on DEL for containerd and CRI-O); a configuration that no longer parses only
        // loses the document, never the DEL.
        let kube = args.conf().ok().and_then(|c| kubernetes::Config::parse(c).ok().flatten());
        let status =
            kube.as_ref().and_then(|k| status::path(&k.status_dir, &Pod::from_args(&args.args), &args.container_id));
        let deleted = MetaCommand::open(args, &RULES).and_then(|mut m| m.del());
        if kube.is_some() && deleted.is_ok() {
            kubernetes::devices::forget(Path::new(kubernetes::devices::DEVINFO_DIR), &args.container_id);
        }
        let removed = status.map_or(Ok(()), |p| status::remove(&p));
        deleted.and(removed)
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        MetaCommand::open(args, &RULES)?.check()
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        MetaCommand::open(args, &RULES)?.gc()
    }

    /// Ready when every configured delegate can run (`braid_attach::status`); the delegator's
    /// own keys must read as ADD reads them. Networks a pod's annotation selects are not
    /// known until its ADD.
    fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        let unavailable = |e: CniError| e.with_code(cni_types::error::PLUGIN_NOT_AVAILABLE);
        let conf = args.conf().map_err(unavailable)?;
        kubernetes::Config::parse(conf).map_err(|e| unavailable(e.into()))?;
        cni_skel::keys::choice(conf, "result", &[("primary", ()), ("merged", ())], ()).map_err(unavailable)?;
        braid_attach::status::status(args, &RULES)
    }
}

fn remove_status(report: &Report, m: &mut MetaCommand) {
    if let Some(p) = &report.status {
        if let Err(e) = status::remove(p) {
            m.log.warn(&e);
        }
    }
}

/// After every delegate's ADD (or an update): the pod's default routes where `default-route`
/// asked for them (on an attachment `fresh`ly made: an update never moves routes of one it
/// kept), the result (converted to the configuration's version, once: what cannot be printed
/// fails here, while the caller can still undo the delegates), the network-status document.
/// `ifnames` are the attachments' interfaces. The pod namespace is read at most once here, for
/// the MACs/MTUs and the document together.
pub(crate) fn finish(
    m: &mut MetaCommand,
    args: &CmdArgs,
    report: &Report,
    results: &[AnyResult],
    ifnames: &[String],
    fresh: &[bool],
) -> Result<AnyResult, CniError> {
    let (result, replaced, links) = finish_result(m, args, report, results, ifnames, fresh)?;
    if let Some(path) = &report.status {
        let record = status::Record { replaced: replaced.as_ref(), ..status::Record::default() };
        write_status(m, args, report, path, (results, ifnames), links, record)?;
    }
    Ok(result)
}

/// What [`finish_result`] made: the result, the default routes replaced, the links it read.
pub(crate) type Finished = (AnyResult, Option<status::Replaced>, Option<Vec<cni_netlink::links::Link>>);

/// [`finish`] up to the document: the routes moved and the result made; what the moved
/// routes replaced (or, on a kept attachment, what it replaced before) and the links read.
pub(crate) fn finish_result(
    m: &mut MetaCommand,
    args: &CmdArgs,
    report: &Report,
    results: &[AnyResult],
    ifnames: &[String],
    fresh: &[bool],
) -> Result<Finished, CniError> {
    let chosen = report.networks.iter().enumerate().find_map(|(i, l)| l.default_route.as_ref().map(|g| (i, g)));
    let mut replaced = chosen.and_then(|(i, _)| report.replaced.clone().filter(|r| ifnames.get(i) == Some(&r.by)));
    if let Some((i, gateways)) = chosen.filter(|(i, _)| fresh.get(*i).copied().unwrap_or(false)) {
        let ifname = ifnames.get(i).cloned().unwrap_or_default();
        let others: Vec<String> = ifnames.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, n)| n.clone()).collect();
        let removed =
            default_route::move_default_routes(m.pod.rtnl()?, Path::new(&args.netns), &ifname, &others, gateways)
                .context(format_args!("default-route of {}", report.networks[i].name))?;
        for r in &removed {
            m.log.info(format_args!(
                "default-route of {}: removed the default route {} of {}",
                report.networks[i].name,
                r.gateway.map_or_else(|| "without gateway".to_string(), |g| format!("via {g}")),
                r.ifname
            ));
        }
        replaced = Some(status::Replaced { by: ifname, routes: removed });
    }
    let version = m.config.conf.version().to_string();
    let mut links = None;
    // The primary result handed on as its delegate made it, when its family is the
    // configuration's and nothing changed it: Go converts within a family without loss.
    let as_made = report.mode == ResultMode::Primary
        && chosen.is_none()
        && results[0].family() == cni_types::version::Family::of(&version).unwrap_or(results[0].family());
    let result = if as_made {
        results[0].clone()
    } else {
        let mut result = match report.mode {
            ResultMode::Primary => results[0].to_latest(),
            ResultMode::Merged => {
                let atts: Vec<Attachment> = results
                    .iter()
                    .zip(ifnames)
                    .map(|(r, ifname)| Attachment { result: r, ifname, sandbox: &args.netns })
                    .collect();
                let merged = merge(&atts);
                for w in &merged.warnings {
                    m.log.warn(format_args!("merge: {w}"));
                }
                merged.result
            }
        };
        if let Some((i, gateways)) = chosen {
            // The result says what the kernel now has: the chosen attachment's own default
            // routes (in a merged result) and the requested ones, no other.
            let keep: Vec<Route> = match report.mode {
                ResultMode::Merged => {
                    results[i].to_latest().routes.into_iter().filter(|r| r.dst.is_default()).collect()
                }
                ResultMode::Primary => Vec::new(),
            };
            set_default_routes(&mut result, &keep, gateways);
        }
        let with_mtu = cni_types::version::Version::V1_1_0.reached_by(&version);
        if braid_attach::sandbox::wants_links(&result, with_mtu) {
            braid_attach::sandbox::fill_links(&mut result, links.insert(m.pod.links()?), with_mtu);
        }
        AnyResult::V1(result)
    };
    let result = result.into_version(&version).map_err(|e| {
        CniError::new(cni_types::error::INTERNAL, format!("cannot express the result in cniVersion {version}: {e}"))
    })?;
    Ok((result, replaced, links))
}

/// Writes the network-status document of `atts` (results and interfaces) to `path`, with
/// `record`'s extras and the report's pod UID, sandbox and annotation.
pub(crate) fn write_status(
    m: &mut MetaCommand,
    args: &CmdArgs,
    report: &Report,
    path: &Path,
    (results, ifnames): (&[AnyResult], &[String]),
    links: Option<Vec<cni_netlink::links::Link>>,
    record: status::Record,
) -> Result<(), CniError> {
    {
        let atts: Vec<(&AnyResult, &str, &StatusNetwork)> =
            results.iter().zip(ifnames).zip(&report.networks).map(|((r, ifname), l)| (r, ifname.as_str(), l)).collect();
        // The pod namespace is read only for a MAC some result left out (most primaries
        // report theirs): one link dump fewer per ADD.
        let links = match links {
            Some(l) => l,
            None if status::needs_links(&atts) => m.pod.links()?,
            None => Vec::new(),
        };
        let (doc, addresses) = status::with_addresses(&atts, &links);
        let claims: Vec<_> = atts.iter().filter_map(|(_, ifname, n)| Some((n.claim.as_ref()?, *ifname))).collect();
        crate::kubernetes::claims::fill_metadata(&claims, &doc, &addresses)?;
        let record = status::Record {
            claims: &claims,
            pod_uid: report.pod_uid.as_deref(),
            sandbox: Some((&args.netns, &args.ifname)),
            requested: report.requested.as_deref(),
            default_network: report.default_network.as_deref(),
            addresses: Some(&addresses),
            ..record
        };
        status::write(path, &status::file(doc, record))?;
    }
    Ok(())
}

/// Drops every default route of `result` but `keep`, and adds one via each gateway.
fn set_default_routes(result: &mut CniResult, keep: &[Route], gateways: &[IpAddr]) {
    result.routes.retain(|r| !r.dst.is_default() || keep.contains(r));
    for gw in gateways {
        let any: IpAddr = if gw.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
        let Some(dst) = IpNet::new(any, 0) else { continue };
        let route = Route::new(dst, Some(*gw));
        if !result.routes.contains(&route) {
            result.routes.push(route);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_routes_of_the_result_are_replaced_by_the_requested_ones() {
        let r = |dst: &str, gw: &str| Route::new(IpNet::parse(dst).unwrap(), Some(gw.parse().unwrap()));
        let mut result = CniResult {
            routes: vec![r("0.0.0.0/0", "198.18.0.1"), r("198.19.0.0/24", "198.18.0.1"), r("::/0", "2001:db8::1")],
            ..CniResult::default()
        };
        let keep = [r("::/0", "2001:db8::1")];
        set_default_routes(&mut result, &keep, &["198.18.5.1".parse().unwrap(), "198.18.5.1".parse().unwrap()]);
        assert_eq!(
            result.routes,
            [r("198.19.0.0/24", "198.18.0.1"), r("::/0", "2001:db8::1"), r("0.0.0.0/0", "198.18.5.1")]
        );
    }
}
