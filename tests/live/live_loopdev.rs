//! The loop-device helper the live tests stand on: it creates, mounts, counts and tears down.
use crate::common;

use common::LoopDevice;

#[test]
fn loop_device_filesystem_is_created_counted_and_torn_down() {
    let _group = common::live_group(module_path!());
    if !common::require_root("loop_device_filesystem_is_created_counted_and_torn_down") {
        return;
    }
    let (path, name) = {
        let lo = LoopDevice::with_fs(64, "ext4");
        let before = lo.diskstats();
        std::fs::write(lo.mount_point().join("f"), vec![7u8; 1 << 20]).unwrap();
        common::run("sync", &[]);
        let after = lo.diskstats();
        // [6] is sectors written: at least the 1 MiB we wrote.
        assert!(after[6] - before[6] >= 2048, "sectors written {} -> {}", before[6], after[6]);
        (lo.path.clone(), lo.name.clone())
    };
    let listed = common::run("losetup", &["-a"]);
    assert!(!listed.contains(&format!("{}:", path.display())), "{name} still attached: {listed}");
}
