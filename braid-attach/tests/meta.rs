//! The shared meta-plugin setup: one state directory serves one plugin kind.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use braid_attach::{MetaCommand, PluginRules};
use cni_skel::CmdArgs;
use cni_types::version::Command;

const DELEGATOR: PluginRules<'static> =
    PluginRules { plugin: "delegator", delegates_optional: false, fixed_ifname: &|_, _| None };
const MERGER: PluginRules<'static> =
    PluginRules { plugin: "merger", delegates_optional: true, fixed_ifname: &|_, _| None };

fn args(command: Command, dir: &std::path::Path) -> CmdArgs {
    let conf = serde_json::json!({"cniVersion": "1.0.0", "name": "n", "type": "x", "stateDir": dir,
        "delegates": [{"type": "ptp"}]});
    CmdArgs {
        invocation: cni_types::Invocation {
            command,
            container_id: "ctr1".into(),
            netns: "/run/netns/braid-absent".into(),
            ifname: "eth0".into(),
            path: "/opt/cni/bin".into(),
            ..Default::default()
        },
        stdin_data: conf.to_string().into_bytes(),
        ..CmdArgs::default()
    }
}

#[test]
fn a_state_dir_serves_one_plugin_kind() {
    let dir = std::env::temp_dir().join(format!("braid-meta-owner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The first plugin to use the directory claims it; it may keep using it.
    MetaCommand::open(&args(Command::Check, &dir), &DELEGATOR).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join(braid_attach::owner::OWNER_FILE)).unwrap(), "delegator");
    MetaCommand::open(&args(Command::Check, &dir), &DELEGATOR).unwrap();
    // Another kind is refused on ADD (before anything runs) and CHECK, and its DEL touches
    // nothing: whatever state is there belongs to the delegator.
    let e = MetaCommand::open(&args(Command::Add, &dir), &MERGER).unwrap().add().unwrap_err();
    assert_eq!(e.code, 7);
    assert!(e.msg.contains("holds the delegator's state: give the merger a stateDir of its own"), "{e}");
    assert_eq!(MetaCommand::open(&args(Command::Check, &dir), &MERGER).unwrap().check().unwrap_err().code, 7);
    std::fs::write(dir.join("ctr1@eth0"), b"the delegator's").unwrap();
    MetaCommand::open(&args(Command::Del, &dir), &MERGER).unwrap().del().unwrap();
    assert_eq!(std::fs::read(dir.join("ctr1@eth0")).unwrap(), b"the delegator's");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_state_dir_replaced_by_a_symlink_is_refused_for_add_and_del_still_succeeds() {
    let base = std::env::temp_dir().join(format!("braid-meta-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("elsewhere")).unwrap();
    let dir = base.join("state");
    std::os::unix::fs::symlink(base.join("elsewhere"), &dir).unwrap();
    let e = MetaCommand::open(&args(Command::Add, &dir), &DELEGATOR).err().unwrap();
    assert_eq!(e.code, 5);
    assert!(e.msg.contains("is a symlink"), "{e}");
    // DEL works from the configuration (its one delegate's binary does not exist here, so
    // there is nothing it could have attached) and touches nothing behind the link.
    MetaCommand::open(&args(Command::Del, &dir), &DELEGATOR).unwrap().del().unwrap();
    assert_eq!(std::fs::read_dir(base.join("elsewhere")).unwrap().count(), 0);
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn an_owner_file_replaced_by_a_fifo_or_a_symlink_is_refused_without_blocking() {
    let base = std::env::temp_dir().join(format!("braid-meta-planted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    for (tag, why) in [("fifo", "not a regular file"), ("link", "Too many levels of symbolic links")] {
        let dir = base.join(tag);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let owner = dir.join(braid_attach::owner::OWNER_FILE);
        if tag == "fifo" {
            assert!(std::process::Command::new("mkfifo").arg(&owner).status().unwrap().success());
        } else {
            std::fs::write(base.join("merger"), b"merger").unwrap();
            std::os::unix::fs::symlink(base.join("merger"), &owner).unwrap();
        }
        let e = MetaCommand::open(&args(Command::Add, &dir), &DELEGATOR).err().unwrap();
        assert_eq!(e.code, 5, "{e}");
        assert!(e.msg.contains(".braid-owner") && e.msg.contains(why), "{e}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_fifo_in_conf_dir_is_skipped_not_waited_for() {
    let dir = std::env::temp_dir().join(format!("braid-meta-confdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Sorted first, so the lookup reaches it before the real one.
    assert!(std::process::Command::new("mkfifo").arg(dir.join("00-fifo.conflist")).status().unwrap().success());
    std::fs::write(dir.join("10-big.conflist"), " ".repeat((1 << 20) + 1)).unwrap();
    std::fs::write(dir.join("20-real.conflist"), r#"{"cniVersion":"1.0.0","name":"real","plugins":[{"type":"ptp"}]}"#)
        .unwrap();
    let conf = serde_json::json!({"cniVersion": "1.0.0", "name": "n", "type": "x", "confDir": dir,
        "delegates": ["real"]});
    let conf = cni_types::NetConf::parse(conf.to_string().as_bytes()).unwrap();
    let d = braid_attach::delegates::parse(&conf, &|_| None).unwrap();
    assert_eq!(d[0].name(), "real");
    std::fs::remove_dir_all(&dir).unwrap();
}
