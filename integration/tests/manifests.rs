//! braid's two Kubernetes layouts as `kubectl kustomize` renders them: API mode
//! (`deploy/kubernetes`) grants the node agent exactly its rules, runs it with its token and
//! node name and binds the admission policy to the agent's ServiceAccount; the NAD CRD
//! (Multus's) is a kustomization of its own (`deploy/kubernetes/crd`), in neither layout, so
//! that uninstalling braid never deletes it; the no-API layout (`deploy/kubernetes/no-api`) is today's install with no
//! token, no RBAC, no CRD and no policy. Nothing here talks to an API server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../src/manifests.rs"]
mod manifests;

use manifests::{kinds_and_names, kustomize, object, read_yaml, rendered};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The node agent's permissions, exactly (issue 27): NADs get/list/watch, pods get/patch, Events
/// create in the core group, ResourceSlices list/watch (the node's DRA devices record) — nothing more.
fn agents_rules() -> Value {
    json!([
        {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list", "watch"]}
    ])
}

/// Rules as a set of (group, resource, verb) grants, whatever their grouping, order or extra
/// keys (a `resourceNames` or `nonResourceURLs` key fails the comparison instead).
fn grants(rules: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in rules.as_array().unwrap() {
        let keys: BTreeSet<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["apiGroups", "resources", "verbs"]), "a rule with other keys: {r}");
        for g in r["apiGroups"].as_array().unwrap() {
            for res in r["resources"].as_array().unwrap() {
                for v in r["verbs"].as_array().unwrap() {
                    out.insert(format!("{}/{}:{}", g.as_str().unwrap(), res.as_str().unwrap(), v.as_str().unwrap()));
                }
            }
        }
    }
    out
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().map(|s| s.as_str().unwrap()).collect()).unwrap_or_default()
}

/// The only container of the DaemonSet braid-install.
fn container(ds: &Value) -> &Value {
    let cs = ds["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 1, "{ds}");
    &cs[0]
}

#[test]
fn api_layout_grants_the_agent_exactly_its_rules() {
    let Some(objs) = rendered("api_layout_grants_the_agent_exactly_its_rules", "") else { return };
    assert_eq!(
        kinds_and_names(&objs),
        [
            "ClusterRole/braid-node-agent",
            "ClusterRoleBinding/braid-node-agent",
            "ConfigMap/braid-networks",
            "DaemonSet/braid-install",
            "ServiceAccount/braid",
            "ValidatingAdmissionPolicy/braid-node-agent",
            "ValidatingAdmissionPolicyBinding/braid-node-agent",
        ]
    );
    // The rules read back, compared as written and as the set of grants they make.
    let role = object(&objs, "ClusterRole", "braid-node-agent");
    assert_eq!(role["rules"], agents_rules(), "the ClusterRole's rules");
    assert_eq!(grants(&role["rules"]), grants(&agents_rules()));
    for forbidden in ["/pods:list", "/pods:watch", "/pods:update", "/pods:delete", "/pods/status:patch", "/secrets:get"]
    {
        assert!(!grants(&role["rules"]).contains(forbidden), "{forbidden}");
    }
    assert!(role.get("aggregationRule").is_none());

    // Bound to the ServiceAccount the DaemonSet runs as, and to nothing else.
    let sa = object(&objs, "ServiceAccount", "braid");
    let ds = object(&objs, "DaemonSet", "braid-install");
    let binding = object(&objs, "ClusterRoleBinding", "braid-node-agent");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "braid-node-agent"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}])
    );
    assert_eq!(sa["metadata"]["namespace"], ds["metadata"]["namespace"]);
    assert_eq!(ds["spec"]["template"]["spec"]["serviceAccountName"], sa["metadata"]["name"]);
    // The ServiceAccount lends no long-lived Secret token and no image-pull secret.
    assert!(sa.get("secrets").is_none() && sa.get("imagePullSecrets").is_none(), "{sa}");
}

#[test]
fn api_layout_runs_the_agent_with_its_token_and_node_name() {
    let Some(api) = rendered("api_layout_runs_the_agent_with_its_token_and_node_name", "") else { return };
    let no_api = kustomize("no-api");
    let ds = object(&api, "DaemonSet", "braid-install");
    let pod = &ds["spec"]["template"]["spec"];
    let c = container(ds);
    assert_eq!(pod["serviceAccountName"], "braid");
    // The kubelet mounts the bound, projected ServiceAccount token (the agent's credentials,
    // carrying its node's name) only with automountServiceAccountToken.
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert!(pod.get("serviceAccount").is_none(), "the deprecated alias would hide serviceAccountName");
    assert!(
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["mountPath"] != "/var/run/secrets/kubernetes.io/serviceaccount"),
        "no volume may shadow the token's mount"
    );
    assert_eq!(c["env"], json!([{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]));

    // The no-API layout's arguments (the ConfigMap source kept) plus --kubernetes-api.
    let plain = object(&no_api, "DaemonSet", "braid-install");
    let mut want = strings(&container(plain)["args"]);
    assert!(want.contains(&"--networks-configmap"), "{want:?}");
    want.push("--kubernetes-api");
    assert_eq!(strings(&c["args"]), want);

    // What the NAD mirror and the status publisher read on the node is mounted.
    let mounts: Vec<&str> =
        c["volumeMounts"].as_array().unwrap().iter().map(|m| m["mountPath"].as_str().unwrap()).collect();
    for want in ["/host/etc/cni/net.d", "/host/etc/cni/braid.d", "/host/run/braid", "/etc/braid/networks"] {
        assert!(mounts.contains(&want), "{want} not mounted: {mounts:?}");
    }
    // The installer's own parser takes the arguments, and the NAD conf dir it then reads (an
    // empty spec.config's file) is mounted, read-only, from the node's Multus conf dir.
    let args: Vec<String> = strings(&c["args"]).iter().map(|a| a.to_string()).collect();
    let braid_install::Action::Run(o) = braid_install::options::parse(args).unwrap() else { panic!("not a run") };
    assert!(o.kubernetes_api);
    let nad_dir = o.host(&o.nad_conf_dir).display().to_string();
    let m = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == nad_dir.as_str());
    let m = m.unwrap_or_else(|| panic!("{nad_dir} not mounted: {mounts:?}"));
    assert_eq!(m["readOnly"], true);
    let vol = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == m["name"]).unwrap();
    assert_eq!(vol["hostPath"]["path"], o.nad_conf_dir.display().to_string());

    // Otherwise the same DaemonSet and the same ConfigMap: undo the API mode's changes and the
    // no-API layout's objects come back exactly.
    let mut undone = ds.clone();
    let spec = undone["spec"]["template"]["spec"].as_object_mut().unwrap();
    spec.remove("serviceAccountName");
    spec.insert("automountServiceAccountToken".into(), json!(false));
    let uc = &mut undone["spec"]["template"]["spec"]["containers"][0];
    uc.as_object_mut().unwrap().remove("env");
    uc["args"].as_array_mut().unwrap().pop();
    uc["volumeMounts"].as_array_mut().unwrap().pop();
    undone["spec"]["template"]["spec"]["volumes"].as_array_mut().unwrap().pop();
    undone["metadata"]["annotations"]["braid.io/description"] =
        plain["metadata"]["annotations"]["braid.io/description"].clone();
    assert_eq!(&undone, plain);
    assert_eq!(object(&api, "ConfigMap", "braid-networks"), object(&no_api, "ConfigMap", "braid-networks"));
}

#[test]
fn no_api_layout_has_no_token_rbac_crd_or_policy() {
    let Some(objs) = rendered("no_api_layout_has_no_token_rbac_crd_or_policy", "no-api") else { return };
    assert_eq!(kinds_and_names(&objs), ["ConfigMap/braid-networks", "DaemonSet/braid-install"]);
    let ds = object(&objs, "DaemonSet", "braid-install");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert!(pod.get("serviceAccountName").is_none() && pod.get("serviceAccount").is_none(), "{pod}");
    let c = container(ds);
    assert!(c.get("env").is_none(), "{c}");
    assert!(!strings(&c["args"]).contains(&"--kubernetes-api"));
    let projected =
        pod["volumes"].as_array().unwrap().iter().any(|v| v.get("projected").is_some() || v.get("secret").is_some());
    assert!(!projected, "no token or Secret volume: {pod}");
    // The same objects the base holds: the overlay adds nothing.
    assert_eq!(kustomize("base"), objs);
}

/// Multus's NetworkAttachmentDefinition schema (k8snetworkplumbingwg/multus-cni,
/// deployments/multus-daemonset*.yml) without its descriptions: what validation and pruning
/// act on.
fn multus_nad_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {"config": {"type": "string"}}}
        }
    })
}

fn without_descriptions(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| *k != "description").map(|(k, x)| (k.clone(), without_descriptions(x))).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The NAD CRD is a kustomization of its own, `crd/`, and in no layout of braid's: deleting it
/// deletes every NAD of the cluster, other projects' too, so uninstalling braid (`kubectl delete
/// -k deploy/kubernetes`, or the no-API layout) must never select it.
#[test]
fn the_nad_crd_is_a_kustomization_of_its_own_that_uninstalling_braid_leaves() {
    let Some(crd) = rendered("the_nad_crd_is_a_kustomization_of_its_own_that_uninstalling_braid_leaves", "crd") else {
        return;
    };
    assert_eq!(kinds_and_names(&crd), ["CustomResourceDefinition/network-attachment-definitions.k8s.cni.cncf.io"]);
    for layout in ["", "no-api"] {
        let objs = kustomize(layout);
        assert!(
            objs.iter().all(|o| o["kind"] != "CustomResourceDefinition"),
            "deploy/kubernetes/{layout}: {:?}",
            kinds_and_names(&objs)
        );
    }
}

#[test]
fn the_crd_serves_nads_as_multus_does() {
    let Some(objs) = rendered("the_crd_serves_nads_as_multus_does", "crd") else { return };
    let crd = object(&objs, "CustomResourceDefinition", "network-attachment-definitions.k8s.cni.cncf.io");
    assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
    let spec = &crd["spec"];
    assert_eq!(spec["group"], "k8s.cni.cncf.io");
    assert_eq!(spec["scope"], "Namespaced");
    assert_eq!(
        spec["names"],
        json!({"plural": "network-attachment-definitions", "singular": "network-attachment-definition",
               "kind": "NetworkAttachmentDefinition", "shortNames": ["nad", "net-attach-def"]})
    );
    let versions = spec["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    let v1 = &versions[0];
    assert_eq!((&v1["name"], &v1["served"], &v1["storage"]), (&json!("v1"), &json!(true), &json!(true)));
    let keys: BTreeSet<&str> = v1.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["name", "served", "storage", "schema"]),
        "no subresources, columns or deprecation"
    );
    assert_eq!(without_descriptions(&v1["schema"]["openAPIV3Schema"]), multus_nad_schema());
    let spec_keys: BTreeSet<&str> = spec.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        spec_keys,
        BTreeSet::from(["group", "scope", "names", "versions"]),
        "no conversion, no preserveUnknownFields"
    );
    // Shared with every NPWG implementation: no braid label, so braid's uninstall never
    // selects it (deleting it would delete every NAD).
    assert!(crd["metadata"].get("labels").is_none(), "{crd}");
}

#[test]
fn admission_policy_is_bound_to_the_agents_service_account() {
    let Some(objs) = rendered("admission_policy_is_bound_to_the_agents_service_account", "") else { return };
    let sa = object(&objs, "ServiceAccount", "braid");
    let policy = object(&objs, "ValidatingAdmissionPolicy", "braid-node-agent");
    let binding = object(&objs, "ValidatingAdmissionPolicyBinding", "braid-node-agent");
    assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(binding["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(binding["spec"], json!({"policyName": "braid-node-agent", "validationActions": ["Deny"]}));
    let spec = &policy["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    // A PATCH of a pod is admitted as an UPDATE of the pod; the agent's RBAC grants no other
    // pod write.
    assert_eq!(
        spec["matchConstraints"],
        json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]})
    );
    // The one match condition names exactly the ServiceAccount the DaemonSet runs as.
    let username = format!(
        "system:serviceaccount:{}:{}",
        sa["metadata"]["namespace"].as_str().unwrap(),
        sa["metadata"]["name"].as_str().unwrap()
    );
    assert_eq!(
        spec["matchConditions"],
        json!([{"name": "braid-node-agent", "expression": format!("request.userInfo.username == '{username}'")}])
    );
    // The API server refuses a message with a line break.
    for v in spec["validations"].as_array().unwrap() {
        assert!(!v["message"].as_str().unwrap().contains('\n'), "{v}");
        assert_eq!(v["reason"], "Forbidden");
    }
    // kustomize passes the policy through unchanged: what the CEL test evaluates
    // (admission-policy.yaml as written) is what a cluster gets.
    let written = read_yaml("admission-policy.yaml");
    assert_eq!(&written[0], policy);
    assert_eq!(&written[1], binding);
}

/// Every file of each kustomization directory is one of its resources, and nothing else sits
/// there: a manifest left out of a layout would silently never be applied.
#[test]
fn every_manifest_is_in_its_kustomization() {
    let listed = |dir: &str| -> BTreeSet<String> {
        let k = &read_yaml(&format!("{dir}/kustomization.yaml"))[0];
        k["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect()
    };
    let present = |dir: &str| -> BTreeSet<String> {
        std::fs::read_dir(manifests::deploy_dir().join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "kustomization.yaml")
            .collect()
    };
    // The API layout: base/ and its own files; no-api/ beside it is the other layout, crd/ the
    // NAD CRD on its own.
    let mut top = present(".");
    assert!(top.remove("no-api"));
    assert!(top.remove("crd"));
    assert_eq!(listed("."), top, "deploy/kubernetes");
    assert_eq!(listed("crd"), present("crd"), "deploy/kubernetes/crd");
    assert_eq!(listed("base"), present("base"), "deploy/kubernetes/base");
    assert_eq!(listed("no-api"), BTreeSet::from(["../base".to_string()]));
    assert!(present("no-api").is_empty(), "no-api holds no manifest of its own");
    // The hot-plug layout beside it (kustomize takes no parent directory as a resource).
    let hot = "../kubernetes-hotplug";
    assert_eq!(listed(hot), BTreeSet::from(["../kubernetes".to_string(), "pods-reader.yaml".to_string()]));
    assert_eq!(present(hot), BTreeSet::from(["pods-reader.yaml".to_string()]));
    // The DRA layout beside it.
    let dra = "../kubernetes-dra";
    let files = ["dra-rbac.yaml", "dra-admission-policy.yaml", "device-class.yaml"].map(String::from);
    let mut want = BTreeSet::from(files.clone());
    assert_eq!(present(dra), want);
    want.insert("../kubernetes".to_string());
    assert_eq!(listed(dra), want);
}

/// The README's table of what API mode grants states exactly these rules, and both READMEs say
/// which Kubernetes versions the policy needs and which real ones braid was tested on.
#[test]
fn readmes_state_the_rules_and_their_limits() {
    let root = manifests::deploy_dir().join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let table = readme.split("| API group | resource | verbs | for |").nth(1).expect("README.md: the table of grants");
    let mut stated = BTreeSet::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let group = cells[1].trim_matches('`').split_whitespace().next().unwrap().trim_matches('`');
        let group = if group == "\"\"" { "" } else { group };
        for verb in cells[3].split(", ") {
            stated.insert(format!("{group}/{}:{verb}", cells[2].trim_matches('`')));
        }
    }
    assert_eq!(stated, grants(&agents_rules()), "README.md's table of grants");
    let install = std::fs::read_to_string(root.join("braid-install/README.md")).unwrap();
    // The versions the real node pins (integration/node/*/go.mod), as the docs must name them.
    let pinned = |module: &str, dir: &str| {
        let gomod = std::fs::read_to_string(root.join("integration/node").join(dir).join("go.mod")).unwrap();
        let line = gomod.lines().find(|l| l.trim_start().starts_with(&format!("{module} v"))).unwrap();
        line.split_whitespace().nth(1).unwrap().to_string()
    };
    let kubernetes = format!("Kubernetes {}", pinned("k8s.io/kubernetes", "kubernetes"));
    let containerd = format!("containerd {}", pinned("github.com/containerd/containerd/v2", "containerd"));
    for (file, text) in [("README.md", &readme), ("braid-install/README.md", &install)] {
        // Words, whatever the line breaks.
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for want in
            ["1.32 or later", "ServiceAccountTokenPodNodeInfo", &kubernetes, &containerd, "scripts/node.sh up 2"]
        {
            assert!(text.contains(want), "{file} lacks {want:?}");
        }
    }
    assert!(install.contains("## Deploying the API mode"));
}

/// The hot-plug layout (`deploy/kubernetes-hotplug`) is the API layout and exactly this more:
/// `list`/`watch` on pods in a ClusterRole of its own, `--hotplug`, the node's PID namespace and
/// root (HostToContainer), a privileged container; the admission policy is still bound.
#[test]
fn hotplug_layout_is_the_api_layout_plus_reading_pods_and_the_nodes_root() {
    let Some(hot) =
        rendered("hotplug_layout_is_the_api_layout_plus_reading_pods_and_the_nodes_root", "../kubernetes-hotplug")
    else {
        return;
    };
    let api = kustomize("");
    let mut want = kinds_and_names(&api);
    want.extend([
        "ClusterRole/braid-node-agent-hotplug".to_string(),
        "ClusterRoleBinding/braid-node-agent-hotplug".to_string(),
    ]);
    want.sort();
    assert_eq!(kinds_and_names(&hot), want);
    assert_eq!(object(&hot, "ClusterRole", "braid-node-agent")["rules"], agents_rules());
    let extra = object(&hot, "ClusterRole", "braid-node-agent-hotplug");
    assert_eq!(grants(&extra["rules"]), BTreeSet::from(["/pods:list".to_string(), "/pods:watch".to_string()]));
    let binding = object(&hot, "ClusterRoleBinding", "braid-node-agent-hotplug");
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "braid", "namespace": "kube-system"}]));
    assert_eq!(
        object(&hot, "ValidatingAdmissionPolicyBinding", "braid-node-agent"),
        object(&api, "ValidatingAdmissionPolicyBinding", "braid-node-agent")
    );

    let (ds, base) = (object(&hot, "DaemonSet", "braid-install"), object(&api, "DaemonSet", "braid-install"));
    let mut args = strings(&container(base)["args"]);
    args.push("--hotplug");
    assert_eq!(strings(&container(ds)["args"]), args);
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"], true);
    assert_eq!(spec["hostNetwork"], true);
    assert_eq!(container(ds)["securityContext"]["privileged"], true);
    let root = container(ds)["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == "/host").unwrap();
    assert_eq!(root["mountPropagation"], "HostToContainer");
    let vol = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == root["name"]).unwrap();
    assert_eq!(vol["hostPath"]["path"], "/");
}

/// The DRA driver's grants (braid-install --dra), exactly: its node's ResourceSlices (narrowed
/// by the policy), get of its Node, get of ResourceClaims, their status patch and the per-driver
/// status verbs for braid's driver only.
fn dra_rules() -> Value {
    json!([
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["patch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"], "resourceNames": ["net.braid-cni.io"],
         "verbs": ["associated-node:update", "associated-node:patch"]}
    ])
}

/// The DRA layout (`deploy/kubernetes-dra`) is the API layout and exactly this more: `--dra` and
/// `--dra-device-metadata`, the kubelet's plugin dirs, the claims dir and the CDI spec dir
/// mounted where the agent's options look, a
/// ClusterRole of its own, two admission policies bound, the DeviceClass — and one driver name
/// in all of them, the agent's default.
#[test]
fn dra_layout_is_the_api_layout_plus_the_driver() {
    let Some(dra) = rendered("dra_layout_is_the_api_layout_plus_the_driver", "../kubernetes-dra") else { return };
    let api = kustomize("");
    let mut want = kinds_and_names(&api);
    want.extend(
        [
            "ClusterRole/braid-node-agent-dra",
            "ClusterRoleBinding/braid-node-agent-dra",
            "DeviceClass/net.braid-cni.io",
            "ValidatingAdmissionPolicy/braid-node-agent-resourceclaims",
            "ValidatingAdmissionPolicy/braid-node-agent-resourceslices",
            "ValidatingAdmissionPolicyBinding/braid-node-agent-resourceclaims",
            "ValidatingAdmissionPolicyBinding/braid-node-agent-resourceslices",
        ]
        .map(String::from),
    );
    want.sort();
    assert_eq!(kinds_and_names(&dra), want);
    // The API layout's objects but the DaemonSet, unchanged.
    for o in &api {
        if o["kind"] != "DaemonSet" {
            assert_eq!(object(&dra, o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()), o);
        }
    }
    let driver = braid_install::options::DRA_DRIVER;
    let role = object(&dra, "ClusterRole", "braid-node-agent-dra");
    assert_eq!(role["rules"], dra_rules());
    let binding = object(&dra, "ClusterRoleBinding", "braid-node-agent-dra");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "braid-node-agent-dra"})
    );
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "braid", "namespace": "kube-system"}]));

    // The DaemonSet: the API layout's arguments plus --dra and --dra-device-metadata, which the
    // agent's parser takes.
    let (ds, base) = (object(&dra, "DaemonSet", "braid-install"), object(&api, "DaemonSet", "braid-install"));
    let mut args = strings(&container(base)["args"]);
    args.push("--dra");
    args.push("--dra-device-metadata");
    assert_eq!(strings(&container(ds)["args"]), args);
    let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let braid_install::Action::Run(o) = braid_install::options::parse(owned).unwrap() else { panic!("not a run") };
    let d = braid_install::dra::config::Dra::new(&o).expect("--dra on");
    assert_eq!(d.driver, driver);
    let m = d.metadata.clone().expect("--dra-device-metadata on");
    // Each directory the driver uses is a hostPath mount at the node's own path below /host.
    let pod = &ds["spec"]["template"]["spec"];
    let mounts = container(ds)["volumeMounts"].as_array().unwrap();
    for (dir, node_dir) in [
        (d.registration_socket().parent().unwrap().to_path_buf(), o.kubelet_dir.join("plugins_registry")),
        (d.plugin_socket().parent().unwrap().to_path_buf(), o.kubelet_dir.join("plugins").join(driver)),
        (d.claims_dir.clone(), o.dra_claims_dir.clone()),
        (d.cni_bin_dir.clone(), o.cni_bin_dir.clone()),
        (m.cdi_dir.clone(), o.dra_cdi_dir.clone()),
        (m.plugin_data_dir.clone(), o.kubelet_dir.join("plugins").join(driver)),
    ] {
        let dir = dir.display().to_string();
        let m = mounts.iter().find(|m| m["mountPath"] == dir.as_str()).unwrap_or_else(|| panic!("{dir} not mounted"));
        assert!(m.get("readOnly").is_none_or(|r| r == false), "{m}");
        let vol = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == m["name"]).unwrap();
        assert_eq!(vol["hostPath"]["path"], node_dir.display().to_string(), "{vol}");
    }
    // Otherwise the API layout's DaemonSet: undo the two flags and their four mounts.
    let mut undone = ds.clone();
    let uc = &mut undone["spec"]["template"]["spec"]["containers"][0];
    let ua = uc["args"].as_array_mut().unwrap();
    ua.truncate(ua.len() - 2);
    let um = uc["volumeMounts"].as_array_mut().unwrap();
    um.truncate(um.len() - 4);
    let uv = undone["spec"]["template"]["spec"]["volumes"].as_array_mut().unwrap();
    uv.truncate(uv.len() - 4);
    assert_eq!(&undone, base);

    // The DeviceClass selects the driver's devices, and only those.
    let class = object(&dra, "DeviceClass", driver);
    assert_eq!(class["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(
        class["spec"],
        json!({"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]})
    );

    // The policies: bound (Deny), matching braid's ServiceAccount as the base policy does,
    // naming the same driver, with messages the API server takes.
    let base_policy = object(&api, "ValidatingAdmissionPolicy", "braid-node-agent");
    let written = read_yaml("../kubernetes-dra/dra-admission-policy.yaml");
    for (name, resources, operations) in [
        ("braid-node-agent-resourceslices", json!(["resourceslices"]), json!(["CREATE", "UPDATE", "DELETE"])),
        ("braid-node-agent-resourceclaims", json!(["resourceclaims", "resourceclaims/status"]), json!(["UPDATE"])),
    ] {
        let policy = object(&dra, "ValidatingAdmissionPolicy", name);
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail");
        assert_eq!(
            spec["matchConstraints"],
            json!({"resourceRules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"], "operations": operations, "resources": resources}]})
        );
        assert_eq!(spec["matchConditions"], base_policy["spec"]["matchConditions"], "{name}");
        let var = |n: &str| {
            spec["variables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == n)
                .unwrap_or_else(|| panic!("{name}: {n}"))["expression"]
                .clone()
        };
        assert_eq!(var("driver"), json!(format!("'{driver}'")));
        let base_token = base_policy["spec"]["variables"].as_array().unwrap().iter().find(|v| v["name"] == "tokenNode");
        assert_eq!(var("tokenNode"), base_token.unwrap()["expression"], "{name}: the base policy's tokenNode");
        for v in spec["validations"].as_array().unwrap() {
            assert!(!v["message"].as_str().unwrap().contains('\n'), "{v}");
            assert_eq!(v["reason"], "Forbidden");
        }
        assert_eq!(
            object(&dra, "ValidatingAdmissionPolicyBinding", name)["spec"],
            json!({"policyName": name, "validationActions": ["Deny"]})
        );
        assert!(written.contains(policy), "{name}: kustomize passes the policy through unchanged");
    }
}
