//! What the DRA driver's parts need, resolved once from the options: the driver's name, the
//! devices' capacity, and where its files are — each as the agent reaches it (below
//! `--host-root`), and the DRA socket also as the node (the kubelet) sees it.

use crate::options::Options;
use std::path::PathBuf;

/// The DRA driver's settings (`--dra` and its flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dra {
    /// The driver's name (`--dra-driver-name`): the slices' `spec.driver`, the kubelet
    /// plugin's name, the claims' `status.devices[].driver`.
    pub driver: String,
    /// Each network device's capacity `attachments` (`--dra-attachments`).
    pub attachments: u64,
    /// The node's CNI bin dir, as the agent reaches it: a network is offered only when its
    /// plugins are there ([`super::inventory`]).
    pub cni_bin_dir: PathBuf,
    /// The kubelet's root dir (`--kubelet-dir`), as the agent reaches it.
    pub kubelet_dir: PathBuf,
    /// The kubelet's root dir as the node sees it (what the kubelet is told).
    pub kubelet_dir_on_node: PathBuf,
    /// Where prepared claims are recorded (`--dra-claims-dir`), as the agent reaches it.
    pub claims_dir: PathBuf,
    /// The delegator's `globalNamespaces` (`--global-namespaces`): networks a claim of any
    /// namespace may ask for, as an annotation may select them.
    pub global_namespaces: Vec<String>,
    /// Where KEP-5304 device metadata goes (`--dra-device-metadata`), `None` without it.
    pub metadata: Option<Metadata>,
}

/// The device metadata's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The plugin's data directory, `<kubeletDir>/plugins/<driver>`, as the agent reaches it.
    pub plugin_data_dir: PathBuf,
    /// The same as the node (the container runtime mounting the files, the delegator filling
    /// them) sees it.
    pub plugin_data_dir_on_node: PathBuf,
    /// The CDI spec directory (`--dra-cdi-dir`), as the agent reaches it.
    pub cdi_dir: PathBuf,
}

impl Dra {
    /// From the options; `None` without `--dra`.
    pub fn new(o: &Options) -> Option<Dra> {
        o.dra.then(|| Dra {
            driver: o.dra_driver_name.clone(),
            attachments: o.dra_attachments,
            cni_bin_dir: o.host(&o.cni_bin_dir),
            kubelet_dir: o.host(&o.kubelet_dir),
            kubelet_dir_on_node: o.kubelet_dir.clone(),
            claims_dir: o.host(&o.dra_claims_dir),
            global_namespaces: o.global_namespaces.clone(),
            metadata: o.dra_device_metadata.then(|| Metadata {
                plugin_data_dir: o.host(&o.kubelet_dir).join("plugins").join(&o.dra_driver_name),
                plugin_data_dir_on_node: o.kubelet_dir.join("plugins").join(&o.dra_driver_name),
                cdi_dir: o.host(&o.dra_cdi_dir),
            }),
        })
    }

    /// The kubelet's plugin-registration socket for this driver, as the agent reaches it:
    /// `<kubeletDir>/plugins_registry/<driver>-reg.sock` (k8s.io/dynamic-resource-allocation
    /// kubeletplugin/draplugin.go).
    pub fn registration_socket(&self) -> PathBuf {
        super::server::registration_socket(&self.kubelet_dir, &self.driver)
    }

    /// The DRA service's socket, as the agent reaches it: `<kubeletDir>/plugins/<driver>/dra.sock`.
    pub fn plugin_socket(&self) -> PathBuf {
        super::server::dra_socket(&self.kubelet_dir, &self.driver)
    }

    /// The DRA service's socket as the kubelet reaches it (PluginInfo's `endpoint`).
    pub fn plugin_endpoint(&self) -> PathBuf {
        super::server::dra_socket(&self.kubelet_dir_on_node, &self.driver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_where_the_kubelet_looks() {
        assert_eq!(Dra::new(&Options::default()), None);
        let o = Options { dra: true, kubernetes_api: true, ..Options::default() };
        let d = Dra::new(&o).unwrap();
        assert_eq!(
            d.registration_socket(),
            PathBuf::from("/host/var/lib/kubelet/plugins_registry/net.braid-cni.io-reg@braid.sock")
        );
        assert_eq!(d.plugin_socket(), PathBuf::from("/host/var/lib/kubelet/plugins/net.braid-cni.io/dra.sock"));
        assert_eq!(d.plugin_endpoint(), PathBuf::from("/var/lib/kubelet/plugins/net.braid-cni.io/dra.sock"));
        assert_eq!(d.claims_dir, PathBuf::from("/host/var/lib/braid/claims"));
        assert_eq!(d.cni_bin_dir, PathBuf::from("/host/opt/cni/bin"));
        assert_eq!(d.attachments, 1024);
        assert_eq!(d.metadata, None);
        let o = Options { dra_device_metadata: true, ..o };
        let m = Dra::new(&o).unwrap().metadata.unwrap();
        assert_eq!(m.plugin_data_dir, PathBuf::from("/host/var/lib/kubelet/plugins/net.braid-cni.io"));
        assert_eq!(m.plugin_data_dir_on_node, PathBuf::from("/var/lib/kubelet/plugins/net.braid-cni.io"));
        assert_eq!(m.cdi_dir, PathBuf::from("/host/var/run/cdi"));
    }
}
